"""Anthropic Messages and the OpenAI Responses API, as the fake server's native upstreams.

What the providers document and koog must live with, enforced:

Messages (`POST /v1/messages`):
  - `model`, `max_tokens` and an `anthropic-version` header are required; a key in
    `x-api-key`. With `thinking` on, `budget_tokens` ≥ 1024 and < `max_tokens`, and no
    `temperature`.
  - A `thinking` block's `signature` is bound to its prefix: the system prompt and every
    message before the assistant message holding it, compared without `cache_control`.
    A replayed block whose signature or prefix changed is a 400 ("Invalid `signature` in
    `thinking` block"). `redacted_thinking` data likewise.
  - When thinking is `enabled` and the request continues a tool loop (the last assistant
    message has `tool_use`), that message must begin with a thinking block (400 otherwise);
    `adaptive` thinking may not have thought at all, so it asks for none (Claude Code sends
    adaptive thinking and does not send thinking blocks back).
  - Prompt caching at breakpoints: the prompt is tools, then system blocks, then each
    message's blocks; each block with `cache_control` writes the prefix through it to the
    cache, and a request reads the longest cached prefix ending at a breakpoint or up to
    20 blocks before one. Usage says `cache_read_input_tokens`,
    `cache_creation_input_tokens` and the rest in `input_tokens`.
  - Thinking is answered as a `thinking` block (its text, then its signature) before the
    reply; a scripted `{"redacted": true}` adds a `redacted_thinking` block.

Responses (`POST /v1/responses`):
  - Reasoning is answered, when `reasoning` is asked, as a `reasoning` item with
    `encrypted_content` (when `include` asks for it) bound to the request's input; a
    replayed reasoning item whose `encrypted_content` the server did not issue, or was
    altered, is a 400 (`invalid_encrypted_content`).
  - Automatic prefix caching: `usage.input_tokens_details.cached_tokens`, the tokens the
    request shares from its start with the previous request's (one slot).
  - `previous_response_id` resolves a response stored with `store` true.

Replies come from the fake's script queue (`content`, `tool_calls`, `status`, ...) or the
echo of the last user text, as for chat completions; `deep`, `huge_line` and `error_event`
(tests/fakes/hostile.py) in each protocol's own shapes: Messages' `error` event
(`{"type": "error", "error": {...}}`), the Responses API's (`{"type": "error", "code",
"message", "param", "sequence_number"}`). `server.native_log` holds each
answered request's figures (`{"protocol", "input", "cache_read", "cache_write", "rejected"}`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
import uuid
from typing import TYPE_CHECKING, Any

from tests.fakes import hostile

if TYPE_CHECKING:
    from tests.fakes.openai_server import _Handler

_SECRET = b"fake-upstream"
LOOKBACK = 20  # blocks before a breakpoint the cache is also looked up at


def _canonical(value: Any) -> Any:
    """A value without `cache_control` anywhere: breakpoints move, meaning does not."""
    if isinstance(value, dict):
        return {k: _canonical(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_canonical(v) for v in value]
    return value


def _digest(value: Any) -> str:
    text = json.dumps(_canonical(value), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def _sign(prefix: str, payload: str) -> str:
    mac = hmac.new(_SECRET, f"{prefix}\n{payload}".encode(), hashlib.sha256).digest()
    return base64.b64encode(mac).decode()


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, dict)]


def _tokens(value: Any) -> int:
    from tests.fakes.openai_server import text_tokens

    return max(1, text_tokens(json.dumps(_canonical(value), ensure_ascii=False)))


class MessagesCache:
    """Anthropic's prompt cache: prefixes through a breakpoint, by digest."""

    def __init__(self) -> None:
        self.entries: set[str] = set()

    def account(self, body: dict[str, Any]) -> tuple[int, int, int]:
        """(input_tokens, cache_read, cache_write) for this request; its breakpoints'
        prefixes are cached after it."""
        sequence: list[Any] = []
        system = body.get("system")
        tools = body.get("tools") or []
        sequence.extend({"tool": t} for t in tools)
        sequence.extend({"system": b} for b in _blocks(system))
        for i, m in enumerate(body.get("messages") or []):
            sequence.extend(
                {"at": i, "role": m.get("role"), **b} for b in _blocks(m.get("content"))
            )
        sizes = [_tokens(b) for b in sequence]
        marks = [i for i, b in enumerate(sequence) if _marked(b)]
        running = hashlib.sha256()
        prefixes: list[str] = []
        for b in sequence:
            running.update(_digest(b).encode())
            prefixes.append(running.copy().hexdigest())
        read_through = -1
        for mark in marks:
            for i in range(mark, max(-1, mark - LOOKBACK - 1), -1):
                if prefixes[i] in self.entries:
                    read_through = max(read_through, i)
                    break
        last_mark = max(marks, default=-1)
        read = sum(sizes[: read_through + 1])
        write = sum(sizes[read_through + 1 : last_mark + 1]) if last_mark > read_through else 0
        for mark in marks:
            self.entries.add(prefixes[mark])
        return sum(sizes) - read - write, read, write


