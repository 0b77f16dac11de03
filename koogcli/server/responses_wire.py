"""OpenAI's Responses API wire format (the Open Responses subset clients use), both ways,
for `koog serve` (SPEC §6).

A request's `instructions` and `input` items become the domain messages of a chat turn
(function calls join the assistant message before them, as chat completions hold them);
its function tools, `tool_choice`, `max_output_tokens` and `text.format` become the chat
request koog sends upstream. A turn's result becomes a `response` object, or the
`response.*` events the official SDK's stream accumulates.
"""

from __future__ import annotations

import base64
import binascii
import json
import secrets
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from koogcli.core import content_parts
from koogcli.core.messages import Message, ToolCall
from koogcli.core.ports import Usage
from koogcli.server import bodies
from koogcli.server.bodies import BadRequest
from koogcli.services.turn_state import ClientOptions

_ROLES = {"developer": "system", "system": "system", "user": "user", "assistant": "assistant"}
_TEXT_PARTS = ("input_text", "output_text", "text", "refusal")
# Fields translated or read here; the others (reasoning, include, prompt_cache_key,
# truncation, service_tier, ...) are the client's business, not the upstream's.
_PASSED = ("temperature", "top_p", "parallel_tool_calls")


@dataclass(frozen=True, slots=True)
class ResponsesBody:
    conversation: tuple[Message, ...]  # instructions first, as a system message
    input: tuple[Message, ...]  # the request's own input items, as messages
    client: ClientOptions
    model: str | None
    stream: bool
    store: bool
    previous: str | None  # previous_response_id
    session: str | None  # `conversation` (an id or {"id": ...}), else metadata.koog_session
    user: str | None
    echo: Mapping[str, Any] = field(default_factory=dict)  # what the response repeats


def _wire(role: str, content: str | None, **fields: Any) -> Message:
    """A message as a client sent it: ids and times are given to those koog stores."""
    return Message(role=role, content=content, id="", created_at="", **fields)  # type: ignore[arg-type]


def parse_responses(raw: bytes) -> ResponsesBody:
    body = bodies.obj(raw)
    instructions = bodies.string(body, "instructions")
    given = body.get("input")
    if isinstance(given, str):
        items: list[Any] = [{"type": "message", "role": "user", "content": given}]
    elif isinstance(given, list) and given:
        items = given
    else:
        raise BadRequest("'input' must be a string or a non-empty array of items", "input")
    said = _messages(items)
    system = (_wire("system", instructions),) if instructions else ()
    tools = _tools(body.get("tools"))
    extra: dict[str, object] = {k: body[k] for k in _PASSED if k in body}
    if "max_output_tokens" in body:
        extra["max_tokens"] = bodies.whole(body, "max_output_tokens", 0, 1, 10_000_000)
    if "tool_choice" in body:
        extra["tool_choice"] = _tool_choice(body["tool_choice"])
    temperature = bodies.number(body, "temperature")
    extra.pop("temperature", None)
    metadata = body.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise BadRequest("'metadata' must be an object", "metadata")
    previous = bodies.string(body, "previous_response_id")
    user = body.get("safety_identifier") or body.get("user")
    if user is not None and not isinstance(user, str):
        raise BadRequest("'user' must be a string", "user")
    echo = {
        "instructions": instructions,
        "metadata": metadata or {},
        "tools": body.get("tools") or [],
        "tool_choice": body.get("tool_choice", "auto"),
        "parallel_tool_calls": bodies.boolean(body, "parallel_tool_calls", True),
        "temperature": temperature,
        "top_p": bodies.number(body, "top_p"),
        "max_output_tokens": extra.get("max_tokens"),
        "previous_response_id": previous,
        "text": body.get("text")
        if isinstance(body.get("text"), dict)
        else {"format": {"type": "text"}},
    }
    return ResponsesBody(
        conversation=(*system, *said),
        input=said,
        client=ClientOptions(
            tools=tools,
            temperature=temperature,
            response_format=_format(body.get("text")),
            extra=extra,
        ),
        model=bodies.string(body, "model") or None,
        stream=bodies.boolean(body, "stream", False),
        store=bodies.boolean(body, "store", True),
        previous=previous or None,
        session=_conversation(body.get("conversation"), metadata),
        user=user or None,
        echo=echo,
    )


