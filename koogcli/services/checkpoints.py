"""Restore points, checkpoint listing and rollback with compensating tools (SPEC §5.6)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from koogcli.core import checkpoints as core
from koogcli.core.checkpoints import Checkpoint
from koogcli.core.errors import KoogError, StorageError, UsageError
from koogcli.core.messages import Message, ToolCall, utc_now
from koogcli.core.names import SessionName
from koogcli.core.ports import ToolOutcome
from koogcli.services.context import AppContext


def _require_enabled(ctx: AppContext) -> None:
    if not ctx.settings.persistence.enabled:
        raise UsageError("persistence is disabled", hint="set [persistence] enabled = true")


def restore_point(
    ctx: AppContext,
    session: SessionName,
    reason: str,
    *,
    label: str | None = None,
    manual: bool = False,
    messages: Sequence[Message] | None = None,
    revision: int | None = None,
) -> Checkpoint | None:
    """Snapshot the stored history before a change (nothing when persistence is off)."""
    if not ctx.settings.persistence.enabled:
        return None
    if messages is None:
        stored = ctx.history.read(session)
        messages, revision = stored.messages, stored.revision
    checkpoint = Checkpoint(
        id=core.new_checkpoint_id(),
        session=session.value,
        seq=0,
        kind="restore",
        created_at=utc_now(),
        messages=tuple(messages),
        reason=reason,
        label=label,
        manual=manual,
        details={"history_revision": revision},
    )
    return ctx.checkpoints.save(checkpoint)


def create(ctx: AppContext, session: SessionName, label: str | None) -> Checkpoint:
    _require_enabled(ctx)
    saved = restore_point(ctx, session, "manual", label=label, manual=True)
    assert saved is not None
    return saved


def list_(ctx: AppContext, session: SessionName, include_steps: bool = False) -> list[Checkpoint]:
    """Newest first; restore points only unless `include_steps`."""
    listed = ctx.checkpoints.headers(session)
    if not include_steps:
        listed = [c for c in listed if c.kind == "restore"]
    return sorted(listed, key=lambda c: (c.seq, c.created_at), reverse=True)


def find(ctx: AppContext, wanted: str, session: SessionName | None = None) -> Checkpoint:
    """A checkpoint by id or unique id prefix, in one session or across all of them."""
    names = [session.value] if session else ctx.checkpoints.sessions()
    found: list[Checkpoint] = []
    for name in names:
        found += core.resolve_id(ctx.checkpoints.headers(SessionName.parse(name)), wanted)
    where = f" in session {session.value}" if session else ""
    if not found:
        raise UsageError(
            f"no checkpoint {wanted!r}{where}", hint="`koog checkpoint list --all` shows them"
        )
    if len(found) > 1:
        ids = ", ".join(f"{c.session}/{c.id}" for c in found[:5])
        raise UsageError(
            f"checkpoint id {wanted!r} is ambiguous: {ids}", hint="give more characters"
        )
    return found[0]


def show(ctx: AppContext, wanted: str, session: SessionName | None = None) -> Checkpoint:
    header = find(ctx, wanted, session)
    if not header.readable:
        return header
    return ctx.checkpoints.get(SessionName(header.session), header.id)


def delete(ctx: AppContext, wanted: str, session: SessionName | None = None) -> Checkpoint:
    header = find(ctx, wanted, session)
    ctx.checkpoints.delete(SessionName(header.session), header.id)
    return header


@dataclass(frozen=True)
class Compensation:
    call: ToolCall
    outcome: ToolOutcome | None  # None: no compensating tool is registered for it


@dataclass(frozen=True)
class RollbackResult:
    session: str
    restored: Checkpoint
    undo_point: str | None
    messages_before: int
    messages_after: int
    compensations: list[Compensation] = field(default_factory=list)

    @property
    def failed(self) -> list[Compensation]:
        return [c for c in self.compensations if c.outcome is not None and c.outcome.error]


def choose(ctx: AppContext, session: SessionName, wanted: str | None, latest: bool) -> Checkpoint:
    _require_enabled(ctx)
    if latest == (wanted is not None):
        raise UsageError("name a checkpoint ID or pass --latest (one of them)")
    if wanted is not None:
        return find(ctx, wanted, session)
    found = core.latest_restore_point(ctx.checkpoints.headers(session))
    if found is None:
        raise UsageError(f"session {session.value} has no restore point yet")
    return found


def rollback(
    ctx: AppContext, session: SessionName, target: Checkpoint, compensate: bool
) -> RollbackResult:
    """Restore the history to `target`; with `compensate`, undo later tool calls newest first.

    A restore point of the current state is taken first, so the rollback can be undone.
    """
    if target.session != session.value:
        raise UsageError(
            f"checkpoint {target.id} belongs to session {target.session!r}, not {session.value!r}"
        )
    if target.kind != "restore":
        raise UsageError(
            f"checkpoint {target.id} is a {target.kind} checkpoint, not a restore point",
            hint="roll back to a restore point (`koog checkpoint list`)",
        )
    full = ctx.checkpoints.get(session, target.id)  # refuses unknown format versions (exit 3)
    current = ctx.history.read(session)
    undo = restore_point(
        ctx, session, "rollback", messages=current.messages, revision=current.revision
    )
    plan = core.compensation_plan(full.messages, current.messages) if compensate else []
    try:
        ctx.history.write(session, list(full.messages), expected_revision=current.revision)
    except KoogError as exc:
        raise StorageError(
            f"session {session.value} changed during the rollback; nothing restored",
            hint="run the rollback again",
        ) from exc
    results = [
        Compensation(
            call,
            ctx.toolbox.rollback(call.name, call.arguments)
            if ctx.toolbox.has_rollback(call.name)
            else None,
        )
        for call in plan
    ]
    return RollbackResult(
        session.value,
        full,
        undo.id if undo else None,
        len(current.messages),
        len(full.messages),
        results,
    )
