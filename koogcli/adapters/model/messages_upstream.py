"""ChatModel over Anthropic's Messages API (`[llm] wire_api = "messages"`), spoken natively.

The request: the leading system messages as `system` blocks, tools as Anthropic tools,
the conversation with tool calls as `tool_use` and their results as `tool_result` blocks
(one message per run of one role, as the API wants), and two cache breakpoints: the end of
the stable prefix (tools and system) and the newest message, so every turn reads what the
previous one wrote. `reasoning_effort` asks for thinking with a budget; the thinking
blocks a reply came with (signatures, `redacted_thinking`) are kept beside it
(core/native_replay.py) and sent back unchanged in later requests, unless what came before
them changed (a window moved, a compression), which the API would refuse.

The reply streams as Anthropic's events: text to `on_delta`, thinking to `on_reasoning`,
tool input assembled from its JSON pieces; usage counts the cache reads and writes in the
prompt and reports the reads as cached tokens.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from koogcli.adapters.model.cache_figures import messages_usage
from koogcli.adapters.model.endpoint import Endpoint, RequestOptions
from koogcli.adapters.model.native_http import NativeHttp, exchange, explained, listed_models
from koogcli.core import bounded_json, content_parts, memory_placement, native_replay, structured
from koogcli.core.errors import ModelError, ResponseFormatError
from koogcli.core.messages import Message, ToolCall
from koogcli.core.model_port import Completion, ModelRequest
from koogcli.core.structured import ANSWER_TOOL

ANTHROPIC_DEFAULT_URL = "https://api.anthropic.com/v1"
ANTHROPIC_VERSION = "2023-06-01"
WIRE = "messages"
# Thinking budgets for `reasoning_effort`; the API's smallest is 1024.
BUDGETS = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 24576}
DEFAULT_MAX_TOKENS = 8192
_EPHEMERAL = {"type": "ephemeral"}
_FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "refusal": "content_filter",
    "pause_turn": "stop",
}


def _dumps(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode()


class Wire:
    """A request's system blocks and messages, with the digest of what precedes each
    assistant message (what its thinking is bound to)."""

    def __init__(self, system: list[dict[str, Any]]) -> None:
        self.system = system
        self.messages: list[dict[str, Any]] = []
        self._settled = hashlib.sha256(_dumps(system))  # every message but the last

    def prefix(self) -> str:
        """The digest of the system and every message so far."""
        running = self._settled.copy()
        if self.messages:
            running.update(_dumps(self.messages[-1]))
        return running.hexdigest()

    def add(self, role: str, blocks: list[dict[str, Any]]) -> None:
        """A message, or more blocks for the last one when it has the same role."""
        if not blocks:
            return
        if self.messages and self.messages[-1]["role"] == role:
            self.messages[-1]["content"].extend(blocks)
            return
        if self.messages:
            self._settled.update(_dumps(self.messages[-1]))
        self.messages.append({"role": role, "content": blocks})


def to_wire(messages: Sequence[Message]) -> Wire:
    """koog's messages as Messages' system blocks and alternating messages."""
    leading = 0
    while leading < len(messages) and messages[leading].role == "system":
        leading += 1
    wire = Wire([{"type": "text", "text": m.text} for m in messages[:leading] if m.text])
    for m in messages[leading:]:
        if m.role == "assistant":
            kept = native_replay.items_of(m, WIRE, wire.prefix())
            if wire.messages and wire.messages[-1]["role"] == "assistant":
                kept = []  # thinking opens a message; a second one in a row cannot carry it
            wire.add("assistant", kept + _assistant_blocks(m))
        elif m.role == "tool":
            result = {"type": "tool_result", "tool_use_id": m.tool_call_id or "", "content": m.text}
            wire.add("user", [result])
        elif m.role == "system":  # a summary or note after the start: the user's turn
            wire.add("user", [{"type": "text", "text": f"[system] {m.text}"}])
        else:
            wire.add("user", _user_blocks(m))
    return wire


def _assistant_blocks(m: Message) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = [{"type": "text", "text": m.text}] if m.text.strip() else []
    for call in m.tool_calls:
        blocks.append(
            {"type": "tool_use", "id": call.id or "", "name": call.name, "input": _input(call)}
        )
    if not blocks:
        blocks.append({"type": "text", "text": "(no answer)"})
    return blocks


def _input(call: ToolCall) -> dict[str, Any]:
    try:
        value = json.loads(call.arguments or "{}")
    except ValueError:
        return {"arguments": call.arguments}
    return value if isinstance(value, dict) else {"value": value}


def _user_blocks(m: Message) -> list[dict[str, Any]]:
    given = content_parts.parts(m) if content_parts.KEY in m.meta else None
    if given is None:
        return [{"type": "text", "text": m.text or " "}]
    blocks: list[dict[str, Any]] = []
    for part in content_parts.with_text(given, m.text):
        kind = part.get("type")
        if kind == "text":
            if str(part.get("text") or "").strip():
                blocks.append({"type": "text", "text": str(part["text"])})
        elif kind == "image_url":
            blocks.append(_image(part.get("image_url")))
        elif kind == "file" and (document := _document(part.get("file"))) is not None:
            blocks.append(document)
        else:
            label = " ".join(content_parts.labels(m)) or str(kind)
            blocks.append({"type": "text", "text": f"[{label}]"})
    return blocks or [{"type": "text", "text": " "}]


def _image(value: Any) -> dict[str, Any]:
    url = value.get("url") if isinstance(value, Mapping) else value
    url = str(url or "")
    if url.startswith("data:") and ";base64," in url:
        head, data = url[5:].split(";base64,", 1)
        source = {"type": "base64", "media_type": head or "image/png", "data": data}
        return {"type": "image", "source": source}
    return {"type": "image", "source": {"type": "url", "url": url}}


def _document(value: Any) -> dict[str, Any] | None:
    """A PDF a client sent as a `file` part's data: URL, as a `document` block."""
    data = value.get("file_data") if isinstance(value, Mapping) else None
    if not isinstance(data, str) or not data.startswith("data:application/pdf;base64,"):
        return None
    source = {"type": "base64", "media_type": "application/pdf", "data": data.split(",", 1)[1]}
    return {"type": "document", "source": source}


