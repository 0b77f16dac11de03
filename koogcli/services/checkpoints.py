"""Restore points and checkpoints: taking, listing, finding, deleting (rollback is in
services/rollback.py)."""

from __future__ import annotations

from collections.abc import Sequence

from koogcli.core import checkpoints as core
from koogcli.core.checkpoints import Checkpoint
from koogcli.core.errors import UsageError
from koogcli.core.messages import Message, local_time, utc_now
from koogcli.core.names import SessionName
from koogcli.services import agent_files
from koogcli.services.context import AppContext
from koogcli.services.turn_numbers import Numbered, span


def require_enabled(ctx: AppContext) -> None:
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
        # And how much of an agent's file journal it follows (services/agent_files.py).
        details={
            "history_revision": revision,
            agent_files.POSITION: ctx.agent_files.position(agent_files.journal_of(session)),
        },
    )
    return ctx.checkpoints.save(checkpoint)


def create(ctx: AppContext, session: SessionName, label: str | None) -> Checkpoint:
    require_enabled(ctx)
    ctx.require_session(session)
    saved = restore_point(ctx, session, "manual", label=label, manual=True)
    assert saved is not None
    return saved


def list_(ctx: AppContext, session: SessionName, include_steps: bool = False) -> list[Checkpoint]:
    """Newest first; restore points only unless `include_steps`."""
    listed = ctx.checkpoints.headers(session)
    if not listed:
        ctx.require_session(session)  # a deleted session's checkpoints are still listed
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


def describe(
    target: Checkpoint, current: Sequence[Message], numbers: Numbered | None = None
) -> str:
    """The change that restoring `target` (with its messages) undoes, for people; turns
    numbered as the transcript numbers them (services/turn_numbers.py), as `why` does."""
    when = local_time(target.created_at)
    if target.manual:
        return f"the changes since checkpoint {target.label or target.id} ({when})"
    if target.reason == "turn":
        kept = {m.id for m in target.messages}
        removed = [m.id for m in current if m.id not in kept]
        known = numbers.of_message if numbers is not None else {}
        turns = span(known[i] for i in removed if i in known)
        if turns is None:  # no transcript (an imported history): count its user messages
            first = sum(1 for m in target.messages if m.role == "user") + 1
            last = sum(1 for m in current if m.role == "user")
            turns = f"turns {first}-{last}" if last > first else f"turn {first}"
        return f"{turns} (from {when})"
    if target.reason == "rollback":
        return f"the rollback of {when}"
    names = {"compress": "compression", "clear": "clear", "import": "import"}
    return f"the {names.get(target.reason, target.reason)} of {when}"