def _marked(block: Any) -> bool:
    if not isinstance(block, dict):
        return False
    if "cache_control" in block:
        return True
    return any(isinstance(v, dict) and "cache_control" in v for v in block.values())


def _error(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


def _thinking_problem(body: dict[str, Any]) -> str | None:
    """What Anthropic refuses about a request's thinking blocks, or None."""
    messages = body.get("messages") or []
    system = body.get("system")
    for i, m in enumerate(messages):
        if m.get("role") != "assistant":
            continue
        prefix = _digest({"system": system, "messages": messages[:i]})
        for j, b in enumerate(_blocks(m.get("content"))):
            where = f"messages.{i}.content.{j}"
            if b.get("type") == "thinking":
                if b.get("signature") != _sign(prefix, str(b.get("thinking", ""))):
                    return f"{where}: Invalid `signature` in `thinking` block"
            elif b.get("type") == "redacted_thinking":
                data = str(b.get("data", ""))
                if not data.startswith("R") or data[1:] != _sign(prefix, "redacted"):
                    return f"{where}: Invalid `data` in `redacted_thinking` block"
    if (body.get("thinking") or {}).get("type") != "enabled" or not messages:
        return None  # adaptive thinking may have left a turn without any
    last = next((m for m in reversed(messages) if m.get("role") == "assistant"), None)
    if last is None:
        return None
    blocks = _blocks(last.get("content"))
    continues = messages[-1].get("role") == "user" and any(
        b.get("type") == "tool_result" for b in _blocks(messages[-1].get("content"))
    )
    if (
        continues
        and any(b.get("type") == "tool_use" for b in blocks)
        and blocks[0].get("type") not in ("thinking", "redacted_thinking")
    ):
        return (
            "Expected `thinking` or `redacted_thinking`, but found `"
            f"{blocks[0].get('type')}`. When `thinking` is enabled, a final `assistant` "
            "message must start with a thinking block"
        )
    return None


def _thinking_on(body: dict[str, Any]) -> bool:
    thinking = body.get("thinking")
    return isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive")


def _last_user_text(messages: list[dict[str, Any]], kinds: tuple[str, ...]) -> str:
    for m in reversed(messages):
        if m.get("role") != "user":
            continue
        content = m.get("content")
        if isinstance(content, str):
            return content
        texts = [str(b.get("text", "")) for b in _blocks(content) if b.get("type") in kinds]
        if texts:
            return "".join(texts)
        results = [b for b in _blocks(content) if b.get("type") in ("tool_result",)]
        if results:
            return "tool result"
    return ""


def answer_messages(handler: _Handler, body: dict[str, Any]) -> None:
    fake = handler.fake
    body["_path"] = handler.path
    body["_headers"] = {k.lower(): v for k, v in handler.headers.items()}
    headers = body["_headers"]
    problem: tuple[int, str, str] | None = None
    if not headers.get("x-api-key") and not headers.get("authorization"):
        problem = (401, "authentication_error", "x-api-key header is required")
    elif not headers.get("anthropic-version"):
        problem = (400, "invalid_request_error", "anthropic-version: header is required")
    elif "thinking" in body and not isinstance(body["thinking"], dict):
        problem = (400, "invalid_request_error", "thinking: Input should be a valid dictionary")
    elif not isinstance(body.get("max_tokens"), int):
        problem = (400, "invalid_request_error", "max_tokens: Field required")
    elif (
        _thinking_on(body)
        and body.get("thinking", {}).get("type") == "enabled"
        and not (1024 <= int(body["thinking"].get("budget_tokens", 0)) < body["max_tokens"])
    ):
        problem = (
            400,
            "invalid_request_error",
            "thinking.budget_tokens: must be ≥ 1024 and less than max_tokens",
        )
    elif _thinking_on(body) and body.get("temperature") not in (None, 1, 1.0):
        problem = (400, "invalid_request_error", "temperature may only be 1 with thinking")
    else:
        found = _thinking_problem(body)
        if found is not None:
            problem = (400, "invalid_request_error", found)
    if problem is not None:
        with fake.lock:
            fake.requests.append(body)
            fake.native_log.append({"protocol": "messages", "rejected": problem[2]})
        handler._json(problem[0], _error(problem[1], problem[2]))
        return
    script = fake.next_response(body)
    time.sleep(float(script.get("delay", fake.default_delay)))
    if "status" in script:
        status = int(script["status"])
        kind = _KINDS.get(status, "api_error")
        error = _error(kind, str(script.get("message", f"scripted {status}")))
        if "deep" in script:
            error["error"]["details"] = hostile.deep(script["deep"])
        handler._json(status, error)
        return
    messages = body.get("messages") or []
    with fake.lock:
        uncached, read, write = fake.messages_cache.account(body)
        fake.native_log.append(
            {"protocol": "messages", "input": uncached, "cache_read": read, "cache_write": write}
        )
    text = script.get("content", "".join(script.get("chunks", [])))
    content: list[dict[str, Any]] = []
    if _thinking_on(body):
        prefix = _digest({"system": body.get("system"), "messages": messages})
        thought = f"thinking about: {_last_user_text(messages, ('text',))[:60]}"
        content.append(
            {"type": "thinking", "thinking": thought, "signature": _sign(prefix, thought)}
        )
        if script.get("redacted"):
            content.append({"type": "redacted_thinking", "data": "R" + _sign(prefix, "redacted")})
    if text:
        content.append({"type": "text", "text": text})
    for call in script.get("tool_calls") or []:
        arguments = call.get("arguments", "{}")
        given = json.loads(arguments) if isinstance(arguments, str) else arguments
        content.append(
            {
                "type": "tool_use",
                "id": call.get("id") or f"toolu_{uuid.uuid4().hex[:20]}",
                "name": call["name"],
                "input": given,
            }
        )
    stop = "tool_use" if script.get("tool_calls") else script.get("stop_reason", "end_turn")
    usage = {
        "input_tokens": uncached,
        "cache_read_input_tokens": read,
        "cache_creation_input_tokens": write,
        "output_tokens": max(1, sum(_tokens(b) for b in content)),
    }
    message = {
        "id": f"msg_{uuid.uuid4().hex[:20]}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model"),
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": usage,
    }
    if "deep" in script:
        message["container"] = {"id": hostile.deep(script["deep"])}
    if not body.get("stream"):
        handler._json(200, message)
        return
    _open_sse(handler)
    try:
        start = {
            **message,
            "content": [],
            "stop_reason": None,
            "usage": {**usage, "output_tokens": 1},
        }
        _sse(handler, "message_start", {"type": "message_start", "message": start})
        for index, block in enumerate(content):
            _stream_block(handler, index, block, float(script.get("chunk_delay", 0)))
        if "huge_line" in script:
            delta = {"type": "text_delta", "text": ""}
            _huge(
                handler,
                "content_block_delta",
                {"type": "content_block_delta", "index": 0, "delta": delta},
                int(script["huge_line"]),
            )
        if "error_event" in script:
            said = {"type": "overloaded_error", "message": str(script["error_event"])}
            _sse(handler, "error", {"type": "error", "error": said})
            _close_sse(handler)
            return
        _sse(
            handler,
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": usage["output_tokens"]},
            },
        )
        _sse(handler, "message_stop", {"type": "message_stop"})
        _close_sse(handler)
    except (BrokenPipeError, ConnectionResetError):
        handler.close_connection = True