def _tools(tools: Sequence[Mapping[str, object]]) -> list[dict[str, Any]]:
    out = []
    for spec in tools:
        function = spec.get("function")
        if not isinstance(function, Mapping):
            continue
        schema = function.get("parameters") or {"type": "object", "properties": {}}
        tool: dict[str, Any] = {"name": function.get("name"), "input_schema": schema}
        if function.get("description"):
            tool["description"] = function["description"]
        out.append(tool)
    return out


def _tool_choice(value: object) -> dict[str, Any] | None:
    if value == "required":
        return {"type": "any"}
    if value in ("auto", "none"):
        return {"type": value}
    if isinstance(value, Mapping):
        function = value.get("function")
        if isinstance(function, Mapping) and function.get("name"):
            return {"type": "tool", "name": function["name"]}
    return None


def request_body(request: ModelRequest, options: RequestOptions) -> tuple[dict[str, Any], str]:
    """The Messages request for `request`, and the digest its reply's thinking is bound to."""
    forced = _answer_tool(request.response_format)
    wire = to_wire(request.messages)
    prefix = wire.prefix()
    tools = _tools(request.tools) + ([forced] if forced else [])
    body: dict[str, Any] = {"model": request.model, "messages": wire.messages}
    if wire.system:
        body["system"] = wire.system
    if tools:
        body["tools"] = tools
    _breakpoints(body)
    asked = request.extra.get("max_tokens") or request.extra.get("max_completion_tokens")
    max_tokens = asked if isinstance(asked, int) else options.max_tokens or DEFAULT_MAX_TOKENS
    effort = options.reasoning_effort
    if effort is not None and effort != "none":
        budget = BUDGETS.get(effort, BUDGETS["medium"])
        body["thinking"] = {"type": "enabled", "budget_tokens": budget}
        max_tokens = max(max_tokens, budget + 1024)
    elif request.temperature is not None:
        body["temperature"] = request.temperature
    body["max_tokens"] = max_tokens
    extra = dict(request.extra)
    choice = _tool_choice(extra.pop("tool_choice", None))
    if forced:  # structured output: the answer is this tool's input (Anthropic's way)
        choice = {"type": "tool", "name": ANSWER_TOOL}
        body.pop("thinking", None)  # a forced tool cannot follow extended thinking
    if choice is not None and tools:
        body["tool_choice"] = choice
    if "stop" in extra:
        stop = extra.pop("stop")
        body["stop_sequences"] = [stop] if isinstance(stop, str) else stop
    for key in ("top_p", "top_k", "metadata"):
        if key in extra:
            body[key] = extra[key]
    body.update(options.extra_body)
    own = dict(request.own_options)
    if "stop" in own:
        stop = own.pop("stop")
        body["stop_sequences"] = [stop] if isinstance(stop, str) else stop
    for name in ("max_tokens", "max_completion_tokens"):
        if name in own:
            body["max_tokens"] = own.pop(name)
    body.update(own)
    body["stream"] = request.stream
    return body, prefix


