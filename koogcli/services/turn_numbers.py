"""Turn numbers, one way everywhere (SPEC §5.19): turn N of a session is the N-th turn
that wrote to its transcript and did not fail, the numbering of `history search`. Rollback, `why` and
search all count so, whatever rollbacks and compressions did to the history since."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from koogcli.core.messages import Message
from koogcli.core.names import SessionName
from koogcli.core.ports import FAILED_TURN
from koogcli.services.context import AppContext


@dataclass(frozen=True, slots=True)
class Numbered:
    of_message: dict[str, int]  # message id -> the number of the turn that wrote it
    turns: int  # how many turns wrote to the transcript


def numbered(entries: Iterable[tuple[Message, str]]) -> Numbered:
    """A failed turn's messages have no number (its rows' turn ids are marked failed)."""
    turns: dict[str, int] = {}
    of_message: dict[str, int] = {}
    for message, turn_id in entries:
        if not turn_id.startswith(FAILED_TURN):
            of_message.setdefault(message.id, turns.setdefault(turn_id, len(turns) + 1))
    return Numbered(of_message, len(turns))


def of_session(ctx: AppContext, session: SessionName) -> Numbered:
    if not ctx.transcript.exists(session):
        return Numbered({}, 0)
    return numbered(ctx.transcript.entries(session))


def span(numbers: Iterable[int]) -> str | None:
    """`turn 4`, `turns 4-6`; None for no turns."""
    found = sorted(set(numbers))
    if not found:
        return None
    first, last = found[0], found[-1]
    return f"turns {first}-{last}" if last > first else f"turn {first}"