def _conversation(raw: object, metadata: object) -> str | None:
    if isinstance(raw, dict):
        raw = raw.get("id")
    if raw is not None and not isinstance(raw, str):
        raise BadRequest(
            "'conversation' must be a string or an object with an 'id'", "conversation"
        )
    if raw:
        return raw
    named = metadata.get("koog_session") if isinstance(metadata, dict) else None
    if named is not None and not isinstance(named, str):
        raise BadRequest("'metadata.koog_session' must be a string", "metadata.koog_session")
    return named or None


def _messages(items: Sequence[Any]) -> tuple[Message, ...]:
    out: list[Message] = []
    names: dict[str, str] = {}
    for index, item in enumerate(items):
        where = f"input[{index}]"
        if not isinstance(item, dict):
            raise BadRequest(f"{where} must be an object", where)
        kind = item.get("type", "message")
        if kind == "message":
            out.append(_message(item, where))
        elif kind == "function_call":
            call = _call(item, where)
            names[call.id or ""] = call.name or ""
            last = out[-1] if out else None
            if last is not None and last.role == "assistant":
                out[-1] = replace(last, tool_calls=(*last.tool_calls, call))
            else:
                out.append(_wire("assistant", None, tool_calls=(call,)))
        elif kind == "function_call_output":
            call_id = item.get("call_id")
            if not isinstance(call_id, str):
                raise BadRequest(f"{where}.call_id must be a string", f"{where}.call_id")
            text = _text(item.get("output"), f"{where}.output")
            out.append(_wire("tool", text, tool_call_id=call_id, name=names.get(call_id)))
        elif kind == "reasoning":
            continue  # the client's own record of the upstream's reasoning; chat has no place
        else:
            raise BadRequest(
                f"{where}: input items of type {kind!r} are not supported (koog serve takes "
                "messages, function_call, function_call_output and reasoning)",
                f"{where}.type",
            )
    if not out:
        raise BadRequest("'input' holds no message", "input")
    return tuple(out)


def _message(item: Mapping[str, Any], where: str) -> Message:
    given = item.get("role")
    role = _ROLES.get(given) if isinstance(given, str) else None
    if role is None:
        raise BadRequest(
            f"{where}.role {item.get('role')!r} is not one koog takes", f"{where}.role"
        )
    content = item.get("content")
    if isinstance(content, str):
        return _wire(role, content)
    if not isinstance(content, list):
        raise BadRequest(
            f"{where}.content must be a string or an array of parts", f"{where}.content"
        )
    parts: list[dict[str, Any]] = []
    for i, part in enumerate(content):
        at = f"{where}.content[{i}]"
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in _TEXT_PARTS:
            text = part.get("text", part.get("refusal"))
            if not isinstance(text, str):
                raise BadRequest(f"{at}.text must be a string", f"{at}.text")
            parts.append({"type": "text", "text": text})
        elif kind == "input_image":
            url = part.get("image_url")
            if not isinstance(url, str):
                raise BadRequest(f"{at}.image_url must be a URL or a data URL", f"{at}.image_url")
            image: dict[str, Any] = {"url": url}
            if isinstance(part.get("detail"), str):
                image["detail"] = part["detail"]
            parts.append({"type": "image_url", "image_url": image})
        else:
            raise BadRequest(
                f"{at}: content parts of type {kind!r} are not supported", f"{at}.type"
            )
    text = content_parts.joined_text(parts)
    meta = {content_parts.KEY: parts} if content_parts.has_media(parts) else {}
    return _wire(role, text, meta=meta)


def _text(raw: object, where: str) -> str:
    if isinstance(raw, str):
        return raw
    if isinstance(raw, list):
        texts = [
            p.get("text") for p in raw if isinstance(p, dict) and isinstance(p.get("text"), str)
        ]
        return "".join(t for t in texts if t is not None)
    raise BadRequest(f"{where} must be a string or an array of parts", where)


def _call(item: Mapping[str, Any], where: str) -> ToolCall:
    name, call_id, arguments = item.get("name"), item.get("call_id"), item.get("arguments", "{}")
    if not isinstance(name, str):
        raise BadRequest(f"{where}.name must be a string", f"{where}.name")
    if not isinstance(call_id, str):
        raise BadRequest(f"{where}.call_id must be a string", f"{where}.call_id")
    if not isinstance(arguments, str):
        raise BadRequest(f"{where}.arguments must be a string", f"{where}.arguments")
    return ToolCall(call_id, name, arguments)


