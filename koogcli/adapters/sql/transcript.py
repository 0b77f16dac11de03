"""The transcript and pending ingestion, on SQLite (the file backend) and PostgreSQL.

The transcript is an append-only table (one row per message with its turn id), never
rewritten; rows cannot be torn, so `unreadable` only names rows whose JSON is no message.
Pending ingestion keeps one row per session: the messages of stored turns whose ingestion
into long-term memory failed (SPEC §5.12), kept apart from the memory database, which may
be what failed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from koogcli.adapters.atomic import json_text
from koogcli.adapters.codec.documents import dump_pending, parse_messages, parse_pending
from koogcli.adapters.sql import rows
from koogcli.core.errors import CorruptDocumentError
from koogcli.core.messages import Message
from koogcli.core.names import SessionName
from koogcli.core.ports import FAILED_TURN, TranscriptHit


class SqlTranscriptStore:
    def __init__(self, db: Any) -> None:
        self.db = db
        self._skipped: dict[str, list[int]] = {}

    def append(self, session: SessionName, messages: Sequence[Message], turn_id: str) -> None:
        self.append_turns(session, [(turn_id, messages)])

    def append_turns(
        self, session: SessionName, turns: Sequence[tuple[str, Sequence[Message]]]
    ) -> None:
        """Several turns' messages in one transaction (an import)."""
        found = [
            (session.value, turn, json_text(m.to_dict()))
            for turn, messages in turns
            for m in messages
        ]
        if not found:
            return
        with self.db.transaction() as cur:
            cur.executemany(
                "INSERT INTO transcript (session, turn_id, body) VALUES (%s, %s, %s)", found
            )

    def holding(self, session: SessionName, ids: Sequence[str]) -> set[str]:
        """Which of these message ids the session's transcript holds."""
        if not ids or not self.db.exists():
            return set()
        field = "body::jsonb ->> 'id'" if self.db.dialect.postgres else "json_extract(body, '$.id')"
        found = self.db.rows(f"SELECT {field} FROM transcript WHERE session = %s", [session.value])
        wanted = set(ids)
        return {str(row[0]) for row in found if row[0] in wanted}

    def mark_failed(self, session: SessionName, turn_id: str) -> None:
        if not self.db.exists():
            return
        with self.db.transaction() as cur:
            cur.execute(
                "UPDATE transcript SET turn_id = %s WHERE session = %s AND turn_id = %s",
                (FAILED_TURN + turn_id, session.value, turn_id),
            )

    def read(self, session: SessionName) -> list[Message]:
        return [m for m, _turn in self.entries(session)]

    def entries(self, session: SessionName) -> list[tuple[Message, str]]:
        if not self.db.exists():
            return []
        found = self.db.rows(
            "SELECT turn_id, body FROM transcript WHERE session = %s ORDER BY id", [session.value]
        )
        source = f"transcript of {session.value} in {self.db.label}"
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
        if not self.db.exists():
            return []
        return [r[0] for r in self.db.rows("SELECT DISTINCT session FROM transcript ORDER BY 1")]

    def used_ids(self, session: SessionName, candidates: Sequence[str]) -> set[str]:
        return rows.mentioned(self.db, ["transcript"], session.value, candidates)

    def unreadable(self, session: SessionName) -> list[int]:
        return list(self._skipped.get(session.value, []))

    def exists(self, session: SessionName) -> bool:
        if not self.db.exists():
            return False
        found = self.db.one("SELECT 1 FROM transcript WHERE session = %s LIMIT 1", [session.value])
        return found is not None

    def search(
        self, words: str, session: SessionName | None, limit: int, source: str | None = None
    ) -> list[TranscriptHit]:
        """Full text: FTS5's `transcript_text` on SQLite, the `transcript_words` GIN index
        on PostgreSQL; every word must be there, as a word or the start of one (case
        aside). `source`: sessions imported from that tool only (`koog`: none imported)."""
        terms = words.split()
        if not terms or not self.db.exists():
            return []
        if self.db.dialect.postgres:
            # Each word a prefix (`zep` finds "zeppelin"), quoted as tsquery quotes.
            # The matching rows from the GIN index first: left to itself the planner,
            # which cannot estimate a prefix query, walks every row newest first and
            # computes its words (700 ms over 20,000 rows for a rare word; this, 8 ms).
            sql = (
                "WITH hits AS MATERIALIZED (SELECT id FROM transcript "
                "WHERE transcript_words(body) @@ to_tsquery('simple', %s)) "
                "SELECT t.id, t.session, t.turn_id, t.body FROM transcript t "
                "JOIN hits USING (id) WHERE true"
            )
            quoted = ("'" + term.replace("\\", "\\\\").replace("'", "''") + "':*" for term in terms)
            args: list[object] = [" & ".join(quoted)]
        else:
            sql = (
                "SELECT t.id, t.session, t.turn_id, t.body FROM transcript_text f "
                "JOIN transcript t ON t.id = f.rowid WHERE transcript_text MATCH %s"
            )
            args = [" ".join('"' + term.replace('"', '""') + '"*' for term in terms)]
        if session is not None:
            sql += " AND t.session = %s"
            args.append(session.value)
        if source == "koog":
            sql += " AND t.session NOT IN (SELECT session FROM archive_sessions)"
        elif source is not None:
            sql += " AND t.session IN (SELECT session FROM archive_sessions WHERE tool = %s)"
            args.append(source)
        # FTS5 walks its rowids (the transcript's ids) newest first and stops at the limit.
        sql += (
            " ORDER BY t.id DESC LIMIT %s"
            if self.db.dialect.postgres
            else (" ORDER BY f.rowid DESC LIMIT %s")
        )
        args.append(limit)
        hits: list[TranscriptHit] = []
        for position, name, turn, text in self.db.rows(sql, args):
            try:
                [message] = parse_messages([json.loads(text)], f"transcript in {self.db.label}")
            except (ValueError, CorruptDocumentError):
                continue  # a damaged row: `history show --transcript` names it
            hits.append(TranscriptHit(name, turn, int(position), message))
        return hits

    def turn_numbers(self, session: str, positions: Sequence[int]) -> list[int]:
        """One pass over the session's rows (the `transcript_turns` index alone): where
        each turn that did not fail began, then each position's turn by bisection."""
        if not positions:
            return []
        import bisect

        starts = sorted(
            int(r[0])
            for r in self.db.rows(
                "SELECT min(id) FROM transcript WHERE session = %s AND id <= %s "
                "AND substr(turn_id, 1, %s) <> %s GROUP BY turn_id",
                [session, max(positions), len(FAILED_TURN), FAILED_TURN],
            )
        )
        return [bisect.bisect_right(starts, p) for p in positions]


class SqlPendingIngestion:
    def __init__(self, db: Any) -> None:
        self.db = db

    def load(self, session: SessionName) -> list[Message]:
        if not self.db.exists():
            return []
        row = self.db.one("SELECT body FROM pending_ingestion WHERE session = %s", [session.value])
        if row is None:
            return []
        source = f"pending ingestion of {session.value} in {self.db.label}"
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

    def clear(self, session: SessionName) -> None:
        with self.db.transaction() as cur:
            cur.execute("DELETE FROM pending_ingestion WHERE session = %s", [session.value])
