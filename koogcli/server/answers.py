"""What every protocol of `koog serve` answers with (SPEC §6): a turn's reply as the
protocols' wire formats read it, tool results named, and the error shape a body or a
guard refuses with (OpenAI's, which the other protocols' routes reshape)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from koogcli.core.messages import Message
from koogcli.core.ports import Usage


@dataclass(frozen=True, slots=True)
class Reply:
    """What the response says of a turn: its id, model, message, finish and usage."""

    id: str
    model: str
    message: Message | None
    finish: str | None
    usage: Usage | None
    created: int = 0


def named_results(conversation: tuple[Message, ...]) -> tuple[Message, ...]:
    """Tool results carry their tool's name (clients send only the call's id)."""
    names: dict[str | None, str | None] = {
        c.id: c.name for m in conversation for c in m.tool_calls if c.id
    }
    if not any(m.role == "tool" and not m.name for m in conversation):
        return conversation
    return tuple(
        replace(m, name=names.get(m.tool_call_id)) if m.role == "tool" and not m.name else m
        for m in conversation
    )


def error_body(
    message: str, kind: str, code: str | None = None, param: str | None = None
) -> dict[str, Any]:
    """OpenAI's error shape."""
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}