def _tools(raw: object) -> tuple[dict[str, object], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise BadRequest("'tools' must be an array", "tools")
    out: list[dict[str, object]] = []
    for i, tool in enumerate(_flat(raw)):
        kind = tool.get("type") if isinstance(tool, dict) else None
        if kind != "function" or not isinstance(tool.get("name"), str):
            raise BadRequest(
                f"tools[{i}]: the upstream runs function tools only; {kind!r} is a built-in "
                "tool koog serve cannot offer",
                f"tools[{i}].type",
            )
        function = {
            k: tool[k] for k in ("name", "description", "parameters", "strict") if k in tool
        }
        out.append({"type": "function", "function": function})
    return tuple(out)


def _flat(tools: list[Any]) -> list[Any]:
    """A `namespace` tool's functions (Codex groups its sub-agent tools so) offered as
    functions of their own names."""
    out = []
    for tool in tools:
        inner = tool.get("tools") if isinstance(tool, dict) else None
        if isinstance(tool, dict) and tool.get("type") == "namespace" and isinstance(inner, list):
            out.extend(inner)
        else:
            out.append(tool)
    return out


def _tool_choice(raw: object) -> object:
    if raw in ("auto", "none", "required"):
        return raw
    if isinstance(raw, dict) and raw.get("type") == "function" and isinstance(raw.get("name"), str):
        return {"type": "function", "function": {"name": raw["name"]}}
    raise BadRequest("'tool_choice' must be auto, none, required or a function", "tool_choice")


def _format(raw: object) -> dict[str, object] | None:
    given = raw.get("format") if isinstance(raw, dict) else None
    if given is None or (isinstance(given, dict) and given.get("type") == "text"):
        return None
    if not isinstance(given, dict) or given.get("type") not in ("json_schema", "json_object"):
        raise BadRequest("'text.format' must be text, json_schema or json_object", "text.format")
    if given["type"] == "json_object":
        return {"type": "json_object"}
    schema = {k: given[k] for k in ("name", "schema", "strict", "description") if k in given}
    return {"type": "json_schema", "json_schema": schema}


# --- response ids ------------------------------------------------------------------------


def response_id(session: str | None, message_id: str) -> str:
    """A stored response's id names its session and reply (`GET` and
    `previous_response_id` find it there); a stateless one is random."""
    if session is None:
        return f"resp_s{secrets.token_hex(16)}"
    packed = base64.urlsafe_b64encode(f"{session}\n{message_id}".encode()).decode()
    return "resp_k" + packed.rstrip("=")


def parse_response_id(ident: str) -> tuple[str, str] | None:
    """(session, reply id) of a stored response's id; None: not one koog stored."""
    if not ident.startswith("resp_k"):
        return None
    packed = ident[6:]
    try:
        text = base64.urlsafe_b64decode(packed + "=" * (-len(packed) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None
    session, sep, message_id = text.partition("\n")
    return (session, message_id) if sep and session and message_id else None


# --- the response -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Answer:
    id: str
    model: str
    message: Message | None
    finish: str | None
    usage: Usage | None
    created: int
    echo: Mapping[str, Any]


def _item_id(prefix: str, message: Message | None, index: int = 0) -> str:
    base = message.id if message is not None and message.id else secrets.token_hex(16)
    return f"{prefix}_{base}{index:02d}" if prefix == "fc" else f"{prefix}_{base}"


def message_item(answer: Answer, text: str, status: str = "completed") -> dict[str, Any]:
    return {
        "type": "message",
        "id": _item_id("msg", answer.message),
        "status": status,
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]
        if status == "completed"
        else [],
    }


def call_item(answer: Answer, index: int, call: ToolCall, done: bool = True) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": _item_id("fc", answer.message, index),
        "call_id": call.id or f"call_{index}",
        "name": call.name or "",
        "arguments": call.arguments if done else "",
        "status": "completed" if done else "in_progress",
    }


def output(answer: Answer) -> list[dict[str, Any]]:
    message = answer.message
    items = []
    if message is not None and (message.content or not message.tool_calls):
        items.append(message_item(answer, message.content or ""))
    for index, call in enumerate(message.tool_calls if message is not None else ()):
        items.append(call_item(answer, index, call))
    return items


def status_of(answer: Answer) -> tuple[str, dict[str, str] | None]:
    if answer.finish == "length":
        return "incomplete", {"reason": "max_output_tokens"}
    if answer.finish == "content_filter":
        return "incomplete", {"reason": "content_filter"}
    return "completed", None


def response(
    answer: Answer, status: str | None = None, items: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    final, incomplete = status_of(answer)
    echo = answer.echo
    out: dict[str, Any] = {
        "id": answer.id,
        "object": "response",
        "created_at": answer.created or int(time.time()),
        "status": status or final,
        "error": None,
        "incomplete_details": incomplete if status is None else None,
        "model": answer.model,
        "output": output(answer) if items is None else items,
        "parallel_tool_calls": echo.get("parallel_tool_calls", True),
        "tool_choice": echo.get("tool_choice", "auto"),
        "tools": list(echo.get("tools", [])),
        "instructions": echo.get("instructions"),
        "metadata": dict(echo.get("metadata", {})),
        "temperature": echo.get("temperature"),
        "top_p": echo.get("top_p"),
        "max_output_tokens": echo.get("max_output_tokens"),
        "previous_response_id": echo.get("previous_response_id"),
        "text": echo.get("text", {"format": {"type": "text"}}),
        "truncation": "disabled",
        "store": echo.get("store", True),
        "usage": _usage(answer.usage) if status is None else None,
    }
    return out


def _usage(usage: Usage | None) -> dict[str, Any] | None:
    if usage is None:
        return None
    return {
        "input_tokens": usage.prompt_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": usage.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": usage.total_tokens,
    }


def input_items(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Stored messages as the input items they came as."""
    items: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "tool":
            items.append(
                {
                    "type": "function_call_output",
                    "id": f"fco_{m.id}",
                    "call_id": m.tool_call_id,
                    "output": m.content or "",
                    "status": "completed",
                }
            )
            continue
        kind = "output_text" if m.role == "assistant" else "input_text"
        if m.content or not m.tool_calls:
            items.append(
                {
                    "type": "message",
                    "id": f"msg_{m.id}",
                    "role": m.role,
                    "status": "completed",
                    "content": [{"type": kind, "text": m.content or ""}],
                }
            )
        for index, call in enumerate(m.tool_calls):
            items.append(
                {
                    "type": "function_call",
                    "id": f"fc_{m.id}{index:02d}",
                    "call_id": call.id,
                    "name": call.name,
                    "arguments": call.arguments,
                    "status": "completed",
                }
            )
    return items


def events(
    answer: Answer, opened_text: bool, text: str, start: int, item_id: str
) -> Iterator[dict[str, Any]]:
    """The closing events of a streamed response, numbered from `start`: the text item's
    end (when one was opened), each function call whole, then `response.completed` (or
    `response.incomplete`)."""
    number = start
    index = 0

    def numbered(event: dict[str, Any]) -> dict[str, Any]:
        nonlocal number
        event["sequence_number"] = number
        number += 1
        return event

    message = answer.message
    if opened_text:
        item = {**message_item(answer, text), "id": item_id}
        part = item["content"][0]
        yield numbered(
            {
                "type": "response.output_text.done",
                "item_id": item["id"],
                "output_index": 0,
                "content_index": 0,
                "text": text,
                "logprobs": [],
            }
        )
        yield numbered(
            {
                "type": "response.content_part.done",
                "item_id": item["id"],
                "output_index": 0,
                "content_index": 0,
                "part": part,
            }
        )
        yield numbered({"type": "response.output_item.done", "output_index": 0, "item": item})
        index = 1
    for i, call in enumerate(message.tool_calls if message is not None else ()):
        item = call_item(answer, i, call, done=False)
        yield numbered({"type": "response.output_item.added", "output_index": index, "item": item})
        yield numbered(
            {
                "type": "response.function_call_arguments.delta",
                "item_id": item["id"],
                "output_index": index,
                "delta": call.arguments,
            }
        )
        yield numbered(
            {
                "type": "response.function_call_arguments.done",
                "item_id": item["id"],
                "output_index": index,
                "arguments": call.arguments,
                "name": call.name,
            }
        )
        yield numbered(
            {
                "type": "response.output_item.done",
                "output_index": index,
                "item": call_item(answer, i, call),
            }
        )
        index += 1
    items = ([{**message_item(answer, text), "id": item_id}] if opened_text else []) + [
        call_item(answer, i, c) for i, c in enumerate(message.tool_calls if message else ())
    ]
    if not items:
        items = output(answer)
    final = response(answer, items=items)
    final["status"], final["incomplete_details"] = status_of(answer)
    final["usage"] = _usage(answer.usage)
    kind = "response.completed" if final["status"] == "completed" else "response.incomplete"
    yield numbered({"type": kind, "response": final})


def to_json(data: object) -> str:
    return json.dumps(data, ensure_ascii=False)
