"""PgHistoryStore: a session's history as a row of message-row ids (SPEC §4, §5.14).

Invariants, the same as the file store's:
- A store is one transaction: the new message rows and the session row land together.
- `write` with a loaded revision updates only `WHERE revision = loaded`; when another
  machine stored first nothing is written and ConflictError lets the turn re-apply itself.
- Listings read the session rows alone (count, revision, time, first user line).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from koogcli.adapters.documents import PREVIEW_CHARS
from koogcli.adapters.postgres import rows
from koogcli.adapters.postgres.database import Database
from koogcli.core.errors import ConflictError
from koogcli.core.messages import Message, utc_now
from koogcli.core.names import SessionName
from koogcli.core.ports import SessionInfo, StoredHistory

# Every table keyed by session name: a rename moves them all in one transaction.
SESSION_TABLES = (
    ("sessions", "name"),
    ("messages", "session"),
    ("transcript", "session"),
    ("checkpoints", "session"),
    ("compensations", "session"),
    ("pending_ingestion", "session"),
)


def rename_everywhere(db: Database, old: SessionName, new: SessionName) -> None:
    """Everything of `old` becomes `new` at once; a second call finds nothing to move."""
    with db.transaction() as cur:
        for table, column in SESSION_TABLES:
            cur.execute(
                f"UPDATE {table} SET {column} = %s WHERE {column} = %s", [new.value, old.value]
            )
        cur.execute(
            "UPDATE sessions SET revision = revision + 1, updated_at = %s WHERE name = %s",
            [utc_now(), new.value],
        )


def drop_everywhere(db: Database, session: SessionName) -> None:
    """Everything of the session gone at once (history, messages, transcript, checkpoints,
    journal, pending ingestion); a second call finds nothing."""
    with db.transaction() as cur:
        rows.guard(cur, session.value, exclusive=True)
        for table, column in SESSION_TABLES:
            cur.execute(f"DELETE FROM {table} WHERE {column} = %s", [session.value])
    rows.forget(session.value)


def drop_unreferenced(cur: Any, session: str, batch: int | None = None) -> int:
    """Delete message rows of the session that neither its history nor a checkpoint refers
    to (at most `batch` of them); how many."""
    rows.guard(cur, session, exclusive=True)
    cur.execute(
        """
        DELETE FROM messages WHERE id IN (
            SELECT m.id FROM messages m
            LEFT JOIN (
                SELECT unnest(items) AS id FROM sessions WHERE name = %(s)s
                UNION SELECT unnest(items) FROM checkpoints WHERE session = %(s)s
            ) used ON used.id = m.id
            WHERE m.session = %(s)s AND used.id IS NULL
            LIMIT %(batch)s)
        """,
        {"s": session, "batch": batch},
    )
    rows.forget(session)
    return int(cur.rowcount)


def _preview(messages: Sequence[Message]) -> str:
    """What `history list` shows of a session: its first user message."""
    return next((m.text for m in messages if m.role == "user"), "")[:PREVIEW_CHARS]


class PgHistoryStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def _source(self, session: SessionName) -> str:
        return f"session {session.value} in PostgreSQL {self.db.where}"

    def load(self, session: SessionName) -> list[Message]:
        return self.read(session).messages

    def store(self, session: SessionName, messages: Sequence[Message]) -> None:
        self.write(session, messages, expected_revision=None)

    def read(self, session: SessionName) -> StoredHistory:
        row = self.db.one(
            "SELECT revision, updated_at, items FROM sessions WHERE name = %s", [session.value]
        )
        if row is None:
            return StoredHistory([], 0)
        revision, updated_at, items = row
        with self.db.errors():
            messages = rows.load(self.db.conn, session.value, items, self._source(session))
        rows.hold(session.value, revision, updated_at, items)
        return StoredHistory(messages, int(revision), updated_at)

    def tail(self, session: SessionName, count: int) -> list[Message]:
        if count <= 0:
            return []
        row = self.db.one(
            "SELECT items[greatest(1, cardinality(items) - %s + 1):] FROM sessions WHERE name = %s",
            [count, session.value],
        )
        if row is None:
            return []
        with self.db.errors():
            return rows.load(self.db.conn, session.value, row[0], self._source(session))

    def write(
        self, session: SessionName, messages: Sequence[Message], expected_revision: int | None
    ) -> int:
        name = session.value
        first, at = _preview(messages), utc_now()
        with self.db.transaction() as cur:
            items = rows.store(cur, name, messages)
            values = {
                "name": name,
                "at": at,
                "items": items,
                "count": len(items),
                "preview": first,
                "expected": expected_revision,
            }
            if expected_revision is None:
                cur.execute(
                    "INSERT INTO sessions AS s VALUES "
                    "(%(name)s, 1, %(at)s, %(items)s, %(count)s, %(preview)s) "
                    "ON CONFLICT (name) DO UPDATE SET revision = s.revision + 1, "
                    "updated_at = excluded.updated_at, items = excluded.items, "
                    "message_count = excluded.message_count, preview = excluded.preview "
                    "RETURNING revision",
                    values,
                )
            elif expected_revision == 0:
                cur.execute(
                    "INSERT INTO sessions VALUES "
                    "(%(name)s, 1, %(at)s, %(items)s, %(count)s, %(preview)s) "
                    "ON CONFLICT (name) DO NOTHING RETURNING revision",
                    values,
                )
            else:
                cur.execute(
                    "UPDATE sessions SET revision = revision + 1, updated_at = %(at)s, "
                    "items = %(items)s, message_count = %(count)s, preview = %(preview)s "
                    "WHERE name = %(name)s AND revision = %(expected)s RETURNING revision",
                    values,
                )
            row = cur.fetchone()
            if row is None:
                raise ConflictError(f"session {name} changed since revision {expected_revision}")
        rows.remember(name, messages, items)
        rows.hold(name, row[0], at, items)
        return int(row[0])

    def put(
        self, session: SessionName, messages: Sequence[Message], revision: int, updated_at: str
    ) -> None:
        name = session.value
        first = _preview(messages)
        with self.db.transaction() as cur:
            items = rows.store(cur, name, messages)
            cur.execute(
                "INSERT INTO sessions VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (name) DO "
                "UPDATE SET revision = excluded.revision, updated_at = excluded.updated_at, "
                "items = excluded.items, message_count = excluded.message_count, "
                "preview = excluded.preview",
                [name, revision, updated_at, items, len(items), first],
            )
        rows.remember(name, messages, items)

    def exists(self, session: SessionName) -> bool:
        return self.db.one("SELECT 1 FROM sessions WHERE name = %s", [session.value]) is not None

    def names(self) -> list[str]:
        return [r[0] for r in self.db.rows("SELECT name FROM sessions ORDER BY name")]

    def sessions(self) -> list[SessionInfo]:
        found = self.db.rows(
            "SELECT name, message_count, revision, updated_at, preview FROM sessions ORDER BY name"
        )
        return [SessionInfo(n, c, int(r), at, preview=p) for n, c, r, at, p in found]

    def rename(self, old: SessionName, new: SessionName) -> None:
        rename_everywhere(self.db, old, new)

    def delete(self, session: SessionName) -> bool:
        with self.db.transaction() as cur:
            cur.execute("DELETE FROM sessions WHERE name = %s", [session.value])
            removed = cur.rowcount > 0
            drop_unreferenced(cur, session.value)
        return removed
