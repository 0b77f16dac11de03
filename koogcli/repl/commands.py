"""The core slash commands: /help, /history, /clear, /session, /model, /exit."""

from __future__ import annotations

from typing import TYPE_CHECKING

from koogcli.core.errors import UsageError
from koogcli.core.names import SessionName
from koogcli.repl import completers
from koogcli.repl.slash import REGISTRY
from koogcli.ui import render, views

if TYPE_CHECKING:
    from koogcli.repl.state import ReplState


@REGISTRY.add("help", "/help", "list the commands")
def _help(state: ReplState, args: str) -> None:
    rows = [(c.usage, c.help) for c in sorted(REGISTRY.unique(), key=lambda c: c.name)]
    rows.append(("Esc-Enter", "newline; Enter sends; Ctrl-R searches input history"))
    rows.append(("Tab", "completes commands and their arguments"))
    rows.append(("Ctrl-X Ctrl-E", "edit the message in $VISUAL / $EDITOR"))
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
        state.ui.info(views.empty_history(state.session.value))
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


@REGISTRY.add("session", "/session NAME", "switch to another session", complete=completers.sessions)
def _session(state: ReplState, args: str) -> None:
    if not args:
        state.ui.info(f"session: {state.session.value}")
        return
    state.session = SessionName.parse(args)
    state.ui.info(f"switched to session {state.session.value}")


@REGISTRY.add(
    "model",
    "/model NAME",
    "use another model for the rest of this REPL",
    complete=completers.models,
)
def _model(state: ReplState, args: str) -> None:
    if args:
        state.model = args
    state.ui.info(f"model: {state.model or state.ctx.settings.llm.model}")


@REGISTRY.add("rename", "/rename NEW", "give this session a new name")
def _rename(state: ReplState, args: str) -> None:
    from koogcli.services import history

    if not args:
        raise UsageError("usage: /rename NEW")
    new = SessionName.parse(args)
    if state.ctx.history.exists(state.session) or state.ctx.transcript.exists(state.session):
        history.rename(state.ctx, state.session, new)
        state.ui.info(f"renamed {state.session.value} to {new.value}")
    else:  # nothing stored yet: the session simply starts under the new name
        state.ui.info(f"session: {new.value}")
    state.session = new


@REGISTRY.add("fork", "/fork NEW [N]", "continue in a new session from message N (default: all)")
def _fork(state: ReplState, args: str) -> None:
    from koogcli.services import history

    name, _, at = args.strip().partition(" ")
    if not name or (at.strip() and not at.strip().isdigit()):
        raise UsageError("usage: /fork NEW [N]", hint="N counts messages as /history shows them")
    done = history.fork(
        state.ctx, state.session, SessionName.parse(name), int(at) if at.strip() else None
    )
    state.session = SessionName.parse(done.session)
    state.ui.info(f"forked {done.source} at message {done.at}; now in {done.session}")


@REGISTRY.add(
    "role",
    "/role NAME",
    "use a role's system prompt (and its model) from the next message on",
    complete=completers.roles,
)
def _role(state: ReplState, args: str) -> None:
    from koogcli.services import sessions

    if not args:
        roles = ", ".join(sorted(state.ctx.settings.roles)) or "none configured"
        state.ui.info(f"role: {state.role or 'none'} (roles: {roles})")
        return
    if state.rebuild is None:
        raise UsageError("roles cannot be switched in this REPL")
    flags = sessions.role_flags(state.ctx, args)
    state.ctx = state.rebuild(flags)
    state.role = args
    model = flags.get("llm.model")
    if isinstance(model, str):
        state.model = model
    system = render.one_line(str(flags["llm.system_prompt"]), 80)
    state.ui.info(f"role {args}: model {state.model or state.ctx.settings.llm.model}, {system!r}")


@REGISTRY.add("exit", "/exit", "leave the REPL", aliases=("quit",))
def _exit(state: ReplState, args: str) -> None:
    state.running = False


def _count(args: str, default: int) -> int:
    if not args:
        return default
    if not args.isdigit() or int(args) < 1:
        raise UsageError(f"expected a number of 1 or more, got {args!r}")
    return int(args)
