"""Checkpoints (KOOG_SEMANTICS §3): restore points, step checkpoints and tombstones.

- A restore point is the session's stored history before a change a user may undo (a
  turn, compress, clear, import, rollback) or on demand (`checkpoint create`, manual).
- A step checkpoint records a turn after one of its steps: the messages so far, the step
  reached and its output. Resume continues after the latest one unless a tombstone for
  that turn follows it (the turn completed, was cancelled or abandoned).
- `seq` is a per-session sequence number (Koog's `version`); "latest" is the highest seq.
- `format_version` is the document schema; unknown versions are listed but never used.
- Rollback compensation (§5.6): only when the checkpoint's messages are an element-wise
  prefix of the current history are the tool calls made after it undone, newest first
  (Koog's rule: rollback works backwards in time); every call a rollback removes is
  reported, undone or not.
- A turn is interrupted only when the process that ran it is gone (§5.10): step
  checkpoints name their owner, and a live owner's turn is never offered for resume.
- Every compensation a rollback plans is journalled (§5.11): a history holding a call whose
  effect was undone is never restored silently.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from koogcli.core.messages import Message, ToolCall

CHECKPOINT_FORMAT_VERSION = 1
Kind = Literal["restore", "step", "tombstone"]


def new_checkpoint_id() -> str:
    return os.urandom(4).hex()


@dataclass(frozen=True, slots=True)
class Checkpoint:
    id: str
    session: str
    seq: int
    kind: Kind
    created_at: str
    messages: tuple[Message, ...] = ()
    reason: str = ""
    label: str | None = None
    manual: bool = False
    turn_id: str | None = None
    step: str | None = None
    output: str | None = None
    details: dict[str, object] = field(default_factory=dict)
    format_version: int = CHECKPOINT_FORMAT_VERSION
    message_count: int = 0

    @property
    def readable(self) -> bool:
        return self.format_version == CHECKPOINT_FORMAT_VERSION


def latest(checkpoints: Sequence[Checkpoint]) -> Checkpoint | None:
    """Highest seq wins; created_at breaks ties (Koog's recommended port rule)."""
    return max(checkpoints, key=lambda c: (c.seq, c.created_at), default=None)


def interrupted_turn(
    checkpoints: Sequence[Checkpoint], alive: Callable[[Checkpoint], bool] = lambda c: False
) -> Checkpoint | None:
    """The latest step checkpoint of a turn whose process is gone, unless that turn was
    closed (tombstoned) or a later turn was. Steps of live turns are passed over."""
    marks = [c for c in checkpoints if c.kind == "tombstone" or (c.kind == "step" and not alive(c))]
    closed = {c.turn_id for c in marks if c.kind == "tombstone"}
    last = latest(marks)
    if last is None or last.kind != "step" or last.turn_id in closed:
        return None
    return last


# pending: journalled before the history changed, not yet run; running: its process started
# (its receipt settles it; without one it is in doubt and run again: services/rollback.py);
# cancelled: the rollback never restored the history.
Status = Literal["pending", "running", "done", "failed", "refused", "cancelled"]
STATUSES: tuple[str, ...] = ("pending", "running", "done", "failed", "refused", "cancelled")
# Compensations whose effect may have happened: the world no longer holds the call's effect.
UNDONE: frozenset[str] = frozenset({"running", "done"})


@dataclass(frozen=True, slots=True)
class CompensationEntry:
    """One planned compensation of a rollback and how far it got."""

    call: ToolCall
    status: Status
    rollback_point: str | None  # the restore point the rollback took of the state before it
    at: str

    def to_dict(self) -> dict[str, object]:
        return {
            "call": self.call.to_dict(),
            "status": self.status,
            "rollback_point": self.rollback_point,
            "at": self.at,
        }


def undone_calls(
    messages: Sequence[Message], journal: Sequence[CompensationEntry]
) -> list[ToolCall]:
    """The tool calls in `messages` whose effects a rollback has (or may have) undone."""
    undone = {e.call.id for e in journal if e.status in UNDONE and e.call.id}
    return [c for m in messages for c in m.tool_calls if c.id in undone]


def restore_points_newest_first(checkpoints: Sequence[Checkpoint]) -> list[Checkpoint]:
    found = [c for c in checkpoints if c.kind == "restore" and c.readable]
    return sorted(found, key=lambda c: (c.seq, c.created_at), reverse=True)


def is_prefix(prefix: Sequence[Message], messages: Sequence[Message]) -> bool:
    return len(prefix) <= len(messages) and all(
        a == b for a, b in zip(prefix, messages, strict=False)
    )


def removed_calls(
    checkpoint: Sequence[Message], current: Sequence[Message]
) -> list[tuple[ToolCall, Message]]:
    """The tool calls restoring `checkpoint` takes out of `current` (each with the message
    holding it), newest first. Ids are unique within a session (§5.15), so a call is the
    same call wherever its id is."""
    kept = {c.id for m in checkpoint for c in m.tool_calls}
    gone = [(c, m) for m in current for c in m.tool_calls if c.id not in kept]
    return list(reversed(gone))


def resolve_id(checkpoints: Sequence[Checkpoint], wanted: str) -> list[Checkpoint]:
    """Exact id, else the label, else every checkpoint whose id starts with `wanted`."""
    exact = [c for c in checkpoints if c.id == wanted]
    labelled = [c for c in checkpoints if c.label == wanted]
    return exact or labelled or [c for c in checkpoints if c.id.startswith(wanted)]


def arguments_text(arguments: str) -> str:
    """A call's arguments for people: `{"name": "bob"}` reads as `bob`."""
    import json

    try:
        parsed = json.loads(arguments or "{}")
    except (ValueError, RecursionError):  # a client's text: too deep stays text
        return arguments
    if isinstance(parsed, dict):
        values = [v if isinstance(v, str) else json.dumps(v) for v in parsed.values()]
        return ", ".join(values)
    return arguments


def undone_note(calls: Sequence[ToolCall]) -> Message:
    """The note a forced restore adds: the history must not claim effects that are gone."""
    listed = "; ".join(f"{c.name}({arguments_text(c.arguments)})" for c in calls)
    return Message(
        role="user",
        content=(
            "Note from koog: the history was rolled back to a point before a rollback that "
            f"undid these tool calls, so their effects no longer exist: {listed}."
        ),
        meta={"kind": "note", "undone_calls": [c.id for c in calls]},
    )
