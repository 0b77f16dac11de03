"""Message rows: each version of a message stored once per session, named by its digest.

A history (PostgreSQL) and every checkpoint of the session refer to rows by id, so storing
a turn or a checkpoint writes only the messages never stored before. What this process
knows is kept by database and session (one process may hold two databases, as `storage
copy` does), so a turn over a long history neither re-serialises nor re-sends what is
already there:
- PostgreSQL: the row ids of the Message objects it loaded or stored (kept alive beside
  their id()); a remembered row is checked to still exist before it is referred to, since
  another process may have pruned it.
- SQLite: see row_map.py (digests handed over by the session documents).
A digest is the sha256 of the message's JSON, cut to 32 hex digits (PostgreSQL) or 24
(SQLite, the width of the session documents' digests); a restore checks the prefix.
"""

from __future__ import annotations

import bisect
import hashlib
import json
from collections.abc import Iterable, Sequence
from typing import Any

from koogcli.adapters.codec.documents import parse_messages
from koogcli.adapters.sql import row_map
from koogcli.adapters.sql.dialect import checked_runs
from koogcli.core.errors import CorruptDocumentError
from koogcli.core.messages import Message

# id(message) -> (message, scope, row id)
_KNOWN: dict[int, tuple[Message, str, int]] = {}
_LIMIT = 500_000
# scope -> (revision, updated_at, row ids) of the history this process last read or wrote
# (PostgreSQL): while the session's row is still that version, those rows are referred to
# by it and cannot have been deleted, so only the other remembered rows need a look.
_HELD: dict[str, tuple[int, str, frozenset[int]]] = {}


def scope(db: Any, session: str) -> str:
    return f"{db.label}\0{db.schema}\0{session}"


def body(message: Message) -> str:
    return json.dumps(message.to_dict(), ensure_ascii=False)


