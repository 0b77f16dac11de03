"""A turn's result in the Responses API's shapes, for `koog serve` (SPEC §6): a
`response` object, the closing `response.*` events the official SDK's stream
accumulates, the input items of a stored response, and response ids.
"""

from __future__ import annotations

import base64
import binascii
import json
import secrets
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from koogcli.core.messages import REASONING_KEY, Message, ToolCall
from koogcli.core.ports import Usage
from koogcli.server.answers import Reply

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
class Answer(Reply):
    """A reply, and what the response repeats of its request (tools, instructions, ...)."""

    echo: Mapping[str, Any] = field(default_factory=dict)


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
    """A call as the client offered its tool: a function call, Codex's freeform tool's
    `custom_tool_call` (its text input), or its `local_shell_call` (an exec action)."""
    kind = _offered_as(answer, call.name or "")
    common = {"call_id": call.id or f"call_{index}", "status": _status(done, kind)}
    if kind == "custom":
        text = _argument(call, "input")
        return {
            "type": "custom_tool_call",
            "id": _item_id("ctc", answer.message, index),
            **common,
            "name": call.name or "",
            "input": text if done else "",
        }
    if kind == "local_shell":
        action = _parsed(call)
        return {
            "type": "local_shell_call",
            "id": _item_id("lsh", answer.message, index),
            **common,
            "action": {"type": "exec", **action},
        }
    return {
        "type": "function_call",
        "id": _item_id("fc", answer.message, index),
        **common,
        "name": call.name or "",
        "arguments": call.arguments if done else "",
    }


def _offered_as(answer: Answer, name: str) -> str:
    """How the request offered the tool called `name`: "function", "custom" or
    "local_shell"."""
    for tool in answer.echo.get("tools", ()):
        if not isinstance(tool, dict):
            continue
        if tool.get("type") == "local_shell" and name == "local_shell":
            return "local_shell"
        if tool.get("type") == "custom" and tool.get("name") == name:
            return "custom"
    return "function"


def _status(done: bool, kind: str) -> str:
    return "completed" if done or kind == "local_shell" else "in_progress"


def _parsed(call: ToolCall) -> dict[str, Any]:
    try:
        found = json.loads(call.arguments or "{}")
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def _argument(call: ToolCall, name: str) -> str:
    """A freeform tool's text: the model's `input` (its whole arguments when it wrote no
    such field)."""
    value = _parsed(call).get(name)
    return value if isinstance(value, str) else call.arguments or ""


def output(answer: Answer) -> list[dict[str, Any]]:
    message = answer.message
    items = []
    thought = message.meta.get(REASONING_KEY) if message is not None else None
    if isinstance(thought, str) and thought:
        items.append(reasoning_item(_item_id("rs", message), thought))
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
        # §5.4a: what the upstream's cache served; 0 when it did not say (the field is required)
        "input_tokens_details": {"cached_tokens": usage.cached_tokens or 0},
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


def reasoning_item(ident: str, text: str, done: bool = True) -> dict[str, Any]:
    """The upstream's reasoning as an output item (its text whole, no summary)."""
    return {
        "type": "reasoning",
        "id": ident,
        "summary": [],
        "content": [{"type": "reasoning_text", "text": text}] if done else [],
        "status": "completed" if done else "in_progress",
    }


def events(
    answer: Answer, before: list[dict[str, Any]], text: str | None, start: int, item_id: str
) -> Iterator[dict[str, Any]]:
    """The closing events of a streamed response, numbered from `start`, after the items
    already complete (`before`: the reasoning): the text item's end (when one was opened:
    `text` not None), each function call whole, then `response.completed` (or
    `response.incomplete`)."""
    number = start

    def numbered(event: dict[str, Any]) -> dict[str, Any]:
        nonlocal number
        event["sequence_number"] = number
        number += 1
        return event

    items = list(before)
    if text is not None:
        item = {**message_item(answer, text), "id": item_id}
        at = {"item_id": item_id, "output_index": len(items), "content_index": 0}
        yield numbered({"type": "response.output_text.done", **at, "text": text, "logprobs": []})
        yield numbered({"type": "response.content_part.done", **at, "part": item["content"][0]})
        yield numbered(
            {"type": "response.output_item.done", "output_index": len(items), "item": item}
        )
        items.append(item)
    message = answer.message
    for i, call in enumerate(message.tool_calls if message is not None else ()):
        index, item = len(items), call_item(answer, i, call, done=False)
        at = {"item_id": item["id"], "output_index": index}
        yield numbered({"type": "response.output_item.added", "output_index": index, "item": item})
        done = call_item(answer, i, call)
        if done["type"] == "custom_tool_call":
            text = done["input"]
            yield numbered({"type": "response.custom_tool_call_input.delta", **at, "delta": text})
            yield numbered({"type": "response.custom_tool_call_input.done", **at, "input": text})
        elif done["type"] == "function_call":
            yield numbered(
                {"type": "response.function_call_arguments.delta", **at, "delta": call.arguments}
            )
            yield numbered(
                {
                    "type": "response.function_call_arguments.done",
                    **at,
                    "arguments": call.arguments,
                    "name": call.name,
                }
            )
        yield numbered({"type": "response.output_item.done", "output_index": index, "item": done})
        items.append(done)
    if not items:
        items = output(answer)
    final = response(answer, items=items)
    final["status"], final["incomplete_details"] = status_of(answer)
    final["usage"] = _usage(answer.usage)
    kind = "response.completed" if final["status"] == "completed" else "response.incomplete"
    yield numbered({"type": kind, "response": final})