def _stream_block(handler: _Handler, index: int, block: dict[str, Any], delay: float) -> None:
    kind = block["type"]
    empty = {
        "text": {"type": "text", "text": ""},
        "thinking": {"type": "thinking", "thinking": "", "signature": ""},
        "tool_use": {**block, "input": {}},
        "redacted_thinking": block,
    }[kind]
    _sse(
        handler,
        "content_block_start",
        {"type": "content_block_start", "index": index, "content_block": empty},
    )
    deltas: list[dict[str, Any]] = []
    if kind == "text":
        words = block["text"].split(" ")
        deltas = [
            {"type": "text_delta", "text": w + (" " if i < len(words) - 1 else "")}
            for i, w in enumerate(words)
        ]
    elif kind == "thinking":
        half = len(block["thinking"]) // 2
        deltas = [
            {"type": "thinking_delta", "thinking": block["thinking"][:half]},
            {"type": "thinking_delta", "thinking": block["thinking"][half:]},
            {"type": "signature_delta", "signature": block["signature"]},
        ]
    elif kind == "tool_use":
        text = json.dumps(block["input"])
        cut = len(text) // 2
        deltas = [
            {"type": "input_json_delta", "partial_json": text[:cut]},
            {"type": "input_json_delta", "partial_json": text[cut:]},
        ]
    for delta in deltas:
        _sse(
            handler,
            "content_block_delta",
            {"type": "content_block_delta", "index": index, "delta": delta},
        )
        if delay:
            time.sleep(delay)
    _sse(handler, "content_block_stop", {"type": "content_block_stop", "index": index})


