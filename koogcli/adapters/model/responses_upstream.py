"""ChatModel over the Responses API (`[llm] wire_api = "responses"`), spoken natively.

Stateless by design, as Codex uses it: `store: false`, the whole conversation sent as
input items each time (the leading system messages as `instructions`), so the upstream's
automatic prefix cache reads every earlier turn again. With `reasoning_effort` set, the
request asks for reasoning and its `encrypted_content`; the reasoning items a reply came
with are kept beside it (core/native_replay.py) and replayed byte for byte before that
reply in later requests.

The reply streams as the API's events: output text to `on_delta`, reasoning summaries to
`on_reasoning`; the finished response (`response.completed`) gives the items, the tool
calls and the usage, whose `input_tokens_details.cached_tokens` is the cache read.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from koogcli.adapters.model.cache_figures import responses_usage
from koogcli.adapters.model.endpoint import Endpoint, RequestOptions
from koogcli.adapters.model.native_http import NativeHttp, exchange, explained, listed_models
from koogcli.core import content_parts, memory_placement, native_replay
from koogcli.core.errors import ModelError
from koogcli.core.messages import Message, ToolCall
from koogcli.core.model_port import Completion, ModelRequest

WIRE = "responses"


def input_items(messages: Sequence[Message]) -> tuple[str, list[dict[str, Any]]]:
    """The instructions (leading system messages) and the input items of a conversation."""
    leading = 0
    while leading < len(messages) and messages[leading].role == "system":
        leading += 1
    instructions = "\n\n".join(m.text for m in messages[:leading] if m.text)
    items: list[dict[str, Any]] = []
    for m in messages[leading:]:
        if m.role == "assistant":
            items.extend(native_replay.items_of(m, WIRE, None))
            if m.text:
                text = {"type": "output_text", "text": m.text, "annotations": []}
                items.append({"type": "message", "role": "assistant", "content": [text]})
            for call in m.tool_calls:
                items.append(
                    {
                        "type": "function_call",
                        "call_id": call.id or "",
                        "name": call.name,
                        "arguments": call.arguments or "{}",
                    }
                )
        elif m.role == "tool":
            items.append(
                {"type": "function_call_output", "call_id": m.tool_call_id or "", "output": m.text}
            )
        else:
            role = "developer" if m.role == "system" else "user"
            items.append({"type": "message", "role": role, "content": _content(m)})
    return instructions, items


def _content(m: Message) -> list[dict[str, Any]]:
    given = content_parts.parts(m) if content_parts.KEY in m.meta else None
    if given is None:
        return [{"type": "input_text", "text": m.text}]
    out: list[dict[str, Any]] = []
    for part in content_parts.with_text(given, m.text):
        kind = part.get("type")
        if kind == "text":
            out.append({"type": "input_text", "text": str(part.get("text") or "")})
        elif kind == "image_url":
            value = part.get("image_url")
            url = value.get("url") if isinstance(value, Mapping) else value
            out.append({"type": "input_image", "image_url": str(url or "")})
        elif kind == "file" and isinstance(part.get("file"), Mapping):
            out.append({"type": "input_file", **dict(part["file"])})
        elif (found := content_parts.media(part)) is not None:  # audio: no input type here
            out.append({"type": "input_text", "text": found.label()})
    return out or [{"type": "input_text", "text": m.text}]


def _tools(tools: Sequence[Mapping[str, object]]) -> list[dict[str, Any]]:
    out = []
    for spec in tools:
        function = spec.get("function")
        if isinstance(function, Mapping):
            out.append({"type": "function", **dict(function)})
    return out


def request_body(request: ModelRequest, options: RequestOptions) -> dict[str, Any]:
    instructions, items = input_items(request.messages)
    body: dict[str, Any] = {"model": request.model, "input": items, "store": False}
    if instructions:
        body["instructions"] = instructions
    tools = _tools(request.tools)
    if tools:
        body["tools"] = tools
    extra = dict(request.extra)
    choice = extra.pop("tool_choice", None)
    if choice is not None and tools:
        function = choice.get("function") if isinstance(choice, Mapping) else None
        body["tool_choice"] = (
            {"type": "function", "name": function.get("name")}
            if isinstance(function, Mapping)
            else choice
        )
    effort = options.reasoning_effort
    if effort is not None:
        body["reasoning"] = {"effort": effort, "summary": "auto"}
        body["include"] = ["reasoning.encrypted_content"]
    elif request.temperature is not None:
        body["temperature"] = request.temperature
    asked = extra.get("max_tokens") or extra.get("max_completion_tokens")
    limit = asked if isinstance(asked, int) else options.max_tokens
    if limit is not None:
        body["max_output_tokens"] = limit
    if request.response_format is not None:
        body["text"] = {"format": _text_format(request.response_format)}
    for key in ("top_p", "metadata", "parallel_tool_calls"):
        if key in extra:
            body[key] = extra[key]
    body.update(options.extra_body)
    own = dict(request.own_options)
    for name in ("max_tokens", "max_completion_tokens"):
        if name in own:
            body["max_output_tokens"] = own.pop(name)
    body.update(own)
    body["stream"] = request.stream
    return body


def _text_format(response_format: Mapping[str, object]) -> dict[str, Any]:
    """Chat completions' `response_format` in the Responses API's `text.format` shape."""
    schema = response_format.get("json_schema")
    if response_format.get("type") == "json_schema" and isinstance(schema, Mapping):
        return {"type": "json_schema", **dict(schema)}
    return {"type": str(response_format.get("type", "text"))}


class ResponsesChatModel:
    def __init__(self, endpoint: Endpoint, options: RequestOptions | None = None) -> None:
        self.endpoint = endpoint
        self.options = options or RequestOptions()
        headers = {"authorization": f"Bearer {endpoint.api_key}", "accept": "application/json"}
        e = endpoint
        self.http = NativeHttp(e.base_url, headers, e.timeout, e.max_retries, e.turn_timeout)

    def complete(
        self,
        request: ModelRequest,
        on_delta: Callable[[str], None] | None = None,
        on_reasoning: Callable[[str], None] | None = None,
    ) -> Completion:
        given = request.passthrough
        sink = None
        if given is not None and given.wire == WIRE:
            body, headers, sink = passed_body(request, given.body), dict(given.headers), given.sink
        else:
            body, headers = request_body(request, self.options), {}
        url = self.endpoint.shown_url
        reader = _Reader(url, on_delta, on_reasoning)

        def whole(answer: Any) -> None:
            reader.finished = answer

        exchange(
            self.http,
            url,
            "/responses",
            body,
            headers,
            sink,
            lambda exc: explained(exc, self.http, url, request.model, self.endpoint.api_key_env),
            whole,
            reader.event,
        )
        return reader.completion()

    def list_models(self) -> list[str]:
        return listed_models(self.http, self.endpoint.shown_url, self.endpoint.api_key_env)


class _Reader:
    """A Responses answer read from its events: text and reasoning passed on as they come,
    the finished response kept."""

    def __init__(
        self,
        url: str,
        on_delta: Callable[[str], None] | None,
        on_reasoning: Callable[[str], None] | None,
    ) -> None:
        self.url = url
        self.on_delta, self.on_reasoning = on_delta, on_reasoning
        self.finished: Any = None
        self.streamed = False

    def event(self, event: Mapping[str, Any]) -> None:
        kind = event.get("type")
        if kind == "response.output_text.delta":
            self.streamed = True
            if self.on_delta:
                self.on_delta(str(event.get("delta", "")))
        elif kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            if self.on_reasoning:
                self.on_reasoning(str(event.get("delta", "")))
        elif kind in ("response.completed", "response.incomplete"):
            self.finished = event.get("response")
        elif kind in ("response.failed", "error"):
            raise _failed(event, self.url)

    def completion(self) -> Completion:
        if not isinstance(self.finished, Mapping):
            raise ModelError(
                f"the server at {self.url} ended the stream before the reply was complete",
                hint="retry; nothing of this turn was stored",
            )
        text_sink = None if self.streamed else self.on_delta
        return _completion(self.finished, text_sink, self.on_reasoning, self.streamed)


def passed_body(request: ModelRequest, given: Mapping[str, object]) -> dict[str, Any]:
    """A client's own Responses request as it goes upstream: its items as they came, the
    upstream's model name, and koog's memory records after the questions they were found
    for (the same records in the same place every turn)."""
    body: dict[str, Any] = json.loads(json.dumps(given))
    body["model"] = request.model
    items = body.get("input")
    if isinstance(items, str):
        items = body["input"] = [{"type": "message", "role": "user", "content": items}]
    if isinstance(items, list):
        _append_memory(items, request.messages)
    return body


def _append_memory(items: list[Any], sent: Sequence[Message]) -> None:
    added = [m.meta.get(memory_placement.ADDED_KEY) for m in sent if m.role == "user"]
    questions = [
        i
        for i in items
        if isinstance(i, dict) and i.get("role") == "user" and i.get("type", "message") == "message"
    ]
    for text, target in zip(reversed(added), reversed(questions), strict=False):
        if not isinstance(text, str) or not text:
            continue
        content = target.get("content")
        if isinstance(content, str):
            content = target["content"] = [{"type": "input_text", "text": content}]
        if isinstance(content, list):
            content.append({"type": "input_text", "text": text})


def _failed(event: Mapping[str, Any], url: str) -> ModelError:
    # `error` events say it at the top (`{"type": "error", "code", "message", ...}`);
    # `response.failed` in its response's `error`.
    error = event.get("error") or (event.get("response") or {}).get("error") or event
    said = error.get("message") if isinstance(error, Mapping) else None
    return ModelError(
        f"{url} failed the reply: {said or 'an error event'}",
        hint="retry; nothing of this turn was stored",
    )


def _completion(
    response: Mapping[str, Any],
    on_delta: Callable[[str], None] | None,
    on_reasoning: Callable[[str], None] | None,
    streamed: bool,
) -> Completion:
    output = [i for i in response.get("output") or [] if isinstance(i, Mapping)]
    texts: list[str] = []
    thoughts: list[str] = []
    calls: list[ToolCall] = []
    kept: list[Mapping[str, Any]] = []
    for item in output:
        kind = item.get("type")
        if kind == "message":
            for part in item.get("content") or []:
                if isinstance(part, Mapping) and part.get("type") == "output_text":
                    texts.append(str(part.get("text", "")))
        elif kind == "function_call":
            calls.append(
                ToolCall(
                    str(item.get("call_id") or item.get("id") or ""),
                    str(item.get("name") or ""),
                    str(item.get("arguments") or "{}"),
                )
            )
        elif kind == "reasoning":
            kept.append(item)
            for part in item.get("summary") or []:
                if isinstance(part, Mapping):
                    thoughts.append(str(part.get("text", "")))
    text = "".join(texts)
    if on_delta and text:
        on_delta(text)
    if not streamed and on_reasoning and thoughts:
        on_reasoning("".join(thoughts))
    usage = responses_usage(response.get("usage"))
    incomplete = response.get("status") == "incomplete"
    finish = "length" if incomplete else ("tool_calls" if calls else "stop")
    native = native_replay.stored(WIRE, kept, "") if kept else None
    return Completion(text, tuple(calls), usage, finish, "".join(thoughts), native)
