"""Message rows: each version of a message stored once per session, named by its digest.

A history and every checkpoint of the session refer to rows by id, so storing a turn or a
checkpoint writes only the messages never stored before. The ids of messages this process
loaded or stored are remembered (keyed by the Message object, kept alive beside its id),
so a turn over a long history neither re-serialises nor re-sends what is already there.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from koogcli.adapters.documents import parse_messages
from koogcli.core.errors import CorruptDocumentError
from koogcli.core.messages import Message

if TYPE_CHECKING:
    import psycopg

# id(message) -> (message, session, row id)
_KNOWN: dict[int, tuple[Message, str, int]] = {}
_LIMIT = 500_000
# session -> (revision, updated_at, row ids) of the history this process last read or
# wrote: while the session's row is still that version, those rows are referred to by it
# and cannot have been deleted, so only the other remembered rows need looking at.
_HELD: dict[str, tuple[int, str, frozenset[int]]] = {}

_INSERT = """
WITH new (digest, body) AS (SELECT * FROM unnest(%(digests)s::text[], %(bodies)s::text[])),
added AS (
    INSERT INTO messages (session, digest, body)
    SELECT %(session)s, digest, body FROM new
    ON CONFLICT (session, digest) DO NOTHING
    RETURNING digest, id
)
SELECT digest, id FROM added
UNION ALL
SELECT m.digest, m.id FROM messages m JOIN new USING (digest) WHERE m.session = %(session)s
"""


def body(message: Message) -> str:
    return json.dumps(message.to_dict(), ensure_ascii=False)


def remember(session: str, messages: Sequence[Message], ids: Sequence[int]) -> None:
    """Only after the transaction that stored them committed: a rolled-back row id must
    never be reused."""
    if len(_KNOWN) + len(messages) >= _LIMIT:
        _KNOWN.clear()
    for message, row in zip(messages, ids, strict=True):
        _KNOWN[id(message)] = (message, session, row)


def forget(session: str) -> None:
    """After rows of the session were deleted: none of their ids may be reused."""
    for key in [k for k, v in _KNOWN.items() if v[1] == session]:
        del _KNOWN[key]
    _HELD.pop(session, None)


def hold(session: str, revision: int, updated_at: str, items: Sequence[int]) -> None:
    """The history version this process read or committed, with its rows (see _HELD)."""
    _HELD[session] = (revision, updated_at, frozenset(items))


def guard(cur: psycopg.Cursor[Any], session: str, exclusive: bool) -> None:
    """Writers that may refer to existing rows hold this shared; whatever deletes rows
    nothing refers to holds it exclusively, so it never deletes a row a transaction still
    open is about to refer to. Released at the end of the transaction."""
    function = "pg_advisory_xact_lock" if exclusive else "pg_advisory_xact_lock_shared"
    cur.execute(
        f"SELECT {function}(hashtextextended(current_schema() || ':rows:' || %s, 0))",
        [session],
    )


def store(cur: psycopg.Cursor[Any], session: str, messages: Sequence[Message]) -> list[int]:
    """Row ids of `messages` in order, inserting the rows the session does not have yet.
    The caller calls `remember` once its transaction has committed.

    Remembered ids are checked first: another process may have deleted a row since (its
    prune found nothing referring to it then, say a step checkpoint pruned while this turn
    waited to store). Under the shared guard none can go until this transaction ends. Rows
    of the history version this process holds need no look while the session is still at
    that version: a turn checks only the rows of its new messages."""
    guard(cur, session, exclusive=False)
    ids: list[int] = []
    todo: list[int] = []
    remembered: set[int] = set()
    for index, message in enumerate(messages):
        known = _KNOWN.get(id(message))
        if known is not None and known[0] is message and known[1] == session:
            ids.append(known[2])
            remembered.add(known[2])
        else:
            ids.append(0)
            todo.append(index)
    held = _HELD.get(session)
    if remembered and held is not None:
        cur.execute("SELECT revision, updated_at FROM sessions WHERE name = %s", [session])
        if cur.fetchone() == (held[0], held[1]):
            remembered -= held[2]
    if remembered:
        cur.execute(
            "SELECT count(*) FROM messages m JOIN unnest(%s::bigint[]) r (id) USING (id) "
            "WHERE m.session = %s",
            [list(remembered), session],
        )
        found_rows = cur.fetchone()
        if found_rows is None or found_rows[0] != len(remembered):
            forget(session)
            return store(cur, session, messages)  # every row looked up or stored again
    if todo:
        bodies = [body(messages[i]) for i in todo]
        digests = [hashlib.sha256(b.encode()).hexdigest()[:32] for b in bodies]
        cur.execute(_INSERT, {"digests": digests, "bodies": bodies, "session": session})
        found = dict(cur.fetchall())
        late = [d for d in digests if d not in found]
        if late:  # committed by another process after this statement's snapshot
            cur.execute(
                "SELECT digest, id FROM messages WHERE session = %s AND digest = ANY(%s)",
                [session, late],
            )
            found.update(cur.fetchall())
        for index, digest in zip(todo, digests, strict=True):
            ids[index] = found[digest]
    return ids


def load(
    conn: psycopg.Connection[Any], session: str, items: Sequence[int], source: str
) -> list[Message]:
    """The messages of `items`, in order; a missing row is a corrupt reference."""
    if not items:
        return []
    rows = dict(conn.execute("SELECT id, body FROM messages WHERE id = ANY(%s)", [list(items)]))
    missing = [i for i in items if i not in rows]
    if missing:
        raise CorruptDocumentError(
            f"{source} refers to {len(missing)} message rows that are gone",
            hint="`koog storage status` shows the database; nothing was changed",
        )
    try:
        raw = [json.loads(rows[i]) for i in items]
    except ValueError as exc:
        raise CorruptDocumentError(f"{source} holds a message that is not JSON: {exc}") from None
    messages = parse_messages(raw, source)
    remember(session, messages, items)
    return messages


def mentioned(db: Any, tables: Sequence[str], session: str, candidates: Sequence[str]) -> set[str]:
    """Which of `candidates` a row `body` of the session in any of `tables` holds as a JSON
    string (a tool-call id, §5.15); may name more, never fewer."""
    if not candidates:
        return set()
    quoted = [json.dumps(c, ensure_ascii=False) for c in candidates]
    held = " OR ".join(
        f"EXISTS (SELECT 1 FROM {table} WHERE session = %s AND strpos(body, q) > 0)"
        for table in tables
    )
    found = db.rows(
        f"SELECT q FROM unnest(%s::text[]) AS q WHERE {held}",
        [quoted, *([session] * len(tables))],
    )
    return {json.loads(row[0]) for row in found}