def _open_sse(handler: _Handler) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream")
    handler.send_header("Cache-Control", "no-cache")
    handler.send_header("Transfer-Encoding", "chunked")
    handler.end_headers()


def _sse(handler: _Handler, event: str, data: dict[str, Any]) -> None:
    """One event; with the `data_only_sse` quirk without its `event:` line (the type is
    in the data: servers that frame their stream so exist, and SSE allows it)."""
    named = "" if "data_only_sse" in handler.fake.quirks else f"event: {event}\n"
    payload = f"{named}data: {hostile.spliced(json.dumps(data))}\n\n".encode()
    handler.wfile.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
    handler.wfile.flush()


def _huge(handler: _Handler, event: str, data: dict[str, Any], size: int) -> None:
    """One event whose data line is `size` bytes: its one empty string filled with `a`s."""
    text = json.dumps(data)
    cut = text.index('""') + 1
    handler.wfile.write(f"{len(event) + 8:x}\r\nevent: {event}\n\r\n".encode())
    for piece in hostile.huge_data(text[:cut], size, text[cut:]):
        handler.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
    handler.wfile.flush()


_KINDS = {401: "authentication_error", 403: "permission_error", 429: "rate_limit_error"}
_KINDS[529] = "overloaded_error"


def _close_sse(handler: _Handler) -> None:
    handler.wfile.write(b"0\r\n\r\n")
    handler.wfile.flush()


# --- Responses ---------------------------------------------------------------------------


def items_of(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, str):
        return [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": value}]}
        ]
    return [i for i in value or [] if isinstance(i, dict)]


