"""Restore points, checkpoint listing and rollback with compensating tools (SPEC §5.6)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from koogcli.core import checkpoints as core
from koogcli.core.checkpoints import Checkpoint
from koogcli.core.errors import KoogError, StorageError, UsageError
from koogcli.core.messages import Message, ToolCall, local_time, utc_now
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
    ctx.require_session(session)
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
    undoes: str = ""  # which change this rollback undid, in words
    note: Message | None = None  # recorded with --force: effects undone since

    @property
    def failed(self) -> list[Compensation]:
        return [c for c in self.compensations if c.outcome is not None and c.outcome.error]


Approve = Callable[[ToolCall], str]


def choose(ctx: AppContext, session: SessionName, wanted: str | None, latest: bool) -> Checkpoint:
    """The checkpoint named, or with `latest` the newest restore point whose history differs
    from the current one: the last change that changed something (§5.11)."""
    _require_enabled(ctx)
    if latest == (wanted is not None):
        raise UsageError("name a checkpoint ID or pass --latest (one of them)")
    if not ctx.checkpoints.headers(session):
        ctx.require_session(session)  # a deleted session may still be rolled back
    if wanted is not None:
        return find(ctx, wanted, session)
    current = ctx.history.read(session).messages
    for header in core.restore_points_newest_first(ctx.checkpoints.headers(session)):
        full = ctx.checkpoints.get(session, header.id)
        if list(full.messages) != current:
            return full
    raise UsageError(f"session {session.value} has no earlier state to roll back to")


def describe(target: Checkpoint, current: Sequence[Message]) -> str:
    """The change that restoring `target` (with its messages) undoes, for people."""
    when = local_time(target.created_at)
    if target.manual:
        return f"the changes since checkpoint {target.label or target.id} ({when})"
    if target.reason == "turn":
        first = sum(1 for m in target.messages if m.role == "user") + 1
        last = sum(1 for m in current if m.role == "user")
        turns = f"turns {first}-{last}" if last > first else f"turn {first}"
        return f"{turns} (from {when})"
    if target.reason == "rollback":
        return f"the rollback of {when}"
    names = {"compress": "compression", "clear": "clear", "import": "import"}
    return f"the {names.get(target.reason, target.reason)} of {when}"


def rollback(
    ctx: AppContext,
    session: SessionName,
    target: Checkpoint,
    compensate: bool,
    *,
    force: bool = False,
    approve: Approve | None = None,
    compensate_imported: bool = False,
) -> RollbackResult:
    """Restore the history to `target`; with `compensate`, undo later tool calls newest first.

    A restore point of the current state is taken first, so the rollback can be undone. The
    compensations are journalled before the history changes; a history holding calls whose
    effects a rollback undid is restored only with `force`, and then says so in a note.
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
    journal = ctx.checkpoints.compensations(session)
    undone = _refuse_contradiction(full, journal, force)
    restored = list(full.messages)
    note = core.undone_note(undone) if undone else None
    if note is not None:
        restored.append(note)
    undone_ids = {c.id for c in core.undone_calls(current.messages, journal)}
    plan = (
        core.compensation_plan(full.messages, current.messages, compensate_imported)
        if compensate
        else []
    )
    plan = [c for c in plan if c.id not in undone_ids]  # each effect is undone once
    undo = restore_point(
        ctx, session, "rollback", messages=current.messages, revision=current.revision
    )
    point = undo.id if undo else None
    compensable = [c for c in plan if ctx.toolbox.has_rollback(c.name)]
    _journal(ctx, session, compensable, "pending", point)
    try:
        ctx.history.write(session, restored, expected_revision=current.revision)
    except KoogError as exc:
        _journal(ctx, session, compensable, "failed", point)
        raise StorageError(
            f"session {session.value} changed during the rollback; nothing restored",
            hint="run the rollback again",
        ) from exc
    results = [
        Compensation(call, _compensate(ctx, session, call, point, approve))
        if call in compensable
        else Compensation(call, None)
        for call in plan
    ]
    return RollbackResult(
        session.value,
        full,
        point,
        len(current.messages),
        len(restored),
        results,
        describe(full, current.messages),
        note,
    )


def preview(ctx: AppContext, session: SessionName, target: Checkpoint, force: bool) -> str:
    """What rolling back to `target` would undo, in words; refuses early (before any
    question is asked) what `rollback` would refuse."""
    if target.kind != "restore" or not target.readable:
        return f"checkpoint {target.id}"
    full = ctx.checkpoints.get(session, target.id)
    _refuse_contradiction(full, ctx.checkpoints.compensations(session), force)
    return describe(full, ctx.history.read(session).messages)


def _refuse_contradiction(
    full: Checkpoint, journal: Sequence[core.CompensationEntry], force: bool
) -> list[ToolCall]:
    """§5.11: the calls in `full` whose effects a rollback undid; an error unless forced."""
    undone = core.undone_calls(full.messages, journal)
    if undone and not force:
        raise UsageError(
            f"checkpoint {full.id} holds tool calls whose effects a later rollback undid: "
            + ", ".join(call_text(c) for c in undone),
            hint="restoring it would make the history contradict the world; "
            "--force restores it with a note saying those effects were undone",
        )
    return undone


def finish_compensations(
    ctx: AppContext, session: SessionName, approve: Approve | None = None
) -> list[Compensation]:
    """Run what a killed rollback journalled but never ran, each at most once.

    A pending compensation whose call is still in the history belongs to a rollback that
    never restored it: it is cancelled, not run. One already started stays as it was.
    """
    if not ctx.settings.persistence.enabled:
        return []
    pending = [e for e in ctx.checkpoints.compensations(session) if e.status == "pending"]
    if not pending:
        return []
    present = {c.id for m in ctx.history.load(session) for c in m.tool_calls}
    done: list[Compensation] = []
    for entry in pending:
        if entry.call.id in present:
            _journal(ctx, session, [entry.call], "cancelled", entry.rollback_point)
            continue
        outcome = _compensate(ctx, session, entry.call, entry.rollback_point, approve)
        done.append(Compensation(entry.call, outcome))
    return done


def call_text(call: ToolCall) -> str:
    return f"{call.name}({core.arguments_text(call.arguments)})"


def _journal(
    ctx: AppContext,
    session: SessionName,
    calls: Sequence[ToolCall],
    status: core.Status,
    point: str | None,
    durable: bool = True,
) -> None:
    if calls and ctx.settings.persistence.enabled:
        ctx.checkpoints.record_compensations(
            session,
            [core.CompensationEntry(c, status, point, utc_now()) for c in calls],
            durable,
        )


def _compensate(
    ctx: AppContext,
    session: SessionName,
    call: ToolCall,
    point: str | None,
    approve: Approve | None,
) -> ToolOutcome:
    """One compensation: asked for when its tool asks, journalled before and after it runs."""
    from koogcli.services import approval

    verdict = approval.decide(ctx, session, call, approve)
    if verdict != "run":
        _journal(ctx, session, [call], "refused", point)
        why = "declined" if verdict == "declined" else "could not be asked (no terminal)"
        return ToolOutcome(f"not run: the user {why}", True)

    def started() -> None:  # from here on it never runs again: at most once
        _journal(ctx, session, [call], "running", point, durable=False)

    outcome = ctx.toolbox.rollback(call.name, call.arguments, before=started)
    _journal(ctx, session, [call], "failed" if outcome.error else "done", point)
    return outcome
