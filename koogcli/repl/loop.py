"""The REPL loop: read, dispatch, render. It never exits the process.

Ctrl-C while a reply streams cancels that turn (history unchanged) and returns to the
prompt; Ctrl-C on an empty prompt or Ctrl-D leaves the loop. A KoogError during a turn or
command is reported and the loop goes on.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any, Protocol, TextIO

from koogcli.cli import render
from koogcli.core.errors import KoogError, TurnCancelledError
from koogcli.core.names import SessionName
from koogcli.repl import commands  # noqa: F401  (registers the core slash commands)
from koogcli.repl import prompt as prompt_builder
from koogcli.repl.slash import REGISTRY
from koogcli.services.context import AppContext


class ReplyDisplay(Protocol):
    def delta(self, text: str) -> None: ...

    def finish(self, text: str | None = None) -> None: ...

    def abort(self) -> None: ...


class ReplUI:
    """Where the REPL shows things; tests substitute a recording subclass."""

    def __init__(self, stdout: TextIO | None = None, markdown: bool = True) -> None:
        self.stdout = stdout or sys.stdout
        self.markdown = markdown

    def reply(self) -> ReplyDisplay:
        return render.ReplyWriter(self.stdout, markdown=self.markdown)

    def show(self, text: str) -> None:
        render.out(text, self.stdout)

    def info(self, text: str) -> None:
        render.note(text)

    def error(self, err: KoogError) -> None:
        render.error(err)


@dataclass
class ReplState:
    ctx: AppContext
    session: SessionName
    ui: ReplUI
    model: str | None = None
    running: bool = True
    extra: dict[str, Any] = field(default_factory=dict)


def run(
    ctx: AppContext,
    session: SessionName,
    *,
    input: Any = None,
    output: Any = None,
    ui: ReplUI | None = None,
    history_file: bool = True,
) -> None:
    state = ReplState(ctx, session, ui or ReplUI(markdown=ctx.settings.chat.markdown))
    prompt = prompt_builder.build(
        REGISTRY.names(), ctx.data.input_history_file if history_file else None, input, output
    )
    state.ui.info(
        f"koog · session {session.value} · model {ctx.settings.llm.model} · /help, Ctrl-D to leave"
    )
    while state.running:
        try:
            line = prompt.prompt(f"{state.session.value}> ")
        except (EOFError, KeyboardInterrupt):
            break
        if not line.strip():
            continue
        try:
            if line.startswith("/"):
                REGISTRY.dispatch(state, line)
            else:
                _turn(state, line)
        except (TurnCancelledError, KeyboardInterrupt):
            state.ui.info("(cancelled)")
        except KoogError as err:
            state.ui.error(err)


def _turn(state: ReplState, text: str) -> None:
    from koogcli.services.turn import TurnRequest, run_turn

    display = state.ui.reply()
    try:
        result = run_turn(
            state.ctx, TurnRequest(state.session, text, model=state.model), display.delta
        )
    except BaseException:
        display.abort()
        raise
    display.finish(result.reply)
