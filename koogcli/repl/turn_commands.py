"""Slash commands about turns: /retry, /edit, /editor, /resume, /attach, /copy, /usage."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from koogcli.core.errors import UsageError
from koogcli.repl import turns
from koogcli.repl.slash import REGISTRY
from koogcli.ui import render, views

if TYPE_CHECKING:
    from koogcli.repl.state import ReplState
    from koogcli.services import retry


@REGISTRY.add("retry", "/retry", "undo the last turn and send its message again")
def _retry(state: ReplState, args: str) -> None:
    from koogcli.services import retry

    failed = state.failed_text
    if failed is not None:  # the last message never got its turn stored: send it again
        state.ui.info("sending the last message again")
        turns.send(state, failed)
        return
    last = retry.last_turn(state.ctx, state.session)
    text = _as_typed(state, last.text)
    _undo(state, last, "sending it again")
    turns.send(state, text)


@REGISTRY.add("edit", "/edit", "edit the last message in $EDITOR, undo its turn, send it")
def _edit(state: ReplState, args: str) -> None:
    from koogcli.repl.editor import edit_text
    from koogcli.services import retry

    last = retry.last_turn(state.ctx, state.session)
    text = edit_text(_as_typed(state, last.text))
    if text is None:  # nothing changes until there is something to send
        state.ui.info("the editor left no message; nothing changed")
        return
    _undo(state, last, "sending the edited message")
    turns.send(state, text)


@REGISTRY.add("editor", "/editor", "write a new message in $EDITOR (also Ctrl-X Ctrl-E)")
def _editor(state: ReplState, args: str) -> None:
    from koogcli.repl.editor import edit_text

    text = edit_text(args)
    if text is None:
        state.ui.info("the editor left no message; nothing sent")
        return
    turns.send(state, text)


@REGISTRY.add("resume", "/resume", "finish the turn a killed koog left unfinished")
def _resume(state: ReplState, args: str) -> None:
    if not turns.resume(state):
        state.ui.info(f"nothing to resume in session {state.session.value}")


@REGISTRY.add(
    "attach", "/attach PATH", "add a file (text, image, PDF, audio) to the next message", paths=True
)
def _attach(state: ReplState, args: str) -> None:
    from koogcli.services.prompt_input import read_attachment

    if not args:
        if state.attachments:
            names = ", ".join(a.name for a in state.attachments)
            state.ui.info(f"attached to the next message: {names}")
        else:
            state.ui.info("usage: /attach PATH (the file goes with the next message)")
        return
    item = read_attachment(args, state.ctx.settings.chat.max_attachment_bytes)
    state.attachments.append(item)
    if item.part is not None:
        from koogcli.core import content_parts

        found = content_parts.media(item.part)
        what = found.label() if found is not None else "a file"
        state.ui.info(f"attached {item.name} {what} to the next message")
        return
    size = len(item.text.encode())
    state.ui.info(f"attached {item.name} ({size:,} bytes) to the next message")


@REGISTRY.add("copy", "/copy", "copy the last reply to the clipboard (OSC 52)")
def _copy(state: ReplState, args: str) -> None:
    from koogcli.ui.clipboard import cannot_copy, osc52

    reply = state.last_reply or _stored_reply(state)
    if not reply:
        raise UsageError("there is no reply to copy yet")
    problem = cannot_copy(os.environ, render.is_tty(state.ui.stdout), len(reply.encode()))
    if problem is not None:
        raise UsageError(f"cannot copy: {problem}", hint="/history shows the reply to copy by hand")
    state.ui.stdout.write(osc52(reply, os.environ))
    state.ui.stdout.flush()
    where = " (in tmux: needs `set -g set-clipboard on`)" if os.environ.get("TMUX") else ""
    state.ui.info(
        f"copied the last reply ({len(reply):,} characters) with the terminal's clipboard "
        f"escape{where}"
    )


@REGISTRY.add(
    "usage", "/usage", "tokens used so far, and the next request's size against the context"
)
def _usage(state: ReplState, args: str) -> None:
    from koogcli.services import budget, history

    totals = history.usage_totals(state.ctx, state.session)
    if not totals.replies:
        state.ui.info(f"session {state.session.value} has no replies yet")
        return
    model = state.model or state.ctx.settings.llm.model
    size = budget.session_size(state.ctx, state.session, model)
    state.ui.show(f"next request: {size.describe()} for {model}")
    line = (
        f"session {state.session.value}: {totals.replies} "
        f"{'reply' if totals.replies == 1 else 'replies'}, "
        f"{totals.prompt_tokens:,} tokens in + {totals.completion_tokens:,} out = "
        f"{totals.prompt_tokens + totals.completion_tokens:,}"
    )
    if totals.reported < totals.replies:
        line += f" (the server reported counts for {totals.reported} of them)"
    cached = render.cache_words(totals.cached)  # of the replies whose server said
    state.ui.show(line if cached is None else f"{line}; {cached}")
    if state.usage is not None:
        u = state.usage
        line = (
            f"this REPL: {u.prompt_tokens:,} in + {u.completion_tokens:,} out = {u.total_tokens:,}"
        )
        cache = render.cache_words(u)  # §5.4a: only when the server reported it
        state.ui.show(line if cache is None else f"{line}; {cache}")


def _undo(state: ReplState, last: retry.LastTurn, then: str) -> None:
    """Undo the last turn (its tool calls too) and say what became of each call."""
    from koogcli.services import retry

    result = retry.undo(state.ctx, state.session, last, state.approve_undo, state.ask)
    state.ui.info(f"undid {last.undoes}; {then}")
    for line in views.compensation_lines(result.compensations):
        state.ui.info(line)


def _as_typed(state: ReplState, stored: str) -> str:
    """The last message as the user typed it when this REPL sent it; the stored one (after
    the redact preprocessors) otherwise."""
    typed = state.last_text
    if typed is not None and state.ctx.pipeline.redacts(typed) == stored:
        return typed
    return stored


def _stored_reply(state: ReplState) -> str | None:
    if not state.ctx.history.exists(state.session):
        return None
    messages = state.ctx.history.read(state.session).messages
    return next((m.text for m in reversed(messages) if m.role == "assistant" and m.text), None)
