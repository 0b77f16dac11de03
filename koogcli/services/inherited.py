"""What a fork inherits besides its history: its source's transcript up to the cut.

The transcript is the session's full record, kept across compression, rollback and clear;
a fork's record begins with what its source had said up to the fork (compressed or rolled
back parts included), copied once when the fork is made, so clearing or compressing the
fork, or deleting its source later, never empties it. The copies keep their turns (turn
numbers count them, as the fork's history holds them) under a marked turn id, so the
tokens the source's requests used are not counted again as the fork's.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import groupby

from koogcli.core.messages import Message
from koogcli.core.names import SessionName
from koogcli.services.context import AppContext

MARK = "inherited:"


def is_inherited(turn_id: str) -> bool:
    return turn_id.startswith(MARK)


def copy_transcript(
    ctx: AppContext,
    source: SessionName,
    fork: SessionName,
    kept: Sequence[Message],
    following: Message | None,
    whole: bool,
) -> int:
    """Append to the fork's transcript the source's rows before the cut: all of them when
    the fork took the whole history (`whole`); else those before the first message left
    out (`following`), or, when the transcript does not hold it, those up to the last
    message kept that it holds. `kept` may be only the messages just before the cut."""
    entries = ctx.transcript.entries(source) if ctx.transcript.exists(source) else []
    if not whole:
        rows: dict[str, int] = {}
        for row, (message, _turn) in enumerate(entries):
            rows.setdefault(message.id, row)
        if following is not None and following.id in rows:
            cut = rows[following.id]
        else:
            cut = next((rows[m.id] + 1 for m in reversed(kept) if m.id in rows), 0)
        entries = entries[:cut]
    for turn, group in groupby(entries, key=lambda entry: entry[1]):
        marked = turn if is_inherited(turn) else MARK + turn
        ctx.transcript.append(fork, [m for m, _turn in group], marked)
    return len(entries)
