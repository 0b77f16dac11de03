"""A turn's result in the Responses API's shapes, for `koog serve` (SPEC §6): a
`response` object, the closing `response.*` events the official SDK's stream
accumulates, the input items of a stored response, and response ids.
"""

from __future__ import annotations

import base64
import binascii
import secrets
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from koogcli.core.messages import Message, ToolCall
from koogcli.core.ports import Usage
from koogcli.server.wire import Reply

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
