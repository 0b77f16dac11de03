"""The core slash commands: /help, /history, /clear, /session, /model, /exit."""

from __future__ import annotations

from typing import TYPE_CHECKING

from koogcli.core.errors import UsageError
from koogcli.core.names import SessionName
from koogcli.repl.slash import REGISTRY
from koogcli.ui import render

if TYPE_CHECKING:
    from koogcli.repl.state import ReplState


@REGISTRY.add("help", "/help", "list the commands")
def _help(state: ReplState, args: str) -> None:
    rows = [(c.usage, c.help) for c in sorted(REGISTRY.unique(), key=lambda c: c.name)]
    rows.append(("Esc-Enter", "newline; Enter sends; Ctrl-R searches input history"))
    rows.append(("Ctrl-C / Ctrl-D", "cancel a reply / leave"))
    state.ui.show(render.table(rows, ("COMMAND", "WHAT IT DOES")))


@REGISTRY.add("history", "/history [N]", "show the last N stored messages (default 20)")
def _history(state: ReplState, args: str) -> None:
    from koogcli.services import history

    count = _count(args, default=20)
    messages = (
        history.show(state.ctx, state.session, count)
        if state.ctx.history.exists(state.session)
        else []
    )
    if not messages:
        state.ui.info(f"session {state.session.value} has no stored messages")
        return
    state.ui.show(render.format_messages(messages, "text"))


@REGISTRY.add("clear", "/clear", "empty this session's chat history (the transcript is kept)")
def _clear(state: ReplState, args: str) -> None:
    from koogcli.services import history

    if not state.ctx.history.exists(state.session):
        state.ui.info("nothing to clear")
        return
    if not state.ask(f"clear the history of {state.session.value}?"):
        state.ui.info("nothing changed")  # the answer is never sent as a message
        return
    count = history.clear(state.ctx, state.session)
    state.ui.info(f"cleared {count} messages from {state.session.value}")


@REGISTRY.add("session", "/session NAME", "switch to another session")
def _session(state: ReplState, args: str) -> None:
    if not args:
        state.ui.info(f"session: {state.session.value}")
        return
    state.session = SessionName.parse(args)
    state.ui.info(f"switched to session {state.session.value}")


@REGISTRY.add("model", "/model NAME", "use another model for the rest of this REPL")
def _model(state: ReplState, args: str) -> None:
    if args:
        state.model = args
    state.ui.info(f"model: {state.model or state.ctx.settings.llm.model}")


@REGISTRY.add("exit", "/exit", "leave the REPL", aliases=("quit",))
def _exit(state: ReplState, args: str) -> None:
    state.running = False


def _count(args: str, default: int) -> int:
    if not args:
        return default
    if not args.isdigit():
        raise UsageError(f"expected a number, got {args!r}")
    return int(args)
