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

from koogcli.core import content_parts
from koogcli.core.agent_compaction import opens_compaction
from koogcli.core.messages import REASONING_KEY, Message, ToolCall
from koogcli.core.ports import Usage
from koogcli.server import bodies
from koogcli.server.answers import Reply, named_results
from koogcli.server.bodies import BadRequest
from koogcli.services.turn.request import ClientOptions

# Fields koog reads itself; everything else a client sends is passed upstream as it came.
_OWN = {
    *("model", "messages", "stream", "stream_options", "tools", "temperature"),
    *("response_format", "metadata", "n"),
}
# OpenAI's `developer` role is its newer name for `system`.
_ROLES = {"developer": "system", **{r: r for r in ("system", "user", "assistant", "tool")}}
_FINISH = {"stop", "length", "tool_calls", "content_filter", "function_call"}


@dataclass(frozen=True, slots=True)
class ChatBody:
    conversation: tuple[Message, ...]
    client: ClientOptions
    model: str | None
    stream: bool
    include_usage: bool
    session: str | None  # metadata.koog_session
    user: str | None  # safety_identifier, else user: a memory namespace when no header names one
    compacts: bool = False  # an agent's compaction request, by its shape


def parse_chat(raw: bytes) -> ChatBody:
    body = bodies.obj(raw)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty array", "messages")
    bodies.conversation(messages, "messages")
    if body.get("n") not in (None, 1) or isinstance(body.get("n"), bool):
        raise BadRequest("koog stores one reply per turn: 'n' must be 1", "n")
    model = bodies.string(body, "model")
    tools = body.get("tools") or []
    if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
        raise BadRequest("'tools' must be an array of objects", "tools")
    temperature = bodies.number(body, "temperature")
    response_format = body.get("response_format")
    if response_format is not None and not isinstance(response_format, dict):
        raise BadRequest("'response_format' must be an object", "response_format")
    metadata = body.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise BadRequest("'metadata' must be an object", "metadata")
    metadata = dict(metadata) if metadata else None
    session = metadata.pop("koog_session", None) if metadata is not None else None
    if session is not None and not isinstance(session, str):
        raise BadRequest("'metadata.koog_session' must be a string", "metadata.koog_session")
    extra = {k: v for k, v in body.items() if k not in _OWN}
    if metadata:
        extra["metadata"] = metadata
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise BadRequest("'stream_options' must be an object", "stream_options")
    user = body.get("safety_identifier") or body.get("user")
    if user is not None and not isinstance(user, str):
        raise BadRequest("'user' must be a string", "user")
    return ChatBody(
        conversation=named_results(tuple(_message(m, i) for i, m in enumerate(messages))),
        client=ClientOptions(
            tools=tuple(tools),
            temperature=temperature,
            response_format=response_format,
            extra=extra,
        ),
        model=model or None,
        stream=bodies.boolean(body, "stream", False),
        include_usage=bodies.boolean(options or {}, "include_usage", False),
        session=session or None,
        user=user or None,
        compacts=opens_compaction(bodies.last_blocks(messages)),
    )


def _message(raw: object, index: int) -> Message:
    where = f"messages[{index}]"
    if not isinstance(raw, dict):
        raise BadRequest(f"{where} must be an object", where)
    given = raw.get("role")
    role = _ROLES.get(given) if isinstance(given, str) else None
    if role is None:
        raise BadRequest(f"{where}.role {raw.get('role')!r} is not one koog takes", f"{where}.role")
    calls = raw.get("tool_calls") or []
    if not isinstance(calls, list):
        raise BadRequest(f"{where}.tool_calls must be an array", f"{where}.tool_calls")
    call_id = raw.get("tool_call_id")
    if role == "tool" and not isinstance(call_id, str):
        raise BadRequest(f"{where}.tool_call_id is missing", f"{where}.tool_call_id")
    name = raw.get("name")
    if name is not None and not isinstance(name, str):
        raise BadRequest(f"{where}.name must be a string", f"{where}.name")
    text, parts = _content(raw.get("content"), f"{where}.content")
    return Message(
        role=role,  # type: ignore[arg-type]
        # Ids and times are given to the messages koog stores (services/turn/placement.py), not
        # to every message of every resent conversation.
        id="",
        created_at="",
        content=text,
        tool_calls=tuple(_call(c, f"{where}.tool_calls[{i}]") for i, c in enumerate(calls)),
        tool_call_id=call_id if role == "tool" else None,
        name=name if role == "tool" else None,
        meta={content_parts.KEY: parts} if parts is not None else {},
    )


def _content(raw: object, where: str) -> tuple[str | None, list[dict[str, Any]] | None]:
    """The text, and the parts when any is not text (they pass through as they came)."""
    if raw is None or isinstance(raw, str):
        return raw, None
    if not isinstance(raw, list):
        raise BadRequest(f"{where} must be a string or an array of content parts", where)
    for i, part in enumerate(raw):
        kind = part.get("type") if isinstance(part, dict) else None
        if not isinstance(kind, str):
            raise BadRequest(f"{where}[{i}] must be a content part with a 'type'", f"{where}[{i}]")
        if kind == "text" and not isinstance(part.get("text"), str):
            raise BadRequest(f"{where}[{i}].text must be a string", f"{where}[{i}].text")
    text = content_parts.joined_text(raw)
    return text, (raw if content_parts.has_media(raw) else None)


def _call(raw: object, where: str) -> ToolCall:
    function = raw.get("function") if isinstance(raw, dict) else None
    if not isinstance(raw, dict) or not isinstance(function, dict):
        raise BadRequest(f"{where} must be a function call", where)
    name = function.get("name")
    if not isinstance(name, str):
        raise BadRequest(f"{where}.function.name must be a string", f"{where}.function.name")
    arguments = function.get("arguments")
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments if arguments is not None else {})
    call_id = raw.get("id")
    return ToolCall(call_id if isinstance(call_id, str) else None, name, arguments)


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


def _usage(usage: Usage | None) -> dict[str, Any] | None:
    if usage is None:
        return None
    out: dict[str, Any] = {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
    }
    if usage.cached_tokens is not None:  # §5.4a: what the upstream's cache served, when told
        out["prompt_tokens_details"] = {"cached_tokens": usage.cached_tokens}
    return out


def completion(reply: Reply) -> dict[str, Any]:
    message: dict[str, Any] = {
        "role": "assistant",
        "content": reply.message.content if reply.message is not None else "",
    }
    calls = _wire_calls(reply.message, indexed=False)
    if calls:
        message["tool_calls"] = calls
    thought = reply.message.meta.get(REASONING_KEY) if reply.message is not None else None
    if isinstance(thought, str) and thought:
        message["reasoning_content"] = thought
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
    """After the text: the tool calls, the finish chunk and (when asked, and the upstream
    told it) the usage chunk."""
    created = reply.created or int(time.time())
    calls = _wire_calls(reply.message, indexed=True)
    if calls:
        yield chunk(reply.id, reply.model, created, {"tool_calls": calls})
    yield chunk(reply.id, reply.model, created, {}, finish_reason(reply.message, reply.finish))
    usage = _usage(reply.usage)
    if include_usage and usage is not None:  # none invented: the upstream sent none
        yield {
            "id": reply.id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": reply.model,
            "choices": [],
            "usage": usage,
        }
