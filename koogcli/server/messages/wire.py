"""Anthropic's Messages wire format, both ways, for `koog serve` (SPEC §6).

`system` (a string or text blocks) and system messages inside `messages` (Claude Code
sends one) become the turn's system prompt; `tool_use` blocks become an assistant
message's tool calls and `tool_result` blocks tool messages, as chat completions hold
them; images become image parts; `thinking` blocks and per-block `cache_control` are the
client's and go nowhere. Tools, `tool_choice`, `max_tokens` and `stop_sequences` become
the chat request sent upstream. A turn's result becomes a `message` object or the
`message_start` ... `message_stop` events the `anthropic` SDK accumulates.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from koogcli.core import content_parts
from koogcli.core.agent_compaction import opens_compaction
from koogcli.core.messages import REASONING_KEY, Message, ToolCall
from koogcli.server import bodies
from koogcli.server.answers import Reply, named_results
from koogcli.server.bodies import BadRequest
from koogcli.services.turn.request import ClientOptions

_STOP = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}
_STOP_DEFAULT = "end_turn"
# Anthropic's error types by status.
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout_error",
    409: "invalid_request_error",
    413: "request_too_large",
    415: "invalid_request_error",
    429: "rate_limit_error",
    499: "invalid_request_error",
    529: "overloaded_error",
    503: "overloaded_error",
}


@dataclass(frozen=True, slots=True)
class MessagesBody:
    conversation: tuple[Message, ...]
    client: ClientOptions
    model: str
    stream: bool
    session: str | None  # metadata.koog_session
    raw: dict[str, Any]  # the body as sent, for an upstream that speaks Messages
    compacts: bool = False  # an agent's compaction request, by its shape
    left_out: tuple[str, ...] = ()  # server tools the upstream cannot run (access log)


def _wire(role: str, content: str | None, **fields: Any) -> Message:
    """A message as a client sent it: ids and times are given to those koog stores."""
    return Message(role=role, content=content, id="", created_at="", **fields)  # type: ignore[arg-type]


def parse_messages(raw: bytes) -> MessagesBody:
    body = bodies.obj(raw)
    model = bodies.string(body, "model", required=True) or ""
    given = body.get("messages")
    if not isinstance(given, list) or not given:
        raise BadRequest("'messages' must be a non-empty array", "messages")
    bodies.conversation(given, "messages")
    system = _system(body.get("system"))
    said: list[Message] = [_wire("system", system)] if system else []
    for index, m in enumerate(given):
        said.extend(_message(m, f"messages[{index}]"))
    extra: dict[str, object] = {}
    if "max_tokens" in body:
        extra["max_tokens"] = bodies.whole(body, "max_tokens", 1, 1, 10_000_000)
    if "top_p" in body:
        extra["top_p"] = bodies.number(body, "top_p")
    stops = body.get("stop_sequences")
    if stops is not None:
        if not isinstance(stops, list) or not all(isinstance(s, str) for s in stops):
            raise BadRequest("'stop_sequences' must be an array of strings", "stop_sequences")
        if stops:
            extra["stop"] = stops
    tools, left_out = _tools(bodies.array(body, "tools"))
    choice = body.get("tool_choice")
    if choice is not None:
        picked = _tool_choice(choice)
        if picked is not None:
            extra["tool_choice"] = picked
        if isinstance(choice, dict) and choice.get("disable_parallel_tool_use") is True:
            extra["parallel_tool_calls"] = False
    metadata = body.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise BadRequest("'metadata' must be an object", "metadata")
    session = metadata.get("koog_session") if metadata else None
    if session is not None and not isinstance(session, str):
        raise BadRequest("'metadata.koog_session' must be a string", "metadata.koog_session")
    return MessagesBody(
        conversation=named_results(tuple(said)),
        client=ClientOptions(
            tools=tools, temperature=bodies.number(body, "temperature"), extra=extra
        ),
        model=model,
        stream=bodies.boolean(body, "stream", False),
        session=session or None,
        raw=body,
        compacts=opens_compaction(bodies.last_blocks(given)),
        left_out=left_out,
    )


def _system(raw: object) -> str | None:
    if raw is None or isinstance(raw, str):
        return raw or None
    if not isinstance(raw, list):
        raise BadRequest("'system' must be a string or an array of text blocks", "system")
    texts = []
    for i, block in enumerate(raw):
        if not isinstance(block, dict) or not isinstance(block.get("text"), str):
            raise BadRequest(f"system[{i}] must be a text block", f"system[{i}]")
        texts.append(block["text"])
    return "\n\n".join(texts) or None


def _message(raw: object, where: str) -> list[Message]:
    if not isinstance(raw, dict):
        raise BadRequest(f"{where} must be an object", where)
    role = raw.get("role")
    if role not in ("user", "assistant", "system"):
        raise BadRequest(f"{where}.role {role!r} is not one koog takes", f"{where}.role")
    content = raw.get("content")
    if isinstance(content, str):
        return [_wire(role, content)]
    if not isinstance(content, list):
        raise BadRequest(
            f"{where}.content must be a string or an array of blocks", f"{where}.content"
        )
    if role == "assistant":
        return [_assistant(content, where)]
    results: list[Message] = []
    parts: list[dict[str, Any]] = []
    for i, block in enumerate(content):
        at = f"{where}.content[{i}]"
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "tool_result":
            call_id = block.get("tool_use_id")
            if not isinstance(call_id, str):
                raise BadRequest(f"{at}.tool_use_id must be a string", f"{at}.tool_use_id")
            text = _result_text(block.get("content"), at)
            if block.get("is_error") is True:
                text = f"Error: {text}"
            results.append(_wire("tool", text, tool_call_id=call_id))
        else:
            part = _part(block, at)
            if part is not None:
                parts.append(part)
    if role == "system":
        return [_wire("system", content_parts.joined_text(parts))]
    if parts:
        meta = {content_parts.KEY: parts} if content_parts.has_media(parts) else {}
        results.append(_wire("user", content_parts.joined_text(parts), meta=meta))
    return results


def _assistant(content: Sequence[Any], where: str) -> Message:
    texts, calls = [], []
    for i, block in enumerate(content):
        at = f"{where}.content[{i}]"
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            if not isinstance(block.get("text"), str):
                raise BadRequest(f"{at}.text must be a string", f"{at}.text")
            texts.append(block["text"])
        elif kind == "tool_use":
            name, call_id = block.get("name"), block.get("id")
            if not isinstance(name, str) or not isinstance(call_id, str):
                raise BadRequest(f"{at} must have a string 'id' and 'name'", at)
            calls.append(ToolCall(call_id, name, json.dumps(block.get("input") or {})))
        elif kind in ("thinking", "redacted_thinking"):
            continue  # the upstream's reasoning, as the client keeps it
        else:
            raise BadRequest(f"{at}: blocks of type {kind!r} are not supported here", f"{at}.type")
    return _wire(
        "assistant", "".join(texts) if texts or not calls else None, tool_calls=tuple(calls)
    )


def _part(raw: object, at: str) -> dict[str, Any] | None:
    block: dict[str, Any] = raw if isinstance(raw, dict) else {}
    kind = block.get("type")
    if kind == "text":
        if not isinstance(block.get("text"), str):
            raise BadRequest(f"{at}.text must be a string", f"{at}.text")
        return {"type": "text", "text": block["text"]}
    if kind == "image":
        source = block.get("source")
        if isinstance(source, dict) and source.get("type") == "base64":
            media, data = source.get("media_type"), source.get("data")
            if isinstance(media, str) and isinstance(data, str):
                return {"type": "image_url", "image_url": {"url": f"data:{media};base64,{data}"}}
        if (
            isinstance(source, dict)
            and source.get("type") == "url"
            and isinstance(source.get("url"), str)
        ):
            return {"type": "image_url", "image_url": {"url": source["url"]}}
        raise BadRequest(f"{at}.source must be a base64 or url image source", f"{at}.source")
    if kind in ("thinking", "redacted_thinking"):
        return None
    raise BadRequest(f"{at}: blocks of type {kind!r} are not supported here", f"{at}.type")


def _result_text(raw: object, at: str) -> str:
    if raw is None or isinstance(raw, str):
        return raw or ""
    if isinstance(raw, list):
        return "\n".join(
            b["text"] for b in raw if isinstance(b, dict) and isinstance(b.get("text"), str)
        )
    raise BadRequest(f"{at}.content must be a string or an array of blocks", f"{at}.content")


def _tools(raw: list[Any]) -> tuple[tuple[dict[str, object], ...], tuple[str, ...]]:
    """The client's tools as functions, and the server tools (web search, code execution)
    left out: Anthropic's servers run those, a translated upstream cannot."""
    out: list[dict[str, object]] = []
    left: list[str] = []
    for i, tool in enumerate(raw):
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            raise BadRequest(f"tools[{i}] must be an object with a 'name'", f"tools[{i}]")
        if tool.get("type") not in (None, "custom"):
            left.append(str(tool.get("type")))
            continue
        function: dict[str, object] = {
            "name": tool["name"],
            "parameters": tool.get("input_schema") or {"type": "object", "properties": {}},
        }
        if isinstance(tool.get("description"), str):
            function["description"] = tool["description"]
        out.append({"type": "function", "function": function})
    return tuple(out), tuple(dict.fromkeys(left))


