"""PgHistoryStore: a session's history as a row of message-row ids (SPEC §4, §5.14).

Invariants, the same as the file store's:
- A store is one transaction: the new message rows and the session row land together.
- `write` with a loaded revision updates only `WHERE revision = loaded`; when another
  machine stored first nothing is written and ConflictError lets the turn re-apply itself.
- Listings read the session rows alone (count, revision, time, first user line).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from koogcli.adapters.codec.documents import PREVIEW_CHARS
from koogcli.adapters.postgres.database import Database
from koogcli.adapters.sql import rows
from koogcli.core.errors import ConflictError
from koogcli.core.injected import first_prompt
from koogcli.core.messages import Message, utc_now
from koogcli.core.names import SessionName
from koogcli.core.ports import CutCheck, SessionInfo, StoredHistory


def _preview(messages: Sequence[Message]) -> str:
    """What `history list` shows of a session: the person's first prompt."""
    return first_prompt(messages)[:PREVIEW_CHARS]


class PgHistoryStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def _source(self, session: SessionName) -> str:
        return f"session {session.value} in PostgreSQL {self.db.where}"

    def read(self, session: SessionName) -> StoredHistory:
        row = self.db.one(
            "SELECT revision, updated_at, items FROM sessions WHERE name = %s", [session.value]
        )
        if row is None:
            return StoredHistory([], 0)
        revision, updated_at, items = row
        with self.db.errors():
            messages = rows.load(self.db, session.value, items, self._source(session))
        rows.hold(self.db, session.value, revision, updated_at, items)
        return StoredHistory(messages, int(revision), updated_at)

    def splice(self, source: SessionName, target: SessionName, count: int, check: CutCheck) -> bool:
        """A fork's message rows are its own (they go with it): written the ordinary way."""
        return False

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
            return rows.load(self.db, session.value, row[0], self._source(session))

    def write(
        self, session: SessionName, messages: Sequence[Message], expected_revision: int | None
    ) -> int:
        name = session.value
        first, at = _preview(messages), utc_now()
        with self.db.transaction() as cur:
            items = rows.store(cur, self.db, name, messages)
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
        rows.remember(self.db, name, messages, items)
        rows.hold(self.db, name, row[0], at, items)
        return int(row[0])

    def put(
        self, session: SessionName, messages: Sequence[Message], revision: int, updated_at: str
    ) -> None:
        name = session.value
        first = _preview(messages)
        with self.db.transaction() as cur:
            items = rows.store(cur, self.db, name, messages)
            cur.execute(
                "INSERT INTO sessions VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (name) DO "
                "UPDATE SET revision = excluded.revision, updated_at = excluded.updated_at, "
                "items = excluded.items, message_count = excluded.message_count, "
                "preview = excluded.preview",
                [name, revision, updated_at, items, len(items), first],
            )
        rows.remember(self.db, name, messages, items)

    def exists(self, session: SessionName) -> bool:
        return self.db.one("SELECT 1 FROM sessions WHERE name = %s", [session.value]) is not None

    def names(self) -> list[str]:
        return [r[0] for r in self.db.rows("SELECT name FROM sessions ORDER BY name")]

    def sessions(self) -> list[SessionInfo]:
        found = self.db.rows(
            "SELECT name, message_count, revision, updated_at, preview FROM sessions ORDER BY name"
        )
        return [SessionInfo(n, c, int(r), at, preview=p) for n, c, r, at, p in found]

    def renamed(self, new: SessionName) -> Callable[[Any], None]:
        """A renamed session is a new revision (a turn that loaded the old name's history
        stores it under the old name again, never over the renamed one)."""

        def bump(cur: Any) -> None:
            cur.execute(
                "UPDATE sessions SET revision = revision + 1, updated_at = %s WHERE name = %s",
                [utc_now(), new.value],
            )

        return bump

    def delete(self, session: SessionName) -> bool:
        with self.db.transaction() as cur:
            cur.execute("DELETE FROM sessions WHERE name = %s", [session.value])
            removed = cur.rowcount > 0
            rows.drop_unreferenced(cur, self.db, session.value)
        return removed
