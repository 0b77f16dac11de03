"""OpenAI's chat-completions wire format, both ways, for `koog serve` (SPEC §6).

A request body becomes domain messages and the client's options; a turn's result becomes
a `chat.completion` object or `chat.completion.chunk` events, shaped so the official SDK's
own types parse them. A body koog cannot take is a `BadRequest` naming the field.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from koogcli.core.messages import Message, ToolCall
from koogcli.core.ports import Usage
from koogcli.services.turn_state import ClientOptions

# Fields koog reads itself; everything else a client sends is passed upstream as it came.
_OWN = {
    *("model", "messages", "stream", "stream_options", "tools", "temperature"),
    *("response_format", "metadata", "n"),
}
# OpenAI's `developer` role is its newer name for `system`.
_ROLES = {"developer": "system", **{r: r for r in ("system", "user", "assistant", "tool")}}
_FINISH = {"stop", "length", "tool_calls", "content_filter", "function_call"}


class BadRequest(Exception):
    """A body the endpoint cannot take (HTTP 400), with the field at fault."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param


@dataclass(frozen=True, slots=True)
class ChatBody:
    conversation: tuple[Message, ...]
    client: ClientOptions
    model: str | None
    stream: bool
    include_usage: bool
    session: str | None  # metadata.koog_session
    user: str | None  # safety_identifier, else user: a memory namespace when no header names one


def parse_chat(raw: bytes) -> ChatBody:
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise BadRequest(f"the body is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty array", "messages")
    if body.get("n") not in (None, 1):
        raise BadRequest("koog stores one reply per turn: 'n' must be 1", "n")
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise BadRequest("'model' must be a string", "model")
    tools = body.get("tools") or []
    if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
        raise BadRequest("'tools' must be an array of objects", "tools")
    temperature = body.get("temperature")
    if temperature is not None and not isinstance(temperature, (int, float)):
        raise BadRequest("'temperature' must be a number", "temperature")
    response_format = body.get("response_format")
    if response_format is not None and not isinstance(response_format, dict):
        raise BadRequest("'response_format' must be an object", "response_format")
    metadata = body.get("metadata")
    metadata = dict(metadata) if isinstance(metadata, dict) else None
    session = metadata.pop("koog_session", None) if metadata is not None else None
    extra = {k: v for k, v in body.items() if k not in _OWN}
    if metadata:
        extra["metadata"] = metadata
    options = body.get("stream_options")
    user = body.get("safety_identifier") or body.get("user")
    return ChatBody(
        conversation=tuple(_message(m, i) for i, m in enumerate(messages)),
        client=ClientOptions(
            tools=tuple(tools),
            temperature=None if temperature is None else float(temperature),
            response_format=response_format,
            extra=extra,
        ),
        model=model or None,
        stream=bool(body.get("stream")),
        include_usage=isinstance(options, dict) and bool(options.get("include_usage")),
        session=session if isinstance(session, str) and session else None,
        user=user if isinstance(user, str) and user else None,
    )


def _message(raw: object, index: int) -> Message:
    where = f"messages[{index}]"
    if not isinstance(raw, dict):
        raise BadRequest(f"{where} must be an object", where)
    role = _ROLES.get(str(raw.get("role")))
    if role is None:
        raise BadRequest(f"{where}.role {raw.get('role')!r} is not one koog takes", where)
    calls = raw.get("tool_calls") or []
    if not isinstance(calls, list):
        raise BadRequest(f"{where}.tool_calls must be an array", where)
    call_id = raw.get("tool_call_id")
    if role == "tool" and not isinstance(call_id, str):
        raise BadRequest(f"{where}.tool_call_id is missing", where)
    name = raw.get("name")
    return Message(
        role=role,  # type: ignore[arg-type]
        # Ids and times are given to the messages koog stores (services/exchange.py), not
        # to every message of every resent conversation.
        id="",
        created_at="",
        content=_content(raw.get("content"), where),
        tool_calls=tuple(_call(c, f"{where}.tool_calls[{i}]") for i, c in enumerate(calls)),
        tool_call_id=call_id if role == "tool" else None,
        name=name if role == "tool" and isinstance(name, str) else None,
    )


def _content(raw: object, where: str) -> str | None:
    if raw is None or isinstance(raw, str):
        return raw
    if isinstance(raw, list):
        texts = []
        for part in raw:
            if not isinstance(part, dict) or part.get("type") != "text":
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                raise BadRequest(
                    f"{where}.content holds a {kind!r} part; koog stores text only", where
                )
            texts.append(str(part.get("text") or ""))
        return "".join(texts)
    raise BadRequest(f"{where}.content must be a string or an array of text parts", where)


def _call(raw: object, where: str) -> ToolCall:
    function = raw.get("function") if isinstance(raw, dict) else None
    if not isinstance(raw, dict) or not isinstance(function, dict):
        raise BadRequest(f"{where} must be a function call", where)
    arguments = function.get("arguments")
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments if arguments is not None else {})
    call_id = raw.get("id")
    return ToolCall(
        call_id if isinstance(call_id, str) else None, str(function.get("name") or ""), arguments
    )


def finish_reason(message: Message | None, said: str | None) -> str:
    if message is not None and message.tool_calls:
        return "tool_calls"
    return said if said in _FINISH else "stop"


def _wire_calls(message: Message | None, indexed: bool) -> list[dict[str, Any]]:
    calls = []
    for index, call in enumerate(message.tool_calls if message is not None else ()):
        wire: dict[str, Any] = dict(call.to_dict())
        if indexed:
            wire["index"] = index
        calls.append(wire)
    return calls


def _usage(usage: Usage | None) -> dict[str, int] | None:
    if usage is None:
        return None
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
    }


@dataclass(frozen=True, slots=True)
class Reply:
    """What the response says of a turn: its id, model, message, finish and usage."""

    id: str
    model: str
    message: Message | None
    finish: str | None
    usage: Usage | None
    created: int = 0


def completion(reply: Reply) -> dict[str, Any]:
    message: dict[str, Any] = {
        "role": "assistant",
        "content": reply.message.content if reply.message is not None else "",
    }
    calls = _wire_calls(reply.message, indexed=False)
    if calls:
        message["tool_calls"] = calls
    out: dict[str, Any] = {
        "id": reply.id,
        "object": "chat.completion",
        "created": reply.created or int(time.time()),
        "model": reply.model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": finish_reason(reply.message, reply.finish),
                "logprobs": None,
            }
        ],
    }
    usage = _usage(reply.usage)
    if usage is not None:
        out["usage"] = usage
    return out


def chunk(
    ident: str, model: str, created: int, delta: Mapping[str, Any], finish: str | None = None
) -> dict[str, Any]:
    return {
        "id": ident,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "delta": dict(delta), "finish_reason": finish, "logprobs": None}],
    }


def closing_chunks(reply: Reply, include_usage: bool) -> Iterator[dict[str, Any]]:
    """After the text: the tool calls, the finish chunk and (when asked) the usage chunk."""
    created = reply.created or int(time.time())
    calls = _wire_calls(reply.message, indexed=True)
    if calls:
        yield chunk(reply.id, reply.model, created, {"tool_calls": calls})
    yield chunk(reply.id, reply.model, created, {}, finish_reason(reply.message, reply.finish))
    if include_usage:
        yield {
            "id": reply.id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": reply.model,
            "choices": [],
            "usage": _usage(reply.usage)
            or {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        }


def error_body(
    message: str, kind: str, code: str | None = None, param: str | None = None
) -> dict[str, Any]:
    """OpenAI's error shape."""
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}
