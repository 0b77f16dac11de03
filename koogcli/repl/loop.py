"""The REPL loop: read, dispatch, render. It never exits the process.

Ctrl-C while a reply streams cancels that turn (history unchanged) and returns to the
prompt; Ctrl-C on an empty prompt or Ctrl-D leaves the loop. A KoogError during a turn or
command is reported and the loop goes on.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from prompt_toolkit import PromptSession

from koogcli.core.errors import KoogError, TurnCancelledError
from koogcli.core.names import SessionName
from koogcli.repl import (  # noqa: F401  (register slash commands)
    checkpoint_commands,
    commands,
    compress_commands,
    memory_commands,
)
from koogcli.repl import prompt as prompt_builder
from koogcli.repl.slash import REGISTRY
from koogcli.repl.state import ReplState, ReplUI, ReplyDisplay
from koogcli.services.context import AppContext
from koogcli.ui import render

if TYPE_CHECKING:
    from koogcli.core.messages import ToolCall
    from koogcli.services.turn import TurnEvents, TurnResult


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
) -> None:
    state = ReplState(ctx, session, ui or ReplUI(markdown=ctx.settings.chat.markdown), save=save)
    prompt = prompt_builder.build(
        REGISTRY.names(),
        ctx.data.input_history_file if history_file and save else None,
        input,
        output,
        redact=ctx.pipeline.redacts,
    )
    state.ask = lambda question: _ask(prompt, question)
    state.approve = lambda call: _approve(prompt, call)
    state.approve_undo = lambda call: _approve(prompt, call, undo=True)
    state.ui.info(banner(state))
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
            if line.startswith("/"):
                REGISTRY.dispatch(state, line)
            else:
                _turn(state, line)
        except (TurnCancelledError, KeyboardInterrupt):
            state.ui.info("(cancelled)")
        except KoogError as err:
            state.ui.error(err)


def banner(state: ReplState) -> str:
    count = len(state.ctx.history.load(state.session))
    model = state.model or state.ctx.settings.llm.model
    saving = " · not saved (--no-save)" if not state.save else ""
    return (
        f"koog · session {state.session.value} ({count} messages) · model {model}{saving}"
        " · /help, Ctrl-D to leave"
    )


def _ask(prompt: PromptSession[str], question: str) -> bool:
    try:
        answer = prompt.prompt(f"{question} [y/N] ")
    except (EOFError, KeyboardInterrupt):
        return False
    return answer.strip().lower() in ("y", "yes")


def _approve(prompt: PromptSession[str], call: ToolCall, undo: bool = False) -> str:
    """Ask about one tool call (its line is already on screen); the answer is never sent as
    a message."""
    while True:
        try:
            answer = prompt.prompt(render.approval_question(call, undo))
        except (EOFError, KeyboardInterrupt):
            return "n"
        choice = answer.strip().lower()[:1]
        if choice in ("y", "n", "a"):
            return choice


def _paused(display: ReplyDisplay, ask: Callable[[ToolCall], str], call: ToolCall) -> str:
    display.pause()  # the question is asked below the reply, not inside its live region
    return ask(call)


def _offer_resume(state: ReplState) -> None:
    from koogcli.services import turn

    try:
        pending = turn.interrupted(state.ctx, state.session)
        if pending is None:
            return
        state.ui.info(
            f"session {state.session.value} has an interrupted turn (after step {pending.step})"
        )
        if state.ask("resume it?"):
            show_turn(state, lambda events: turn.resume_turn(state.ctx, state.session, events))
        else:
            turn.abandon(state.ctx, state.session)
            state.ui.info("abandoned it; its restore point stays in /checkpoints")
    except (TurnCancelledError, KeyboardInterrupt):
        state.ui.info("(cancelled)")
    except KoogError as err:
        state.ui.error(err)


def _turn(state: ReplState, text: str) -> None:
    from koogcli.services.turn import TurnRequest, run_turn

    request = TurnRequest(state.session, text, model=state.model, save=state.save)
    show_turn(state, lambda events: run_turn(state.ctx, request, events))


def show_turn(state: ReplState, run: Callable[[TurnEvents], TurnResult | None]) -> None:
    """Stream the reply; tool calls and results as one dim line each."""
    from koogcli.services.turn import TurnEvents
    from koogcli.ui.reply import turn_handlers

    display = state.ui.reply()
    events = TurnEvents(
        **turn_handlers(display, state.ui.info, state.ui.warning),
        approve=lambda call: _paused(display, state.approve, call),  # type: ignore[arg-type,return-value]
    )
    try:
        result = run(events)
    except BaseException:
        display.abort()
        raise
    display.finish(result.reply if result else None)
