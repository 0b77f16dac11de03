"""The transcript and pending ingestion on PostgreSQL.

The transcript is an append-only table (one row per message with its turn id), never
rewritten; rows cannot be torn, so `unreadable` only names rows whose JSON is no message.
Pending ingestion keeps one row per session.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from koogcli.adapters.documents import dump_pending, parse_messages, parse_pending
from koogcli.adapters.postgres.database import Database
from koogcli.adapters.postgres.rows import body, mentioned
from koogcli.adapters.postgres.sessions import rename_everywhere
from koogcli.core.errors import CorruptDocumentError
from koogcli.core.messages import Message
from koogcli.core.names import SessionName


class PgTranscriptStore:
    def __init__(self, db: Database) -> None:
        self.db = db
        self._skipped: dict[str, list[int]] = {}

    def append(self, session: SessionName, messages: Sequence[Message], turn_id: str) -> None:
        if not messages:
            return
        with self.db.transaction() as cur:
            cur.executemany(
                "INSERT INTO transcript (session, turn_id, body) VALUES (%s, %s, %s)",
                [(session.value, turn_id, body(m)) for m in messages],
            )

    def read(self, session: SessionName) -> list[Message]:
        return [m for m, _turn in self.entries(session)]

    def entries(self, session: SessionName) -> list[tuple[Message, str]]:
        found = self.db.rows(
            "SELECT turn_id, body FROM transcript WHERE session = %s ORDER BY id", [session.value]
        )
        source = f"transcript of {session.value} in PostgreSQL {self.db.where}"
        kept: list[tuple[Message, str]] = []
        skipped: list[int] = []
        for number, (turn, text) in enumerate(found, start=1):
            try:
                kept += [(m, turn) for m in parse_messages([json.loads(text)], source)]
            except (ValueError, CorruptDocumentError):
                skipped.append(number)
        self._skipped[session.value] = skipped
        return kept

    def sessions(self) -> list[str]:
        return [r[0] for r in self.db.rows("SELECT DISTINCT session FROM transcript ORDER BY 1")]

    def used_ids(self, session: SessionName, candidates: Sequence[str]) -> set[str]:
        return mentioned(self.db, ["transcript"], session.value, candidates)

    def unreadable(self, session: SessionName) -> list[int]:
        return list(self._skipped.get(session.value, []))

    def exists(self, session: SessionName) -> bool:
        found = self.db.one("SELECT 1 FROM transcript WHERE session = %s LIMIT 1", [session.value])
        return found is not None

    def rename(self, old: SessionName, new: SessionName) -> None:
        rename_everywhere(self.db, old, new)

    def delete(self, session: SessionName) -> bool:
        with self.db.transaction() as cur:
            cur.execute("DELETE FROM transcript WHERE session = %s", [session.value])
            return cur.rowcount > 0


class PgPendingIngestion:
    def __init__(self, db: Database) -> None:
        self.db = db

    def load(self, session: SessionName) -> list[Message]:
        row = self.db.one("SELECT body FROM pending_ingestion WHERE session = %s", [session.value])
        if row is None:
            return []
        source = f"pending ingestion of {session.value} in PostgreSQL {self.db.where}"
        try:
            raw = json.loads(row[0])
        except ValueError:
            raw = None
        return parse_pending(raw, source)

    def save(self, session: SessionName, messages: Sequence[Message]) -> None:
        with self.db.transaction() as cur:
            cur.execute(
                "INSERT INTO pending_ingestion VALUES (%s, %s) "
                "ON CONFLICT (session) DO UPDATE SET body = excluded.body",
                [session.value, dump_pending(session.value, messages)],
            )

    def rename(self, old: SessionName, new: SessionName) -> None:
        rename_everywhere(self.db, old, new)

    def clear(self, session: SessionName) -> None:
        with self.db.transaction() as cur:
            cur.execute("DELETE FROM pending_ingestion WHERE session = %s", [session.value])