def _answer_tool(response_format: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A `json_schema` response format as the one tool the model must call; any other
    format is one the Messages API cannot ask for."""
    if response_format is None:
        return None
    schema = structured.schema_of(response_format)
    if response_format.get("type") != "json_schema" or schema is None:
        raise ResponseFormatError("the Messages API takes only a JSON schema as response_format")
    return {
        "name": ANSWER_TOOL,
        "description": "Give the answer: its input is the whole answer, as JSON.",
        "input_schema": schema,
    }


def _breakpoints(body: dict[str, Any]) -> None:
    """Cache breakpoints: the end of the stable prefix, and the newest message."""
    stable = body.get("system") or body.get("tools")
    if stable:
        stable[-1] = {**stable[-1], "cache_control": _EPHEMERAL}
    if body["messages"]:
        newest = body["messages"][-1]["content"]
        newest[-1] = {**newest[-1], "cache_control": _EPHEMERAL}


def passed_body(request: ModelRequest, given: Mapping[str, object]) -> dict[str, Any]:
    """A client's own Messages request as it goes upstream: its messages as they came, the
    upstream's model name, and koog's memory records after the questions they were found
    for (the same records in the same place every turn, so the prefix never changes)."""
    body: dict[str, Any] = json.loads(json.dumps(given))
    body["model"] = request.model
    messages = body.get("messages")
    if isinstance(messages, list):
        append_memory(messages, request.messages)
    return body


def append_memory(client: list[Any], sent: Sequence[Message]) -> None:
    """Each question's records as one more text block of the client's question, matched
    from the newest: koog's questions and the client's user messages that say something
    (not only tool results)."""
    added = [m.meta.get(memory_placement.ADDED_KEY) for m in sent if m.role == "user"]
    questions = [m for m in client if isinstance(m, dict) and m.get("role") == "user" and _says(m)]
    for text, target in zip(reversed(added), reversed(questions), strict=False):
        if not isinstance(text, str) or not text:
            continue
        content = target.get("content")
        if isinstance(content, str):
            content = target["content"] = [{"type": "text", "text": content}]
        if isinstance(content, list):
            content.append({"type": "text", "text": text})


def _says(m: Mapping[str, Any]) -> bool:
    content = m.get("content")
    if isinstance(content, str):
        return True
    return isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") != "tool_result" for b in content
    )


class MessagesChatModel:
    def __init__(self, endpoint: Endpoint, options: RequestOptions | None = None) -> None:
        self.endpoint = endpoint
        self.options = options or RequestOptions()
        headers = {
            "x-api-key": endpoint.api_key,
            "anthropic-version": ANTHROPIC_VERSION,
            "accept": "application/json",
        }
        e = endpoint
        self.http = NativeHttp(e.base_url, headers, e.timeout, e.max_retries, e.turn_timeout)

    def complete(
        self,
        request: ModelRequest,
        on_delta: Callable[[str], None] | None = None,
        on_reasoning: Callable[[str], None] | None = None,
    ) -> Completion:
        given = request.passthrough
        if given is not None and given.wire == WIRE:
            body, prefix = passed_body(request, given.body), to_wire(request.messages).prefix()
            headers, sink = dict(given.headers), given.sink
        else:
            body, prefix = request_body(request, self.options)
            headers, sink = {}, None
        url = self.endpoint.shown_url
        reader = _Reply(prefix)
        exchange(
            self.http,
            url,
            "/messages",
            body,
            headers,
            sink,
            lambda exc: explained(exc, self.http, url, request.model, self.endpoint.api_key_env),
            lambda message: reader.whole(message, on_delta, on_reasoning),
            lambda event: reader.event(event, on_delta, on_reasoning),
        )
        return reader.completion(url)

    def list_models(self) -> list[str]:
        return listed_models(self.http, self.endpoint.shown_url, self.endpoint.api_key_env)


class _Reply:
    """A Messages reply assembled from its events (or its whole JSON)."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.blocks: dict[int, dict[str, Any]] = {}
        self.pieces: dict[int, list[str]] = {}
        self.usage: dict[str, int] = {}
        self.stop: str | None = None
        self.ended = False

    def whole(
        self,
        message: Mapping[str, Any],
        on_delta: Callable[[str], None] | None,
        on_reasoning: Callable[[str], None] | None,
    ) -> None:
        for index, block in enumerate(message.get("content") or []):
            if isinstance(block, Mapping):
                self.blocks[index] = dict(block)
                if block.get("type") == "thinking" and on_reasoning:
                    on_reasoning(str(block.get("thinking", "")))
                if block.get("type") == "text" and on_delta:
                    on_delta(str(block.get("text", "")))
        self._usage(message.get("usage"))
        self.stop = message.get("stop_reason")
        self.ended = True

    def event(
        self,
        event: Mapping[str, Any],
        on_delta: Callable[[str], None] | None,
        on_reasoning: Callable[[str], None] | None,
    ) -> None:
        kind = event.get("type")
        if kind == "message_start":
            self._usage((event.get("message") or {}).get("usage"))
        elif kind == "content_block_start":
            block = dict(event.get("content_block") or {})
            self.blocks[int(event.get("index", len(self.blocks)))] = block
        elif kind == "content_block_delta":
            self._delta(
                int(event.get("index", 0)), event.get("delta") or {}, on_delta, on_reasoning
            )
        elif kind == "content_block_stop":
            index = int(event.get("index", 0))
            built = self.blocks.get(index)
            if built is not None and built.get("type") == "tool_use" and index in self.pieces:
                text = "".join(self.pieces.pop(index))
                built["input"] = bounded_json.loads(text) if text.strip() else {}
        elif kind == "message_delta":
            self.stop = (event.get("delta") or {}).get("stop_reason") or self.stop
            self._usage(event.get("usage"))
        elif kind == "message_stop":
            self.ended = True
        elif kind == "error":
            error = event.get("error") or {}
            said = error.get("message") if isinstance(error, Mapping) else None
            raise ModelError(
                f"the upstream failed during the reply: {said or 'an error event'}",
                hint="retry; nothing of this turn was stored",
            )

    def _delta(
        self,
        index: int,
        delta: Mapping[str, Any],
        on_delta: Callable[[str], None] | None,
        on_reasoning: Callable[[str], None] | None,
    ) -> None:
        block = self.blocks.setdefault(index, {"type": "text", "text": ""})
        kind = delta.get("type")
        if kind == "text_delta":
            text = str(delta.get("text", ""))
            block["text"] = block.get("text", "") + text
            if on_delta and text:
                on_delta(text)
        elif kind == "thinking_delta":
            text = str(delta.get("thinking", ""))
            block["thinking"] = block.get("thinking", "") + text
            if on_reasoning and text:
                on_reasoning(text)
        elif kind == "signature_delta":
            block["signature"] = block.get("signature", "") + str(delta.get("signature", ""))
        elif kind == "input_json_delta":
            self.pieces.setdefault(index, []).append(str(delta.get("partial_json", "")))

    def _usage(self, usage: object) -> None:
        if isinstance(usage, Mapping):
            for key, value in usage.items():
                if isinstance(value, int) and not isinstance(value, bool):
                    self.usage[key] = value

    def completion(self, url: str) -> Completion:
        if not self.ended:
            raise ModelError(
                f"the server at {url} ended the stream before the reply was complete",
                hint="retry; nothing of this turn was stored",
            )
        ordered = [self.blocks[i] for i in sorted(self.blocks)]
        text = "".join(str(b.get("text", "")) for b in ordered if b.get("type") == "text")
        answers = [
            b for b in ordered if b.get("type") == "tool_use" and b.get("name") == ANSWER_TOOL
        ]
        if answers:  # structured output: the forced tool's input is the reply
            text = json.dumps(answers[-1].get("input") or {}, ensure_ascii=False)
            ordered = [b for b in ordered if b not in answers]
        thinking = "".join(
            str(b.get("thinking", "")) for b in ordered if b.get("type") == "thinking"
        )
        calls = tuple(
            ToolCall(
                str(b.get("id") or ""),
                str(b.get("name") or ""),
                json.dumps(b.get("input") or {}, ensure_ascii=False),
            )
            for b in ordered
            if b.get("type") == "tool_use"
        )
        kept = [b for b in ordered if b.get("type") in ("thinking", "redacted_thinking")]
        usage = messages_usage(self.usage)
        native = native_replay.stored(WIRE, kept, self.prefix) if kept else None
        finish = _FINISH.get(str(self.stop), "stop") if self.stop else "stop"
        if answers and finish == "tool_calls":
            finish = "stop"
        return Completion(text, calls, usage, finish, thinking, native)