def item_text(item: dict[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    return "".join(str(p.get("text", "")) for p in content or [] if isinstance(p, dict))


def _responses_error(code: str, message: str, param: str | None = None) -> dict[str, Any]:
    return {
        "error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}
    }


def answer_responses(handler: _Handler, body: dict[str, Any]) -> None:
    fake = handler.fake
    body["_path"] = handler.path
    body["_headers"] = {k.lower(): v for k, v in handler.headers.items()}
    items = items_of(body.get("input"))
    previous = body.get("previous_response_id")
    if previous is not None:
        with fake.lock:
            earlier = fake.stored_responses.get(str(previous))
        if earlier is None:
            handler._json(
                404,
                _responses_error(
                    "previous_response_not_found",
                    f"Previous response with id '{previous}' not found.",
                    "previous_response_id",
                ),
            )
            return
        items = [*earlier, *items]
    for index, item in enumerate(items):
        if item.get("type") != "reasoning":
            continue
        sealed = str(item.get("encrypted_content") or "")
        if not sealed and body.get("store") is False:
            continue
        if sealed and not _sealed_ok(sealed):
            with fake.lock:
                fake.requests.append(body)
                fake.native_log.append({"protocol": "responses", "rejected": "encrypted_content"})
            handler._json(
                400,
                _responses_error(
                    "invalid_encrypted_content",
                    "The encrypted content for item could not be verified.",
                    f"input[{index}].encrypted_content",
                ),
            )
            return
    script = fake.next_response(body)
    time.sleep(float(script.get("delay", fake.default_delay)))
    if "status" in script:
        status = int(script["status"])
        error: dict[str, Any] = {
            "message": str(script.get("message", f"scripted {status}")),
            "type": "server_error",
            "param": None,
            "code": script.get("code"),
        }
        if "deep" in script:
            error["details"] = hostile.deep(script["deep"])
        handler._json(status, {"error": error})
        return
    flat = [{"instructions": body.get("instructions")}] + [_canonical(i) for i in items]
    with fake.lock:
        tokens = [(_digest(i),) * _tokens(i) for i in flat]
        figures = fake.prefill_items(tokens)
        fake.native_log.append(
            {
                "protocol": "responses",
                "input": figures["prompt_tokens"],
                "cache_read": figures["cached_tokens"],
                "cache_write": 0,
            }
        )
    last_user = next((item_text(i) for i in reversed(items) if i.get("role") == "user"), "")
    text = script.get("content", "")
    output: list[dict[str, Any]] = []
    if body.get("reasoning"):
        summary = f"thinking about: {last_user[:60]}"
        reasoning: dict[str, Any] = {
            "type": "reasoning",
            "id": f"rs_{uuid.uuid4().hex[:20]}",
            "summary": [{"type": "summary_text", "text": summary}],
        }
        if "reasoning.encrypted_content" in (body.get("include") or []):
            reasoning["encrypted_content"] = _seal(summary)
        output.append(reasoning)
    if text:
        output.append(
            {
                "type": "message",
                "id": f"msg_{uuid.uuid4().hex[:20]}",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        )
    for call in script.get("tool_calls") or []:
        output.append(
            {
                "type": "function_call",
                "id": f"fc_{uuid.uuid4().hex[:20]}",
                "call_id": call.get("id") or f"call_{uuid.uuid4().hex[:12]}",
                "name": call["name"],
                "arguments": call.get("arguments", "{}"),
                "status": "completed",
            }
        )
    response_id = f"resp_{uuid.uuid4().hex[:20]}"
    produced = max(1, sum(_tokens(o) for o in output))
    usage = {
        "input_tokens": figures["prompt_tokens"],
        "input_tokens_details": {"cached_tokens": figures["cached_tokens"]},
        "output_tokens": produced,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": figures["prompt_tokens"] + produced,
    }
    response = {
        "id": response_id,
        "object": "response",
        "created_at": int(time.time()),
        "status": "completed",
        "model": body.get("model"),
        "output": output,
        "usage": usage,
    }
    if "deep" in script:
        response["metadata"] = {"deep": hostile.deep(script["deep"])}
    if body.get("store", True):
        with fake.lock:
            fake.stored_responses[response_id] = [*items, *output]
    if not body.get("stream"):
        handler._json(200, response)
        return
    _open_sse(handler)
    sequence = 0

    def send(event: dict[str, Any]) -> None:
        nonlocal sequence
        event["sequence_number"] = sequence
        sequence += 1
        _sse(handler, event["type"], event)

    try:
        send(
            {
                "type": "response.created",
                "response": {**response, "status": "in_progress", "output": [], "usage": None},
            }
        )
        for index, item in enumerate(output):
            send(
                {
                    "type": "response.output_item.added",
                    "output_index": index,
                    "item": {**item, "status": "in_progress"},
                }
            )
            if item["type"] == "message":
                words = text.split(" ")
                for n, word in enumerate(words):
                    piece = word + (" " if n < len(words) - 1 else "")
                    send(
                        {
                            "type": "response.output_text.delta",
                            "output_index": index,
                            "item_id": item["id"],
                            "content_index": 0,
                            "delta": piece,
                        }
                    )
                    if script.get("chunk_delay"):
                        time.sleep(float(script["chunk_delay"]))
            elif item["type"] == "reasoning":
                for part in item["summary"]:
                    send(
                        {
                            "type": "response.reasoning_summary_text.delta",
                            "output_index": index,
                            "item_id": item["id"],
                            "summary_index": 0,
                            "delta": part["text"],
                        }
                    )
            elif item["type"] == "function_call":
                send(
                    {
                        "type": "response.function_call_arguments.delta",
                        "output_index": index,
                        "item_id": item["id"],
                        "delta": item["arguments"],
                    }
                )
            send({"type": "response.output_item.done", "output_index": index, "item": item})
        if "huge_line" in script:
            kind = "response.output_text.delta"
            delta = {"type": kind, "output_index": 0, "delta": ""}
            _huge(handler, kind, delta, int(script["huge_line"]))
        if "error_event" in script:
            said = str(script["error_event"])
            send({"type": "error", "code": "server_error", "message": said, "param": None})
            _close_sse(handler)
            return
        send({"type": "response.completed", "response": response})
        _close_sse(handler)
    except (BrokenPipeError, ConnectionResetError):
        handler.close_connection = True


def _seal(summary: str) -> str:
    payload = base64.b64encode(
        json.dumps({"summary": summary, "n": uuid.uuid4().hex}).encode()
    ).decode()
    return f"{payload}.{_sign('sealed', payload)}"


def _sealed_ok(sealed: str) -> bool:
    payload, _, mac = sealed.rpartition(".")
    return bool(payload) and hmac.compare_digest(mac, _sign("sealed", payload))
