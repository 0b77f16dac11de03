"""Undoing the last turn to send it again (the REPL's /retry and /edit).

The turn is undone by the rollback service, as `rollback --latest` would: a restore point of
the current history is taken first (the undo can itself be undone), and the turn's tool
calls are undone by their compensating tools (§5.6), so sending the message again does not
do their work twice.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from koogcli.core.checkpoints import Checkpoint
from koogcli.core.errors import UsageError
from koogcli.core.names import SessionName
from koogcli.core.results import RollbackResult
from koogcli.services import checkpoints, rollback, turn_numbers
from koogcli.services.context import AppContext


@dataclass(frozen=True)
class LastTurn:
    text: str  # the user message as stored (after the redact preprocessors)
    undoes: str  # what undoing it means, in words
    target: Checkpoint  # the turn's restore point


def last_turn(ctx: AppContext, session: SessionName) -> LastTurn:
    """The last change of the session, if it was a turn; anything else is refused, since
    undoing a compression or a clear in order to resend a message is not what was asked."""
    if not ctx.history.exists(session) or not ctx.history.read(session).messages:
        raise UsageError(f"session {session.value} has no turn to send again")
    target = _target(ctx, session)
    current = ctx.history.read(session).messages
    change = checkpoints.describe(target, current, turn_numbers.of_session(ctx, session))
    if target.reason != "turn" or target.manual:
        raise UsageError(
            f"the last change of {session.value} is {change}, not a turn",
            hint="/rollback undoes it",
        )
    text = next((m.text for m in reversed(current) if m.role == "user"), None)
    if text is None:
        raise UsageError(f"session {session.value} has no user message to send again")
    return LastTurn(text, change, target)


def undo(
    ctx: AppContext,
    session: SessionName,
    turn: LastTurn,
    approve: rollback.Approve | None = None,
    confirm: Callable[[str], bool] | None = None,
) -> RollbackResult:
    """Undo the last turn; a call koog cannot undo (an MCP write with no compensation) is
    named in a question first (`confirm`), and a "no" changes nothing."""
    plan = rollback.plan(ctx, session, turn.target)
    confirmed = False
    if plan.cannot_undo and confirm is not None:
        if not confirm(plan.question() + "?"):
            raise UsageError("cancelled; nothing changed")
        confirmed = True
    return rollback.execute(ctx, plan, approve, confirmed=confirmed)


def _target(ctx: AppContext, session: SessionName) -> Checkpoint:
    try:
        return rollback.choose(ctx, session, None, latest=True)
    except UsageError as err:
        raise UsageError(
            f"cannot undo the last turn of {session.value}: {err.message}",
            hint="checkpoints are needed for /retry and /edit ([persistence] enabled)",
        ) from err
