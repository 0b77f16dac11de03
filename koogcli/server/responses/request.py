"""A Responses API request (the Open Responses subset clients use) as a chat turn, for
`koog serve` (SPEC §6): `instructions` and the `input` items become domain messages
(function calls join the assistant message before them, as chat completions hold them);
function tools, `tool_choice`, `max_output_tokens` and `text.format` become the chat
request koog sends upstream. A body koog cannot take is a BadRequest naming the field.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from koogcli.core import content_parts
from koogcli.core.agent_compaction import opens_compaction
from koogcli.core.messages import Message, ToolCall
from koogcli.server import bodies
from koogcli.server.bodies import BadRequest
from koogcli.services import remote_compaction
from koogcli.services.turn.request import ClientOptions

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
    compaction: bool = False  # the last input item is `compaction_trigger` (Codex)
    compacts: bool = False  # an agent's compaction request (a summary asked for), by its shape
    left_out: tuple[str, ...] = ()  # hosted tools the upstream cannot run (access log)
    raw: Mapping[str, Any] = field(default_factory=dict)  # the body as sent


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
        items = bodies.conversation(given, "input")
    else:
        raise BadRequest("'input' must be a string or a non-empty array of items", "input")
    said = _messages(items)
    system = (_wire("system", instructions),) if instructions else ()
    tools, left_out = _tools(bodies.array(body, "tools"))
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
        raw=body,
        echo=echo,
        compaction=_asks_compaction(items),
        compacts=opens_compaction(bodies.last_blocks(items)),
        left_out=left_out,
    )


def _asks_compaction(items: Sequence[Any]) -> bool:
    last = items[-1] if items else None
    return isinstance(last, dict) and last.get("type") == "compaction_trigger"


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
        elif kind in _CALLS:
            call = _CALLS[kind](item, where)
            names[call.id or ""] = call.name or ""
            last = out[-1] if out else None
            if last is not None and last.role == "assistant":  # one reply's calls together
                out[-1] = replace(last, tool_calls=(*last.tool_calls, call))
            else:
                out.append(_wire("assistant", None, tool_calls=(call,)))
        elif kind in ("function_call_output", "custom_tool_call_output", "local_shell_call_output"):
            call_id = item.get("call_id", item.get("id"))
            if not isinstance(call_id, str):
                raise BadRequest(f"{where}.call_id must be a string", f"{where}.call_id")
            text = _text(item.get("output"), f"{where}.output")
            out.append(_wire("tool", text, tool_call_id=call_id, name=names.get(call_id)))
        elif kind == "reasoning" or kind == "compaction_trigger":
            continue  # the upstream's own record of its reasoning; a compaction request's mark
        elif kind == "compaction":  # a summary Codex replays: koog's own handle, read back
            try:
                summary = remote_compaction.expanded(item.get("encrypted_content"))
            except remote_compaction.ForgedHandleError as exc:
                raise BadRequest(exc.message, f"{where}.encrypted_content") from None
            if summary is not None:
                out.append(_wire("user", summary))
        else:
            raise BadRequest(
                f"{where}: input items of type {kind!r} are not supported (koog serve takes "
                "messages, function, custom tool and local shell calls and their outputs, "
                "reasoning and compaction)",
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


# Codex's freeform tools (apply_patch) and its local shell, offered as functions to a chat
# upstream and their calls given back in their own item types (server/responses/wire.py).
FREEFORM_INPUT = {
    "type": "object",
    "properties": {"input": {"type": "string", "description": "The tool's whole input."}},
    "required": ["input"],
}
LOCAL_SHELL = "local_shell"
_LOCAL_SHELL_PARAMETERS = {
    "type": "object",
    "properties": {
        "command": {"type": "array", "items": {"type": "string"}},
        "working_directory": {"type": "string"},
        "timeout_ms": {"type": "integer"},
    },
    "required": ["command"],
}


def _freeform_call(item: Mapping[str, Any], where: str) -> ToolCall:
    """Codex's freeform call (apply_patch): its text input as a function's `input`."""
    call_id, name, given = item.get("call_id"), item.get("name"), item.get("input")
    if not isinstance(call_id, str) or not isinstance(name, str) or not isinstance(given, str):
        raise BadRequest(f"{where} needs string call_id, name and input", where)
    return ToolCall(call_id, name, json.dumps({"input": given}, ensure_ascii=False))


def _shell(item: Mapping[str, Any], where: str) -> ToolCall:
    """Codex's local shell call: its `exec` action as the local_shell function's arguments."""
    call_id, action = item.get("call_id", item.get("id")), item.get("action")
    if not isinstance(call_id, str) or not isinstance(action, dict):
        raise BadRequest(f"{where} needs a string call_id and an action object", where)
    arguments = {k: v for k, v in action.items() if k != "type"}
    return ToolCall(call_id, LOCAL_SHELL, json.dumps(arguments, ensure_ascii=False))


_CALLS: dict[str, Callable[[Mapping[str, Any], str], ToolCall]] = {
    "function_call": lambda item, where: _call(item, where),
    "custom_tool_call": lambda item, where: _freeform_call(item, where),
    "local_shell_call": lambda item, where: _shell(item, where),
}


def _tools(raw: list[Any]) -> tuple[tuple[dict[str, object], ...], tuple[str, ...]]:
    """The tools as functions, and those left out: hosted tools (web_search, file_search,
    ...) run by OpenAI's servers, which the upstream cannot run (Codex offers web_search
    with every request; refusing it refused the agent)."""
    out: list[dict[str, object]] = []
    left: list[str] = []
    for i, tool in enumerate(_flat(raw)):
        kind = tool.get("type") if isinstance(tool, dict) else None
        name = tool.get("name") if isinstance(tool, dict) else None
        if kind == LOCAL_SHELL:
            function: dict[str, object] = {
                "name": LOCAL_SHELL,
                "description": "Run a command on the user's machine.",
                "parameters": _LOCAL_SHELL_PARAMETERS,
            }
        elif kind in ("function", "custom") and isinstance(name, str):
            function = {k: tool[k] for k in ("name", "description", "strict") if k in tool}
            function["parameters"] = (
                tool.get("parameters") if kind == "function" else FREEFORM_INPUT
            ) or {"type": "object", "properties": {}}
        elif isinstance(kind, str) and kind:
            left.append(kind)
            continue
        else:
            raise BadRequest(f"tools[{i}] must be an object with a 'type'", f"tools[{i}].type")
        out.append({"type": "function", "function": function})
    return tuple(out), tuple(dict.fromkeys(left))


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
