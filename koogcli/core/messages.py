"""The message model shared by every store and the model adapter (SPEC §4).

A Message is immutable. Tool calls use the OpenAI shape: an assistant message carries
`tool_calls`, each result is a `tool` message whose `tool_call_id` names its call.
`to_dict`/`from_dict` give the plain JSON form stored on disk; validation of untrusted
documents happens in the adapters before `from_dict` is reached.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Literal

Role = Literal["system", "user", "assistant", "tool"]

# meta key of an assistant message whose tool calls are a client's of `koog serve`: the
# client ran them, so koog never runs, resumes or compensates them (SPEC §6).
CLIENT_TOOLS = "client_tools"
# meta key of a reply the server cut short, with its reason: `length` (the token limit),
# `content_filter`. A whole reply has none.
FINISH_KEY = "finish_reason"
CUT_REASONS = frozenset({"length", "content_filter"})
CUT_LABELS = {"length": "cut at the length limit", "content_filter": "cut by a content filter"}
# meta key of the reasoning text the upstream sent beside a reply (not part of its content:
# never sent back upstream, summarised or indexed; serve hands it to its clients).
REASONING_KEY = "reasoning"


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def local_time(stamp: str) -> str:
    """An ISO-8601 time as people read it: local `YYYY-MM-DD HH:MM` (JSON keeps UTC)."""
    try:
        return datetime.fromisoformat(stamp).astimezone().strftime("%Y-%m-%d %H:%M")
    except ValueError:
        return stamp


def new_id() -> str:
    return uuid.uuid4().hex


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str | None
    name: str
    arguments: str = "{}"

    def to_dict(self) -> dict[str, object]:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


@dataclass(frozen=True, slots=True)
class Message:
    role: Role
    content: str | None
    id: str = field(default_factory=new_id)
    created_at: str = field(default_factory=utc_now)
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    meta: dict[str, object] = field(default_factory=dict)

    @property
    def text(self) -> str:
        return self.content or ""

    def with_content(self, content: str | None) -> Message:
        return replace(self, content=content)

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "id": self.id,
            "role": self.role,
            "content": self.content,
            "created_at": self.created_at,
        }
        if self.tool_calls:
            out["tool_calls"] = [c.to_dict() for c in self.tool_calls]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            out["name"] = self.name
        if self.meta:
            out["meta"] = dict(self.meta)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Message:
        """Build from an already validated dict (see adapters/codec/documents.py), without
        re-checks and without the frozen dataclass's __init__ (which sets each field
        through object.__setattr__): a load of 50,000 messages spends most of its time
        here. The slots are set directly, each exactly once, as __init__ would."""
        calls, meta, get = data.get("tool_calls"), data.get("meta"), data.get
        message = _new_message(cls)
        _set_role(message, data["role"])
        _set_content(message, get("content"))
        _set_id(message, data["id"])
        _set_created_at(message, data["created_at"])
        _set_tool_calls(
            message,
            tuple(
                ToolCall(c.get("id"), c["function"]["name"], c["function"]["arguments"])
                for c in calls
            )
            if calls
            else (),
        )
        _set_tool_call_id(message, get("tool_call_id"))
        _set_name(message, get("name"))
        _set_meta(message, dict(meta) if meta else {})
        return message


_new_message = object.__new__
# The slot descriptors' setters: they bypass the frozen __setattr__, as the generated
# __init__ of a frozen dataclass does.
_slot: dict[str, Any] = {name: vars(Message)[name].__set__ for name in Message.__slots__}
_set_role = _slot["role"]
_set_content = _slot["content"]
_set_id = _slot["id"]
_set_created_at = _slot["created_at"]
_set_tool_calls = _slot["tool_calls"]
_set_tool_call_id = _slot["tool_call_id"]
_set_name = _slot["name"]
_set_meta = _slot["meta"]


def clients_calls(m: Message) -> bool:
    """Whether the message's tool calls are a client's: marked so; or stored before the
    mark existed, when a reply koog serve stored carries a wire mark (core/wire_marks.py)
    and a call a client sent in its conversation carries nothing at all, where every
    reply of koog's own model names its model (an imported one says it was imported)."""
    if m.meta.get(CLIENT_TOOLS) or "wire" in m.meta:
        return True
    return bool(m.tool_calls) and "model" not in m.meta and "imported" not in m.meta


def system(text: str) -> Message:
    return Message(role="system", content=text)


def user(text: str) -> Message:
    return Message(role="user", content=text)


def assistant(text: str | None, tool_calls: Sequence[ToolCall] = ()) -> Message:
    return Message(role="assistant", content=text, tool_calls=tuple(tool_calls))


# A tool message's meta key for what a rollback must know of the call's effects: an MCP
# tool's hints as they were when it ran ({"read_only": bool, "destructive": bool | None}).
TOOL_EFFECTS = "tool_effects"
# A tool message's meta key for a call refused before it ran (not approved).
NOT_RUN = "not_run"


def tool_result(call_id: str | None, name: str, text: str) -> Message:
    return Message(role="tool", content=text, tool_call_id=call_id, name=name)


def without_system(messages: Iterable[Message]) -> list[Message]:
    return [m for m in messages if m.role != "system"]


def for_api(messages: Sequence[Message]) -> list[Message]:
    """Drop the halves of tool exchanges that a preprocessor separated.

    A filter may remove `tool` messages but keep the assistant call, which every
    OpenAI-compatible server rejects; the stored history keeps what the user configured,
    only the request is mended.
    """
    answered = {m.tool_call_id for m in messages if m.role == "tool"}
    called = {c.id for m in messages for c in m.tool_calls}
    out: list[Message] = []
    for m in messages:
        if m.role == "tool" and m.tool_call_id not in called:
            continue
        if m.tool_calls:
            kept = tuple(c for c in m.tool_calls if c.id in answered)
            if not kept and not m.content:
                continue
            m = replace(m, tool_calls=kept)
        out.append(m)
    return out
