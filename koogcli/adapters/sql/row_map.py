"""What this process knows of a session's message rows in the embedded database (SQLite),
so a turn over a long history neither serialises nor looks up again what is stored.

- The session's digest -> row id map, read inside a write transaction (which holds the
  whole database) and valid while the session's epoch (`row_epochs`) is unchanged. A
  store of a few messages (a windowed history, whose older restore points may still hold
  50,000 rows) looks up only their digests and keeps a partial map:
  whatever deletes rows raises it, and a map of another epoch is read again. Rows this
  process deletes itself are taken out of its map, which then moves to the new epoch.
- The messages last stored with their row ids: a checkpoint whose messages begin with the
  very same Message objects (the steps of a turn: the history, then what each step added)
  takes those ids as one list and looks up only what follows.
- Digests come from the session documents (adapters/digests.py).
What a transaction stored is applied only once it commits (`committed`): a rolled-back
row id must never be referred to.
"""

from __future__ import annotations

import json
import operator
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from koogcli.adapters import digests as message_digests
from koogcli.core.messages import Message

Insert = Callable[[list[str], list[int]], dict[str, int]]


@dataclass
class _Known:
    epoch: int
    ids: dict[str, int]
    last: tuple[tuple[Message, ...], list[int]] | None = None
    whole: bool = True  # `ids` has every row of the session (else those looked up)


# At most this many digests are looked up by name; more, and the session's whole map is read.
LOOKED_UP = 2000


@dataclass(frozen=True)
class _Stored:
    where: str
    epoch: int
    new: dict[str, int]
    messages: tuple[Message, ...]
    ids: list[int]


_KNOWN: dict[str, _Known] = {}
_OPEN = threading.local()  # the _Stored of this thread's open transaction


def store(
    cur: Any, where: str, session: str, messages: Sequence[Message], insert: Insert
) -> list[int]:
    """Row ids of `messages`; `insert(digests, indexes)` stores the rows of those messages
    and returns digest -> id."""
    epoch = _epoch(cur, session)
    known = _KNOWN.get(where)
    if known is not None and known.epoch != epoch:
        known = None
    prefix: list[int] = []
    start = 0
    if known is not None and known.last is not None:
        before, before_ids = known.last
        if len(before) <= len(messages) and all(map(operator.is_, before, messages)):
            prefix, start = before_ids, len(before)
    keys = message_digests.digests(messages[start:])
    if known is None and len(keys) > LOOKED_UP:
        cur.execute("SELECT digest, id FROM messages WHERE session = %s", [session])
        known = _KNOWN[where] = _Known(epoch, dict(cur.fetchall()))
    elif known is None:
        known = _KNOWN[where] = _Known(epoch, _looked_up(cur, session, keys), whole=False)
    elif not known.whole:
        unknown = [k for k in dict.fromkeys(keys) if k not in known.ids]
        if len(unknown) > LOOKED_UP:
            cur.execute("SELECT digest, id FROM messages WHERE session = %s", [session])
            known.ids, known.whole = dict(cur.fetchall()), True
        elif unknown:
            known.ids.update(_looked_up(cur, session, unknown))
    mapped = known.ids
    new: dict[str, int] = {}
    for index, key in enumerate(keys):
        if key not in mapped and key not in new:
            new[key] = start + index
    found = insert(list(new), list(new.values())) if new else {}
    ids = [*prefix, *(mapped.get(k) or found[k] for k in keys)]
    _OPEN.stored = _Stored(where, epoch, {k: found[k] for k in new}, tuple(messages), ids)
    return ids


def committed(where: str, ids: Sequence[int]) -> None:
    stored: _Stored | None = getattr(_OPEN, "stored", None)
    _OPEN.stored = None
    known = _KNOWN.get(where)
    if stored is None or stored.where != where or stored.ids is not ids:
        return
    if known is not None and known.epoch == stored.epoch:
        known.ids.update(stored.new)
        known.last = (stored.messages, stored.ids)


def deleted(cur: Any, where: str, session: str, ids: Sequence[int] | None) -> None:
    """Rows of the session were deleted in this transaction (`ids`, or unknown: None)."""
    before = _epoch(cur, session)
    cur.execute(
        "INSERT INTO row_epochs (session, epoch) VALUES (%s, 1) "
        "ON CONFLICT (session) DO UPDATE SET epoch = row_epochs.epoch + 1",
        [session],
    )
    known = _KNOWN.pop(where, None)
    if ids is None or known is None or known.epoch != before:
        return
    gone = set(ids)
    known.ids = {k: i for k, i in known.ids.items() if i not in gone}
    if known.last is not None and not gone.isdisjoint(known.last[1]):
        known.last = None
    known.epoch = before + 1  # a rollback leaves the epoch at `before`: the map is read again
    _KNOWN[where] = known


def forget(where: str) -> None:
    _KNOWN.pop(where, None)


def _looked_up(cur: Any, session: str, keys: Sequence[str]) -> dict[str, int]:
    """The rows of the session among `keys` (digests), by digest."""
    wanted = list(dict.fromkeys(keys))
    if not wanted:
        return {}
    cur.execute(
        "SELECT digest, id FROM messages WHERE session = %s AND digest IN "
        "(SELECT value FROM json_each(%s))",
        [session, json.dumps(wanted)],
    )
    return dict(cur.fetchall())


def _epoch(cur: Any, session: str) -> int:
    cur.execute("SELECT epoch FROM row_epochs WHERE session = %s", [session])
    row = cur.fetchone()
    return int(row[0]) if row else 0
