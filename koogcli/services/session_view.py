"""What the page shows of one session (SPEC §6 "The page"): its history as `history show`
gives it with the agent's file edits marked, what `why` says of each reply, its restore
points with the files rolling back to each would set back, and where it came from. Read
only; the actions run the services the command line runs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from koogcli.core.checkpoints import Checkpoint
from koogcli.core.messages import Message
from koogcli.core.names import SessionName
from koogcli.core.ports import SessionSource
from koogcli.core.why import Explained
from koogcli.services.context import AppContext


@dataclass(frozen=True)
class SessionView:
    name: str
    messages: list[Message]
    explained: dict[str, Explained]  # by the reply's message id
    points: list[Checkpoint]  # restore points, newest first
    point_files: dict[str, list[str]]  # by point id: the agent's files it would set back
    source: SessionSource | None
    forked_from: tuple[str, int] | None
    checkpoints_on: bool = True
    problems: list[str] = field(default_factory=list)


def read(ctx: AppContext, session: SessionName) -> SessionView:
    from koogcli.services import agent_files, checkpoints, history, why

    messages = agent_files.marked(ctx, session, history.show(ctx, session))
    points: list[Checkpoint] = []
    files: dict[str, list[str]] = {}
    on = ctx.settings.persistence.enabled
    if on:
        points = checkpoints.list_(ctx, session)
        files = agent_files.point_files(ctx, session, points)
    return SessionView(
        session.value,
        messages,
        why.explain_each(ctx, session),
        points,
        files,
        history.source_of(ctx, session),
        ctx.storage.origins.all().get(session.value),
        on,
    )


def change_mark(ctx: AppContext, session: SessionName) -> tuple[object, ...]:
    """Something that changes whenever the session does (a turn stored, a rollback, a
    compression, a restore point), cheap enough to ask every second."""
    last = [m.id for m in ctx.history.tail(session, 2)] if ctx.history.exists(session) else []
    return (tuple(last), len(ctx.checkpoints.headers(session)))


def sessions_mark(ctx: AppContext, allows: Callable[[str], bool]) -> tuple[object, ...]:
    """Something that changes whenever a session `allows` lets be seen is stored, renamed
    or deleted (nothing of the others)."""
    found = ctx.history.sessions()
    return tuple(sorted((s.name, s.revision, s.messages) for s in found if allows(s.name)))
