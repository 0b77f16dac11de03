"""Checkpoints (KOOG_SEMANTICS §3): restore points, step checkpoints and tombstones.

- A restore point is the session's stored history before a change a user may undo (a
  turn, compress, clear, import, rollback) or on demand (`checkpoint create`, manual).
- A step checkpoint records a turn after one of its steps: the messages so far, the step
  reached and its output. Resume continues after the latest one unless a tombstone for
  that turn follows it (the turn completed, was cancelled or abandoned).
- `seq` is a per-session sequence number (Koog's `version`); "latest" is the highest seq.
- `format_version` is the document schema; unknown versions are listed but never used.
- Rollback compensation (§5.6): only when the checkpoint's messages are an element-wise
  prefix of the current history, the tool calls made after it are undone newest first.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
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


def interrupted_turn(checkpoints: Sequence[Checkpoint]) -> Checkpoint | None:
    """The latest step checkpoint, if no tombstone for its turn came after it."""
    turn_marks = [c for c in checkpoints if c.kind in ("step", "tombstone")]
    last = latest(turn_marks)
    return last if last is not None and last.kind == "step" else None


def latest_restore_point(checkpoints: Sequence[Checkpoint]) -> Checkpoint | None:
    return latest([c for c in checkpoints if c.kind == "restore"])


def is_prefix(prefix: Sequence[Message], messages: Sequence[Message]) -> bool:
    return len(prefix) <= len(messages) and all(
        a == b for a, b in zip(prefix, messages, strict=False)
    )


def compensation_plan(checkpoint: Sequence[Message], current: Sequence[Message]) -> list[ToolCall]:
    """Tool calls made after the checkpoint, newest first; none unless it is a prefix."""
    if not is_prefix(checkpoint, current):
        return []
    calls = [call for m in current[len(checkpoint) :] for call in m.tool_calls]
    return list(reversed(calls))


def resolve_id(checkpoints: Sequence[Checkpoint], wanted: str) -> list[Checkpoint]:
    """Exact id, else the label, else every checkpoint whose id starts with `wanted`."""
    exact = [c for c in checkpoints if c.id == wanted]
    labelled = [c for c in checkpoints if c.label == wanted]
    return exact or labelled or [c for c in checkpoints if c.id.startswith(wanted)]
