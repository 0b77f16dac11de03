"""The REPL loop: read, dispatch, render. It never exits the process.

Ctrl-C while a reply streams cancels that turn (history unchanged) and returns to the
prompt; Ctrl-C on an empty prompt or Ctrl-D leaves the loop. A KoogError during a turn or
command is reported and the loop goes on.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from koogcli.core.errors import KoogError, TurnCancelledError
from koogcli.core.names import SessionName
from koogcli.repl import (  # noqa: F401  (register slash commands)
    approval,
    checkpoint_commands,
    commands,
    compress_commands,
    mcp_commands,
    memory_commands,
    turn_commands,
    turns,
)
from koogcli.repl import prompt as prompt_builder
from koogcli.repl.approval import yes_or_no
from koogcli.repl.slash import REGISTRY
from koogcli.repl.state import ReplState, ReplUI
from koogcli.services.context import AppContext
from koogcli.ui import render


def run(
    ctx: AppContext,
    session: SessionName,
    *,
    input: Any = None,
    output: Any = None,
    ui: ReplUI | None = None,
    history_file: bool = True,
    offer_resume: bool = True,
    save: bool = True,
    rebuild: Callable[[dict[str, object]], AppContext] | None = None,
    per_line: Callable[[], AbstractContextManager[object]] = nullcontext,
) -> None:
    """The REPL until EOF or /exit. `per_line`: entered around each line (the process's
    collector switch, cli/process.py)."""
    state = ReplState(
        ctx,
        session,
        ui
        or ReplUI(
            markdown=ctx.settings.chat.markdown,
            reflows=render.terminal_reflows(ctx.settings.chat.terminal_reflows),
        ),
        save=save,
        rebuild=rebuild,
    )
    prompt = prompt_builder.build(
        REGISTRY,
        ctx.data.input_history_file if history_file and save else None,
        input,
        output,
        redact=ctx.pipeline.redacts,
        state=lambda: state,
    )
    state.ask = lambda question: yes_or_no(prompt, question)
    state.approve = lambda call: approval.ask(prompt, call, state.ui.info)
    state.approve_undo = lambda call: approval.ask(prompt, call, state.ui.info, undo=True)
    state.ui.info(banner(state))
    recent = context_on_entry(state)
    if recent:
        state.ui.info(recent)
    if save:
        _finish_at_start(state)
    if offer_resume and save:
        _offer_resume(state)
    while state.running:
        try:
            line = prompt.prompt(f"{state.session.value}> ")
        except (EOFError, KeyboardInterrupt):
            break
        if not line.strip():
            continue
        try:
            with per_line():
                if line.startswith("/"):
                    _finish_rollback(state)
                    REGISTRY.dispatch(state, line)
                else:
                    turns.send(state, line)
        except (TurnCancelledError, KeyboardInterrupt):
            state.ui.info("(cancelled)")
        except KoogError as err:
            state.ui.error(err)


def _finish_at_start(state: ReplState) -> None:
    """A rollback killed halfway is finished as the REPL opens, not at the first command."""
    try:
        _finish_rollback(state)
    except KeyboardInterrupt:
        state.ui.info("(cancelled)")
    except KoogError as err:
        state.ui.error(err)


def _finish_rollback(state: ReplState) -> None:
    """A rollback killed halfway is finished by the next command on the session (a turn
    finishes it itself), each compensation exactly once."""
    if not state.save:
        return
    from koogcli.services.compensations import finish_compensations
    from koogcli.ui.views import finished_lines

    done = finish_compensations(state.ctx, state.session, state.approve_undo)
    for line in finished_lines(state.session.value, done):
        state.ui.info(line)


def banner(state: ReplState) -> str:
    count = len(state.ctx.history.read(state.session).messages)
    model = state.model or state.ctx.settings.llm.model
    saving = " · not saved (--no-save)" if not state.save else ""
    return (
        f"koog · session {state.session.value} ({count} messages) · model {model}{saving}"
        " · /help, Ctrl-D to leave"
    )


def context_on_entry(state: ReplState) -> str:
    """The last `chat.show_on_resume` exchanges of the session, so the user sees where
    the conversation stands; long messages are cut to a few lines."""
    from koogcli.ui.views import recent_exchanges

    count = state.ctx.settings.chat.show_on_resume
    if not count or not state.ctx.history.exists(state.session):
        return ""
    return recent_exchanges(state.ctx.history.read(state.session).messages, count)


def _offer_resume(state: ReplState) -> None:
    from koogcli.services import turn

    try:
        pending = turn.unfinished(state.ctx, state.session)
        if pending is None:
            return
        state.ui.info(
            f"session {state.session.value} has an interrupted turn (after step {pending.step})"
        )
        if state.ask("resume it?"):
            turns.resume(state)
        else:
            turn.abandon(state.ctx, state.session)
            state.ui.info("abandoned it; its restore point stays in /checkpoints")
    except (TurnCancelledError, KeyboardInterrupt):
        state.ui.info("(cancelled)")
    except KoogError as err:
        state.ui.error(err)