def _tool_choice(raw: object) -> object:
    kind = raw.get("type") if isinstance(raw, dict) else None
    if kind == "auto":
        return None  # the upstream's default, and some local servers stream nothing for it
    if kind == "any":
        return "required"
    if kind == "none":
        return "none"
    if kind == "tool" and isinstance(raw, dict) and isinstance(raw.get("name"), str):
        return {"type": "function", "function": {"name": raw["name"]}}
    raise BadRequest("'tool_choice' must be auto, any, tool (with a name) or none", "tool_choice")


# --- the answer --------------------------------------------------------------------------


Answer = Reply  # what the answer says of a turn: id, model, message, finish, usage


def new_id() -> str:
    return f"msg_{secrets.token_hex(12)}"


def stop_reason(answer: Answer) -> str:
    if answer.message is not None and answer.message.tool_calls:
        return "tool_use"
    if answer.finish == "content_filter":
        return "refusal"
    return _STOP.get(answer.finish or "", _STOP_DEFAULT)


def _input(call: ToolCall) -> object:
    try:
        return json.loads(call.arguments or "{}")
    except (ValueError, RecursionError):  # not JSON, or nested past what a parser takes
        return {}


def tool_block(call: ToolCall, index: int) -> dict[str, Any]:
    return {
        "type": "tool_use",
        "id": call.id or f"toolu_{index}",
        "name": call.name,
        "input": _input(call),
    }


