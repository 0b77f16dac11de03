"""Sending a message from the REPL and showing the turn; used by the loop and by the
commands that send (/retry, /edit, /editor, /resume)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from koogcli.repl.state import ReplState
from koogcli.ui.reply import ReplyDisplay

if TYPE_CHECKING:
    from koogcli.core.messages import ToolCall
    from koogcli.services.turn import TurnEvents, TurnResult


def send(state: ReplState, text: str) -> None:
    """One turn with `text` and the files /attach queued for it."""
    from koogcli.services.prompt_input import compose, media_parts
    from koogcli.services.turn import TurnRequest, run_turn
    from koogcli.services.turn.request import CallOptions

    message = compose(text, None, state.attachments, state.ctx.settings.chat.max_input_bytes)
    media = media_parts(state.attachments)  # images, PDFs, audio: content parts
    call = CallOptions(parts=media) if media else None
    request = TurnRequest(state.session, message, model=state.model, save=state.save, call=call)
    state.failed_text = text  # until the turn is stored: /retry sends it again
    result = show_turn(state, lambda events: run_turn(state.ctx, request, events))
    state.failed_text = None
    state.attachments = []  # sent; a failed turn keeps them for the next try
    state.last_text = message
    if result is not None:
        _count(state, result)


def resume(state: ReplState) -> bool:
    """Finish the session's interrupted turn; False when there is none."""
    from koogcli.services import turn

    result = show_turn(state, lambda events: turn.resume_turn(state.ctx, state.session, events))
    if result is not None:
        _count(state, result)
    return result is not None


def show_turn(
    state: ReplState, run: Callable[[TurnEvents], TurnResult | None]
) -> TurnResult | None:
    """Stream the reply; tool calls and results as one dim line each."""
    from koogcli.services.turn import TurnEvents
    from koogcli.ui.reply import turn_handlers

    display = state.ui.reply()
    events = TurnEvents(
        **turn_handlers(display, state.ui.info, state.ui.warning),
        approve=lambda call: _paused(display, state.approve, call),  # type: ignore[arg-type,return-value]
    )
    from koogcli.repl.typeahead import held

    try:
        with held():
            result = run(events)
    except BaseException:
        display.abort()
        raise
    display.finish(result.reply if result else None)
    if result is not None:
        from koogcli.ui.views import cut_reply

        cut = cut_reply(result.finish_reason, state.ctx.settings.llm.max_tokens)
        if cut is not None:
            state.ui.warning(cut)
    return result


def _paused(display: ReplyDisplay, ask: Callable[[ToolCall], str], call: ToolCall) -> str:
    display.pause()  # the question is asked below the reply, not inside its live region
    return ask(call)


def _count(state: ReplState, result: TurnResult) -> None:
    state.last_reply = result.reply
    if result.usage is not None:
        state.usage = state.usage.plus(result.usage) if state.usage else result.usage
