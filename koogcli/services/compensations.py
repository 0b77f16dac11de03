"""A rollback's compensations: each journalled before the history changes and run newest
first, and what a rollback killed halfway left finished by the next command, each exactly
once (SPEC §5.18). services/rollback.py plans and restores; this runs and finishes."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from koogcli.core import checkpoints as core
from koogcli.core.errors import KoogError, LockTimeoutError
from koogcli.core.messages import Message, ToolCall, utc_now
from koogcli.core.names import SessionName
from koogcli.core.results import Compensation, Status
from koogcli.core.tool_ports import ToolOutcome
from koogcli.services.context import AppContext

Approve = Callable[[ToolCall], str]

# The one rule for a compensation stopped while it ran (SPEC §5.18), as for tool calls.
IN_DOUBT = "in doubt: it was stopped while it ran, so it ran again"


def finish_compensations(
    ctx: AppContext, session: SessionName, approve: Approve | None = None, wait: bool = False
) -> list[Compensation]:
    """Finish what a killed rollback journalled, each compensation exactly once (§5.18),
    and report every call that rollback took out: undone now, already undone before it was
    killed, or not undone.

    Under the session's undo lock, the journal read again: a live rollback holds it while
    it runs its own compensations, so nothing it is doing is taken for left over (without
    `wait`, as at a turn's start, the work is left to it; a rollback command waits).

    - pending, its call still in the history: the rollback never restored it; cancelled.
    - pending: never started; run now.
    - running: its process outlives koog; wait for it and record its receipt. With no
      receipt it never returned (in doubt: stopped while it ran, or before it began), and
      the one rule applies, as for tool calls: it is run again.
    """
    if not ctx.settings.persistence.enabled:
        return []
    journal = ctx.checkpoints.compensations(session)
    if not any(e.status in ("pending", "running") for e in journal) and not _left(ctx, session):
        return []  # the common case: nothing to finish, no lock taken
    with contextlib.ExitStack() as held:
        try:
            held.enter_context(ctx.undo_lock(session, wait))
        except LockTimeoutError:
            if wait:
                raise
            return []
        return _finish(ctx, session, ctx.checkpoints.compensations(session), approve)


def _finish(
    ctx: AppContext,
    session: SessionName,
    journal: Sequence[core.CompensationEntry],
    approve: Approve | None,
) -> list[Compensation]:
    _sweep(ctx, session, journal)
    open_points = {e.rollback_point for e in journal if e.status in ("pending", "running")}
    if not open_points:
        return []
    present = {c.id for m in ctx.history.read(session).messages for c in m.tool_calls}
    results = Results(ctx, session)
    done: list[Compensation] = []
    for entry in journal:
        if entry.rollback_point not in open_points:
            continue
        call, point = entry.call, entry.rollback_point
        if entry.status == "pending" and call.id in present:
            journal_calls(ctx, session, [call], "cancelled", point)
        elif entry.status == "pending":
            done.append(run(ctx, session, call, point, approve, results))
        elif entry.status == "running":
            done.append(_settle(ctx, session, call, point, approve, results))
        elif entry.status == "done":
            done.append(
                Compensation(call, None, "already undone", "before the rollback was stopped")
            )
        elif entry.status == "failed":
            failed = ToolOutcome("its compensation failed before the rollback was stopped", True)
            done.append(Compensation(call, failed, "failed"))
    return done


def _left(ctx: AppContext, session: SessionName) -> bool:
    """Receipts a killed rollback left (the folder exists only then)."""
    return ctx.data.undo_receipt_file(session, "-", None).parent.exists()


def _sweep(
    ctx: AppContext, session: SessionName, journal: Sequence[core.CompensationEntry]
) -> None:
    """Receipts of compensations the journal has settled: a kill between the journal's
    `done` and the receipt's removal leaves one (only then does the folder exist)."""
    if not journal or not _left(ctx, session):
        return
    for entry in journal:
        if entry.status not in ("pending", "running"):
            receipt = _receipt(ctx, session, entry.call, entry.rollback_point)
            if receipt is not None:
                ctx.toolbox.forget(receipt)


def _settle(
    ctx: AppContext,
    session: SessionName,
    call: ToolCall,
    point: str | None,
    approve: Approve | None,
    results: Results,
) -> Compensation:
    """A compensation a killed koog started: its own result, or (in doubt) run again."""
    receipt = _receipt(ctx, session, call, point)
    outcome = ctx.toolbox.settle(call.name, receipt) if receipt is not None else None
    if outcome is None:
        again = run(ctx, session, call, point, approve, results)
        if again.status != "undone":
            return again
        return Compensation(call, again.outcome, "undone", IN_DOUBT)
    journal_calls(ctx, session, [call], "failed" if outcome.error else "done", point)
    if receipt is not None:
        ctx.toolbox.forget(receipt)
    status: Status = "failed" if outcome.error else "undone"
    return Compensation(call, outcome, status, "it finished after koog was stopped")


def journal_calls(
    ctx: AppContext,
    session: SessionName,
    calls: Sequence[ToolCall],
    status: core.Status,
    point: str | None,
) -> None:
    if calls and ctx.settings.persistence.enabled:
        ctx.checkpoints.record_compensations(
            session, [core.CompensationEntry(c, status, point, utc_now()) for c in calls]
        )


def run(
    ctx: AppContext,
    session: SessionName,
    call: ToolCall,
    point: str | None,
    approve: Approve | None,
    results: Results,
) -> Compensation:
    """One compensation: asked for when its tool asks, journalled `running` before its
    process starts and `done` or `failed` after; the process writes its receipt first, and
    finishes even if koog dies (a later rollback records it: `_settle`)."""
    from koogcli.services import approval

    verdict = approval.decide(ctx, session, call, approve, undo=True)
    if verdict != "run":
        journal_calls(ctx, session, [call], "refused", point)
        why = "declined" if verdict == "declined" else "could not be asked (no terminal)"
        return Compensation(call, ToolOutcome(f"not run: the user {why}", True), "declined", why)

    def started() -> None:
        journal_calls(ctx, session, [call], "running", point)

    receipt = _receipt(ctx, session, call, point)
    outcome = ctx.toolbox.rollback(
        call.name, call.arguments, started, receipt, results.of(call, point)
    )
    journal_calls(ctx, session, [call], "failed" if outcome.error else "done", point)
    if receipt is not None:
        ctx.toolbox.forget(receipt)
    return Compensation(call, outcome, "failed" if outcome.error else "undone")


class Results:
    """The removed calls' results as the history held them before the rollback (its
    restore point), for compensations whose arguments name them: read once a rollback,
    when a compensation first asks (a live rollback has them already)."""

    def __init__(
        self,
        ctx: AppContext,
        session: SessionName,
        known: Mapping[str | None, Sequence[Message]] | None = None,
    ) -> None:
        self.ctx, self.session = ctx, session
        self.by_point = {p: _tool_texts(m) for p, m in (known or {}).items() if p is not None}

    def of(self, call: ToolCall, point: str | None) -> str | None:
        if point is None or not call.id:
            return None
        if point not in self.by_point:
            try:
                before = self.ctx.checkpoints.get(self.session, point).messages
            except KoogError:
                before = ()
            self.by_point[point] = _tool_texts(before)
        return self.by_point[point].get(call.id)


def _tool_texts(messages: Sequence[Message]) -> dict[str | None, str]:
    return {m.tool_call_id: m.text for m in messages if m.role == "tool"}


def _receipt(
    ctx: AppContext, session: SessionName, call: ToolCall, point: str | None
) -> Path | None:
    return ctx.data.undo_receipt_file(session, call.id, point) if call.id else None