def usage(answer: Answer) -> dict[str, int]:
    """Anthropic's usage: `input_tokens` are those not read from the cache (§5.4a), so a
    client adding the three input fields gets the whole prompt, as from Anthropic."""
    u = answer.usage
    cached = (u.cached_tokens or 0) if u else 0
    return {
        "input_tokens": max(u.prompt_tokens - cached, 0) if u else 0,
        "output_tokens": u.completion_tokens if u else 0,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": cached,
    }


def message(answer: Answer) -> dict[str, Any]:
    m = answer.message
    content: list[dict[str, Any]] = []
    thought = m.meta.get(REASONING_KEY) if m is not None else None
    if isinstance(thought, str) and thought:
        content.append({"type": "thinking", "thinking": thought, "signature": ""})
    if m is not None and (m.content or not m.tool_calls):
        content.append({"type": "text", "text": m.content or ""})
    for index, call in enumerate(m.tool_calls if m is not None else ()):
        content.append(tool_block(call, index))
    return {
        "id": answer.id,
        "type": "message",
        "role": "assistant",
        "model": answer.model,
        "content": content,
        "stop_reason": stop_reason(answer),
        "stop_sequence": None,
        "usage": usage(answer),
    }


def started(ident: str, model: str) -> dict[str, Any]:
    return {
        "type": "message_start",
        "message": {
            "id": ident,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 0, "output_tokens": 0},
        },
    }


def closing(answer: Answer, index: int) -> Iterator[dict[str, Any]]:
    """After the blocks streamed (`index` of them, closed): each tool call as a block,
    then the stop reason."""
    for i, call in enumerate(answer.message.tool_calls if answer.message is not None else ()):
        block = {**tool_block(call, i), "input": {}}
        yield {"type": "content_block_start", "index": index, "content_block": block}
        yield {
            "type": "content_block_delta",
            "index": index,
            "delta": {"type": "input_json_delta", "partial_json": json.dumps(_input(call))},
        }
        yield {"type": "content_block_stop", "index": index}
        index += 1
    yield {
        "type": "message_delta",
        "delta": {"stop_reason": stop_reason(answer), "stop_sequence": None},
        "usage": usage(answer),
    }
    yield {"type": "message_stop"}


def error(status: int, text: str) -> dict[str, Any]:
    kind = ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
    return {"type": "error", "error": {"type": kind, "message": text}}
