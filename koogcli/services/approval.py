"""Whether a call of a tool that asks may run (`ask = true`, `--ask-tools`): shared by a
turn's tool calls and a rollback's compensations."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from koogcli.core.messages import ToolCall
from koogcli.core.names import SessionName
from koogcli.services.context import AppContext

Verdict = Literal["run", "declined", "no terminal"]


def decide(
    ctx: AppContext,
    session: SessionName,
    call: ToolCall,
    approve: Callable[[ToolCall], str] | None,
    undo: bool = False,
) -> Verdict:
    """Ask when the tool asks (`undo`: for its compensation) and the user has not said
    "always" for it in this session; without a way to ask (no terminal) the call is not
    run, unless the user said yes to every call beforehand (`koog chat --yes`)."""
    key = (session.value, call.name)
    if not ctx.toolbox.asks(call.name, undo) or key in ctx.approved_tools:
        return "run"
    if ctx.approve_all:
        return "run"
    if approve is None:
        return "no terminal"
    answer = approve(call)
    if answer == "a":
        ctx.approved_tools.add(key)
    return "run" if answer in ("y", "a") else "declined"