def digest_of(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _intact(digest: str, text: str) -> bool:
    return len(digest) >= 24 and hashlib.sha256(text.encode()).hexdigest().startswith(digest)


def remember(db: Any, session: str, messages: Sequence[Message], ids: Sequence[int]) -> None:
    """Only after the transaction that stored them committed: a rolled-back row id must
    never be reused."""
    where = scope(db, session)
    if not db.dialect.postgres:
        row_map.committed(where, ids)
        return
    if len(_KNOWN) + len(messages) >= _LIMIT:
        _KNOWN.clear()
    for message, row in zip(messages, ids, strict=True):
        _KNOWN[id(message)] = (message, where, row)


def forget(db: Any, session: str) -> None:
    """After rows of the session were deleted: none of their ids may be reused."""
    where = scope(db, session)
    for key in [k for k, v in _KNOWN.items() if v[1] == where]:
        del _KNOWN[key]
    _HELD.pop(where, None)
    row_map.forget(where)


def hold(db: Any, session: str, revision: int, updated_at: str, items: Sequence[int]) -> None:
    """The history version this process read or committed, with its rows (see _HELD)."""
    _HELD[scope(db, session)] = (revision, updated_at, frozenset(items))


def guard(cur: Any, db: Any, session: str, exclusive: bool) -> None:
    """Writers that may refer to existing rows hold this shared; whatever deletes rows
    nothing refers to holds it exclusively, so it never deletes a row a transaction still
    open is about to refer to. Released at the end of the transaction."""
    db.dialect.lock(cur, f"{db.schema}:rows:{session}", exclusive)


def store(cur: Any, db: Any, session: str, messages: Sequence[Message]) -> list[int]:
    """Row ids of `messages` in order, inserting the rows the session does not have yet.
    The caller calls `remember` once its transaction has committed."""
    if not db.dialect.postgres:
        return row_map.store(
            cur,
            scope(db, session),
            session,
            messages,
            lambda digests, at: _insert(cur, db, session, digests, [body(messages[i]) for i in at]),
        )
    guard(cur, db, session, exclusive=False)
    where = scope(db, session)
    ids: list[int] = []
    todo: list[int] = []
    remembered: set[int] = set()
    for index, message in enumerate(messages):
        known = _KNOWN.get(id(message))
        if known is not None and known[0] is message and known[1] == where:
            ids.append(known[2])
            remembered.add(known[2])
        else:
            ids.append(0)
            todo.append(index)
    held = _HELD.get(where)
    if remembered and held is not None and db.dialect.postgres:
        cur.execute("SELECT revision, updated_at FROM sessions WHERE name = %s", [session])
        if cur.fetchone() == (held[0], held[1]):
            remembered -= held[2]
    if remembered:
        cur.execute(
            f"SELECT count(*) FROM messages WHERE session = %s AND id IN {db.dialect.each('int')}",
            [session, db.dialect.listed(sorted(remembered))],
        )
        found_rows = cur.fetchone()
        if found_rows is None or found_rows[0] != len(remembered):
            forget(db, session)
            return store(cur, db, session, messages)  # every row looked up or stored again
    if todo:
        bodies = [body(messages[i]) for i in todo]
        digests = [digest_of(b) for b in bodies]
        found = _insert(cur, db, session, digests, bodies)
        for index, digest in zip(todo, digests, strict=True):
            ids[index] = found[digest]
    return ids


def rows_deleted(cur: Any, db: Any, session: str, ids: Sequence[int] | None = None) -> None:
    """Rows of the session were deleted (`ids`, or any: None): no process may refer to
    them again."""
    if db.dialect.postgres:
        forget(db, session)
    else:
        row_map.deleted(cur, scope(db, session), session, ids)


def _insert(
    cur: Any, db: Any, session: str, digests: list[str], bodies: list[str]
) -> dict[str, int]:
    """digest -> row id, inserting the rows not there yet."""
    if db.dialect.postgres:
        cur.execute(
            "INSERT INTO messages (session, digest, body) SELECT %s, d, b FROM "
            "unnest(%s::text[], %s::text[]) AS new (d, b) ON CONFLICT (session, digest) DO NOTHING",
            [session, digests, bodies],
        )
    else:
        cur.executemany(
            "INSERT INTO messages (session, digest, body) VALUES (%s, %s, %s) "
            "ON CONFLICT (session, digest) DO NOTHING",
            [(session, d, b) for d, b in zip(digests, bodies, strict=True)],
        )
    cur.execute(
        f"SELECT digest, id FROM messages WHERE session = %s AND digest IN {db.dialect.each()}",
        [session, db.dialect.listed(sorted(set(digests)))],
    )
    return {str(d): int(i) for d, i in cur.fetchall()}


def load(
    db: Any, session: str, items: Sequence[int], source: str, verify: bool = False
) -> list[Message]:
    """The messages of `items`, in order; a missing row is a corrupt reference. With
    `verify` (a restore), a row whose body no longer has its digest is never restored as
    if it were the message."""
    if not items:
        return []
    found = db.rows(
        f"SELECT id, digest, body FROM messages WHERE id IN {db.dialect.each('int')}",
        [db.dialect.listed(sorted(set(items)))],
    )
    rows = {int(i): (str(d), str(b)) for i, d, b in found}
    missing = [i for i in items if i not in rows]
    if missing:
        raise CorruptDocumentError(
            f"{source} refers to {len(missing)} message rows that are gone",
            hint="`koog storage status` shows the database; nothing was changed",
        )
    changed = next((i for i in items if verify and not _intact(*rows[i])), None)
    if changed is not None:
        raise CorruptDocumentError(
            f"{source}: message row {changed} was changed after it was stored (its digest "
            f"no longer matches) in {db.label}",
            hint="koog will not restore a history it cannot verify; use another checkpoint",
        )
    try:
        raw = [json.loads(rows[i][1]) for i in items]
    except ValueError as exc:
        raise CorruptDocumentError(f"{source} holds a message that is not JSON: {exc}") from None
    messages = parse_messages(raw, source)
    if db.dialect.postgres:
        remember(db, session, messages, items)
    return messages


def mentioned(db: Any, tables: Sequence[str], session: str, candidates: Sequence[str]) -> set[str]:
    """Which of `candidates` a row `body` of the session in any of `tables` holds as a JSON
    string (a tool-call id, §5.15); may name more, never fewer."""
    if not candidates or not db.exists():
        return set()
    quoted = [json.dumps(c, ensure_ascii=False) for c in candidates]
    held = " OR ".join(
        f"EXISTS (SELECT 1 FROM {table} WHERE session = %s AND "
        f"{db.dialect.contains('body', 'q.value')})"
        for table in tables
    )
    found = db.rows(
        f"SELECT q.value FROM {db.dialect.each()} AS q WHERE {held}",
        [db.dialect.listed(quoted), *([session] * len(tables))],
    )
    return {json.loads(row[0]) for row in found}


def drop_unreferenced(cur: Any, db: Any, session: str, freed: Sequence[Any] | None = None) -> int:
    """Delete message rows of the session that neither its history (PostgreSQL) nor a
    checkpoint refers to; how many. `freed`: the stored `items` of the checkpoints just
    deleted (SQLite then looks only among their rows: nothing else can have lost its last
    reference); None looks at every row of the session."""
    guard(cur, db, session, exclusive=True)
    if db.dialect.postgres:
        cur.execute(
            """
            DELETE FROM messages WHERE id IN (
                SELECT m.id FROM messages m LEFT JOIN (
                    SELECT unnest(items) AS id FROM checkpoints WHERE session = %(s)s
                    UNION SELECT unnest(items) FROM sessions WHERE name = %(s)s) used
                ON used.id = m.id
                WHERE m.session = %(s)s AND used.id IS NULL)
            """,
            {"s": session},
        )
        removed = int(cur.rowcount)
        if removed:
            forget(db, session)
        return removed
    cur.execute("SELECT items FROM checkpoints WHERE session = %s", [session])
    kept = _merged(run for (items,) in cur.fetchall() for run in _runs(db, session, items))
    if freed is None:
        cur.execute("SELECT min(id), max(id) FROM messages WHERE session = %s", [session])
        low, high = cur.fetchone()
        wanted = [] if low is None else [[int(low), int(high)]]
    else:
        wanted = _merged(run for items in freed for run in _runs(db, session, items))
    unused = _outside(wanted, kept)
    if not unused:
        return 0
    cur.executemany(
        "DELETE FROM messages WHERE session = %s AND id BETWEEN %s AND %s",
        [(session, first, last) for first, last in unused],
    )
    removed = int(cur.rowcount)
    gone = None if freed is None else [i for first, last in unused for i in range(first, last + 1)]
    rows_deleted(cur, db, session, gone)
    return removed


def _runs(db: Any, session: str, items: str) -> list[tuple[int, int]]:
    try:
        return checked_runs(json.loads(items))
    except (ValueError, RecursionError) as exc:
        raise CorruptDocumentError(
            f"a checkpoint of {session} in {db.label} lists its messages unreadably ({exc}); "
            "nothing was deleted",
            hint="delete that checkpoint (`koog checkpoint list` marks it) and prune again",
        ) from None


def _merged(runs: Iterable[tuple[int, int]]) -> list[list[int]]:
    """Runs as sorted intervals that neither overlap nor touch."""
    out: list[list[int]] = []
    for first, last in sorted(runs):
        if out and first <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], last)
        else:
            out.append([first, last])
    return out


def _outside(wanted: list[list[int]], kept: list[list[int]]) -> list[tuple[int, int]]:
    """The parts of the intervals `wanted` that no interval of `kept` covers."""
    out: list[tuple[int, int]] = []
    starts = [first for first, _ in kept]
    for first, last in wanted:
        at = max(0, bisect.bisect_right(starts, first) - 1)
        while first <= last:
            if at < len(kept) and kept[at][1] < first:
                at += 1
                continue
            if at >= len(kept) or kept[at][0] > last:
                out.append((first, last))
                break
            if kept[at][0] > first:
                out.append((first, kept[at][0] - 1))
            first = kept[at][1] + 1
            at += 1
    return out
