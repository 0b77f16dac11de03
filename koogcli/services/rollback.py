"""Rollback (SPEC §5.6, §5.11): one service, `prepare` then `execute`, for the CLI, the REPL
and /retry alike.

- `prepare` first finishes what a rollback killed halfway left (each compensation exactly
  once), then chooses the restore point, refuses a history that would contradict the world
  (§5.11) and plans what happens to every tool call the rollback takes out of the history:
  undone by its compensating tool, or left in place and why. Nothing changes yet, so the
  plan can be shown and confirmed.
- `execute` takes a restore point of the current state (the rollback can be undone),
  journals the compensations, restores the history, then runs them newest first.
- `--latest` compensates as an id does (a deliberate deviation from Koog's
  rollbackToLatestCheckpoint): a history that forgets a call whose effect remains
  contradicts the world. Only a checkpoint that is an earlier state of the history (its
  messages a prefix of the current ones) has its later calls undone, as in Koog.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from koogcli.core import checkpoints as core
from koogcli.core.agent_edits import FileFate
from koogcli.core.checkpoints import Checkpoint
from koogcli.core.errors import KoogError, StorageError, UsageError
from koogcli.core.messages import (
    NOT_RUN,
    TOOL_EFFECTS,
    Message,
    ToolCall,
    clients_calls,
)
from koogcli.core.names import SessionName
from koogcli.core.ports import StoredHistory
from koogcli.core.results import Compensation, RollbackResult, call_text
from koogcli.services import agent_files, turn_numbers
from koogcli.services.checkpoints import describe, find, require_enabled, restore_point
from koogcli.services.compensations import Results, finish_compensations, journal_calls, run
from koogcli.services.context import AppContext

Approve = Callable[[ToolCall], str]

# An MCP call that may have changed something and has no compensation (SPEC §5.20): the
# rollback says so before it runs, and goes on only when confirmed or forced.
CANNOT_UNDO = "no compensation"


@dataclass(frozen=True)
class Options:
    compensate: bool = True  # False: --no-compensate
    force: bool = False  # restore even a history whose tool effects a rollback undid
    compensate_imported: bool = False


@dataclass(frozen=True)
class RollbackPlan:
    session: SessionName
    target: Checkpoint | None  # with its messages (None: `retried`)
    current: StoredHistory
    undoes: str  # the change this rollback undoes, in words
    removed: tuple[Compensation, ...]  # every call taken out, newest first, as planned
    contradicted: tuple[ToolCall, ...]  # in the target, undone by a rollback (--force)
    finished: tuple[Compensation, ...] = ()  # what a killed rollback left, run first
    forced: bool = False  # --force: calls koog cannot undo are left in place
    # An agent session's files its edit tools changed (services/agent_files.py).
    files: tuple[FileFate, ...] = ()
    files_finished: tuple[FileFate, ...] = ()  # restores a killed rollback left, done first

    @property
    def retried(self) -> bool:
        """`--latest` retried a rollback stopped after it restored the history: finishing
        it was the whole of it (see `prepare`); nothing more is asked or rolled back."""
        return self.target is None

    @property
    def to_undo(self) -> list[ToolCall]:
        return [c.call for c in self.removed if c.status == "undone"]

    @property
    def cannot_undo(self) -> list[ToolCall]:
        """Removed MCP calls that may have changed something, with no compensation."""
        return [c.call for c in self.removed if c.reason == CANNOT_UNDO]

    def question(self) -> str:
        if self.target is None:
            return f"finish the rollback of {self.session.value} that was stopped"
        what = (
            f"roll {self.session.value} back to checkpoint {self.target.id}, undoing {self.undoes}"
        )
        undo, leave = self.to_undo, [c for c in self.removed if c.status == "left in place"]
        if undo:
            what += f"; {len(undo)} tool call(s) will be undone"
        if leave:
            what += f"; {len(leave)} left in place"
        writes = [f for f in self.files if f.writes]
        if writes:
            what += f"; {len(writes)} file(s) the agent edited set back: " + ", ".join(
                f.path for f in writes
            )
        kept = [f for f in self.files if f.status == "changed"]
        if kept:
            what += f"; {len(kept)} changed since left as they are: " + ", ".join(
                f.path for f in kept
            )
        if self.cannot_undo:
            what += (
                f"; koog cannot undo {len(self.cannot_undo)} of them, whose effects stay: "
                + ", ".join(call_text(c) for c in self.cannot_undo)
            )
        return what


def choose(ctx: AppContext, session: SessionName, wanted: str | None, latest: bool) -> Checkpoint:
    """The checkpoint named, or with `latest` the newest restore point whose history differs
    from the current one: the last change that changed something (§5.11)."""
    require_enabled(ctx)
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


def prepare(
    ctx: AppContext,
    session: SessionName,
    wanted: str | None,
    latest: bool,
    options: Options | None = None,
    approve: Approve | None = None,
) -> RollbackPlan:
    """Finish a killed rollback, choose the restore point and plan; changes nothing else."""
    require_enabled(ctx)
    finished = finish_compensations(ctx, session, approve, wait=True)
    files_finished = agent_files.finish_held(ctx, session, wait=True)
    if latest and (finished or files_finished):
        # What was finished belongs to a rollback that restored the history (one stopped
        # before it did is cancelled, and finishes nothing): that rollback was the last
        # change, and `--latest` asked for it. Choosing again would undo it.
        current = ctx.history.read(session)
        return RollbackPlan(
            session, None, current, "", (), (), tuple(finished),
            files_finished=tuple(files_finished),
        )  # fmt: skip
    target = choose(ctx, session, wanted, latest)
    made = plan(ctx, session, target, options, finished)
    return replace(made, files_finished=tuple(files_finished))


def plan(
    ctx: AppContext,
    session: SessionName,
    target: Checkpoint,
    options: Options | None = None,
    finished: Sequence[Compensation] = (),
) -> RollbackPlan:
    opts = options or Options()
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
    contradicted = core.undone_calls(full.messages, journal)
    if contradicted and not opts.force:
        raise UsageError(
            f"checkpoint {full.id} holds tool calls whose effects a later rollback undid: "
            + ", ".join(call_text(c) for c in contradicted),
            hint="restoring it would make the history contradict the world; "
            "--force restores it with a note saying those effects were undone",
        )
    already = {c.id for c in core.undone_calls(current.messages, journal)}
    earlier = core.is_prefix(full.messages, current.messages)
    results = {m.tool_call_id: m.meta for m in current.messages if m.role == "tool"}
    files = agent_files.plan(ctx, session, current.messages, full)
    if not opts.force:
        agent_files.refuse_changed(files)
    restored = {c: f.writes for f in files if f.move is not None for c in f.move.calls}
    removed = tuple(
        _fate(ctx, call, message, opts, earlier, already, results.get(call.id, {}), restored)
        for call, message in core.removed_calls(full.messages, current.messages)
    )
    return RollbackPlan(
        session,
        full,
        current,
        describe(full, current.messages, turn_numbers.of_session(ctx, session)),
        removed,
        tuple(contradicted),
        tuple(finished),
        opts.force,
        tuple(files),
    )


def _fate(
    ctx: AppContext,
    call: ToolCall,
    message: Message,
    opts: Options,
    earlier: bool,
    already: set[str | None],
    result: Mapping[str, object],
    restored: Mapping[str, bool],
) -> Compensation:
    """What the rollback will do with one call it takes out of the history; `result`: the
    meta of its tool message (whether it ran; an MCP call's hints)."""

    def left(reason: str) -> Compensation:
        return Compensation(call, None, "left in place", reason)

    if clients_calls(message):
        if call.id and restored.get(call.id):  # one report for the call and its files
            return Compensation(
                call, None, "files set back", "a client's tool; from koog's journal, below"
            )
        if call.id and call.id in restored:
            return left("a client's tool; the file it edited changed since, see below")
        return left("a client's tool")
    if call.id in already:
        return Compensation(call, None, "already undone", "by an earlier rollback")
    if result.get(NOT_RUN):
        return left("it was never run (not approved)")
    effects = result.get(TOOL_EFFECTS)
    if not ctx.toolbox.has_rollback(call.name):
        if isinstance(effects, dict):  # an MCP call: read-only, or its effects stay
            return left("read-only" if effects.get("read_only") else CANNOT_UNDO)
        return left("no compensating tool")
    if not opts.compensate:
        return left("--no-compensate")
    if message.meta.get("imported") and not opts.compensate_imported:
        return left("it came by history import; --compensate-imported undoes it")
    if not earlier:
        return left("the checkpoint is not an earlier state of this history")
    return Compensation(call, None, "undone")


def execute(
    ctx: AppContext, plan: RollbackPlan, approve: Approve | None = None, confirmed: bool = False
) -> RollbackResult:
    """Restore the history and run the planned compensations, newest first.

    A restore point of the current state is taken first, so the rollback can be undone; the
    compensations are journalled before the history changes, so a rollback killed at any
    point is finished, each compensation exactly once, by the next command on the session.
    Calls koog cannot undo need `confirmed` (the user was asked, naming them) or --force.
    """
    if plan.cannot_undo and not (confirmed or plan.forced):
        raise UsageError(
            f"koog cannot undo {len(plan.cannot_undo)} tool call(s) this rollback takes out, "
            "whose effects would stay: " + ", ".join(call_text(c) for c in plan.cannot_undo),
            hint="--force rolls back the history and leaves them in place (each reported); "
            "or map a compensation in [[mcp.compensations]]",
        )
    if plan.target is None:
        count = len(plan.current.messages)
        return RollbackResult(
            plan.session.value, None, None, count, count, finished=list(plan.finished),
            files_finished=list(plan.files_finished), retried=True,
        )  # fmt: skip
    with ctx.undo_lock(plan.session):
        return _execute(ctx, plan, approve)


def _execute(ctx: AppContext, plan: RollbackPlan, approve: Approve | None) -> RollbackResult:
    session, current, target = plan.session, plan.current, plan.target
    assert target is not None  # a retried plan never comes here
    restored = list(target.messages)
    note = core.undone_note(list(plan.contradicted)) if plan.contradicted else None
    if note is not None:
        restored.append(note)
    undo = restore_point(
        ctx, session, "rollback", messages=current.messages, revision=current.revision
    )
    point = undo.id if undo else None
    to_undo = plan.to_undo
    journal_calls(ctx, session, to_undo, "pending", point)
    agent_files.journal_pending(ctx, session, plan.files, point)
    try:
        ctx.history.write(session, restored, expected_revision=current.revision)
    except KoogError as exc:
        journal_calls(ctx, session, to_undo, "cancelled", point)
        agent_files.journal_pending(ctx, session, plan.files, point, "cancelled")
        raise StorageError(
            f"session {session.value} changed during the rollback; nothing restored",
            hint="run the rollback again",
        ) from exc
    files = agent_files.apply(ctx, session, plan.files, point)
    results = Results(ctx, session, {point: current.messages})
    done = [
        run(ctx, session, c.call, point, approve, results) if c.status == "undone" else c
        for c in plan.removed
    ]
    return RollbackResult(
        session.value,
        target,
        point,
        len(current.messages),
        len(restored),
        done,
        plan.undoes,
        note,
        list(plan.finished),
        files,
        list(plan.files_finished),
    )
