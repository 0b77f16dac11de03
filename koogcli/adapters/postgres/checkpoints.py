"""PgCheckpointStore: checkpoints as rows referring to the session's message rows.

- A checkpoint's messages are `items`, ids of message rows (adapters/postgres/rows.py):
  storing one writes its header plus the messages never stored before.
- `seq` comes from the highest stored one under a per-session advisory lock held by the
  saving transaction, so two machines never take the same number.
- A row of another format version is listed (the user sees it) but `get` refuses it.
- The compensation journal is a table keyed by (session, call id, rollback point); each
  mark is committed before the call it announces, so a killed rollback runs nothing twice.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from koogcli.adapters.compensation_journal import dump_entry, parse_entry
from koogcli.adapters.postgres import rows
from koogcli.adapters.postgres.database import Database
from koogcli.adapters.postgres.sessions import drop_unreferenced, rename_everywhere
from koogcli.core.checkpoints import CHECKPOINT_FORMAT_VERSION, Checkpoint, CompensationEntry
from koogcli.core.errors import CorruptDocumentError, StorageError, UnknownFormatError
from koogcli.core.names import SessionName

_COLUMNS = "seq, id, kind, manual, created_at, format_version, header, cardinality(items)"


class PgCheckpointStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def save(self, checkpoint: Checkpoint) -> Checkpoint:
        seq, count = self._insert(checkpoint, keep_seq=False)
        if seq is None:
            raise StorageError(f"checkpoint id {checkpoint.id} is taken in {checkpoint.session}")
        return replace(checkpoint, seq=seq, message_count=count)

    def put(self, checkpoint: Checkpoint) -> None:
        self._insert(checkpoint, keep_seq=True)

    def _insert(self, checkpoint: Checkpoint, keep_seq: bool) -> tuple[int | None, int]:
        """The next seq under the session's advisory lock, or the checkpoint's own (then
        nothing when its id is stored already); returns the seq stored."""
        name = checkpoint.session
        header = {
            "reason": checkpoint.reason,
            "label": checkpoint.label,
            "turn_id": checkpoint.turn_id,
            "step": checkpoint.step,
            "output": checkpoint.output,
            "details": checkpoint.details,
        }
        seq = (
            "%(seq)s"
            if keep_seq
            else "coalesce((SELECT max(seq) FROM checkpoints WHERE session = %(s)s), -1) + 1"
        )
        with self.db.transaction() as cur:
            cur.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                [f"koog:{self.db.schema}:checkpoints:{name}"],
            )
            items = rows.store(cur, name, checkpoint.messages)
            cur.execute(
                "INSERT INTO checkpoints (session, seq, id, kind, manual, created_at, "
                f"format_version, header, items) SELECT %(s)s, {seq}, "
                "%(id)s, %(kind)s, %(manual)s, %(at)s, %(v)s, %(header)s, %(items)s "
                "ON CONFLICT DO NOTHING RETURNING seq",
                {
                    "s": name,
                    "seq": checkpoint.seq,
                    "id": checkpoint.id,
                    "kind": checkpoint.kind,
                    "manual": checkpoint.manual,
                    "at": checkpoint.created_at,
                    "v": CHECKPOINT_FORMAT_VERSION,
                    "header": json.dumps(header, ensure_ascii=False),
                    "items": items,
                },
            )
            row = cur.fetchone()
        rows.remember(name, checkpoint.messages, items)
        return (int(row[0]) if row else None), len(items)

    def headers(self, session: SessionName) -> list[Checkpoint]:
        found = self.db.rows(
            f"SELECT {_COLUMNS} FROM checkpoints WHERE session = %s ORDER BY seq", [session.value]
        )
        return [_header(session.value, row) for row in found]

    def get(self, session: SessionName, checkpoint_id: str) -> Checkpoint:
        row = self.db.one(
            f"SELECT {_COLUMNS}, items FROM checkpoints WHERE session = %s AND id = %s",
            [session.value, checkpoint_id],
        )
        source = f"checkpoint {checkpoint_id} of {session.value} in PostgreSQL {self.db.where}"
        if row is None:
            raise StorageError(f"no checkpoint {checkpoint_id} in session {session.value}")
        checkpoint = _header(session.value, row[:-1])
        if checkpoint.format_version != CHECKPOINT_FORMAT_VERSION:
            raise UnknownFormatError(
                f"{source} has format version {checkpoint.format_version}; "
                f"this koog reads version {CHECKPOINT_FORMAT_VERSION}",
                hint="use a newer koog; it is listed but never used or rewritten",
            )
        with self.db.errors():
            messages = rows.load(self.db.conn, session.value, row[-1], source)
        return replace(checkpoint, messages=tuple(messages))

    def delete(self, session: SessionName, checkpoint_id: str) -> bool:
        with self.db.transaction() as cur:
            cur.execute(
                "DELETE FROM checkpoints WHERE session = %s AND id = %s",
                [session.value, checkpoint_id],
            )
            return cur.rowcount > 0

    def sessions(self) -> list[str]:
        return [r[0] for r in self.db.rows("SELECT DISTINCT session FROM checkpoints ORDER BY 1")]

    def prune(self, session: SessionName, keep_last: int) -> int:
        """Keep the newest `keep_last` turn checkpoints (steps and tombstones) and the newest
        `keep_last` automatic restore points; manual ones always stay. Message rows nothing
        refers to any more go with them."""
        with self.db.transaction() as cur:
            cur.execute(
                """
                DELETE FROM checkpoints c USING (
                    SELECT seq, row_number() OVER (
                        PARTITION BY kind = 'restore' ORDER BY seq DESC) AS newer
                    FROM checkpoints
                    WHERE session = %(s)s AND NOT (kind = 'restore' AND manual)
                ) ranked
                WHERE c.session = %(s)s AND c.seq = ranked.seq AND ranked.newer > %(keep)s
                """,
                {"s": session.value, "keep": keep_last},
            )
            removed = cur.rowcount
            if removed:
                drop_unreferenced(cur, session.value)
        return removed

    def prune_steps(self, session: SessionName, before: str, batch: int = 1000) -> int:
        """Oldest first, so a turn's steps go before its tombstone: no batch boundary ever
        leaves an old turn looking interrupted."""
        total = 0
        while True:
            with self.db.transaction() as cur:
                cur.execute(
                    "DELETE FROM checkpoints WHERE session = %(s)s AND seq IN ("
                    "SELECT seq FROM checkpoints WHERE session = %(s)s "
                    "AND kind IN ('step', 'tombstone') "
                    "AND created_at::timestamptz < %(before)s::timestamptz "
                    "ORDER BY seq LIMIT %(batch)s)",
                    {"s": session.value, "before": before, "batch": batch},
                )
                removed = cur.rowcount
            total += removed
            if removed < batch:
                break
        while True:
            with self.db.transaction() as cur:
                if drop_unreferenced(cur, session.value, batch) < batch:
                    break
        return total

    def drop(self, session: SessionName) -> None:
        with self.db.transaction() as cur:
            cur.execute("DELETE FROM checkpoints WHERE session = %s", [session.value])
            cur.execute("DELETE FROM compensations WHERE session = %s", [session.value])
            drop_unreferenced(cur, session.value)

    def rename(self, old: SessionName, new: SessionName) -> None:
        rename_everywhere(self.db, old, new)

    def compensations(self, session: SessionName) -> list[CompensationEntry]:
        found = self.db.rows(
            "SELECT body FROM compensations WHERE session = %s ORDER BY position",
            [session.value],
        )
        entries = []
        for (text,) in found:
            try:
                entries.append(parse_entry(json.loads(text)))
            except (ValueError, KeyError, TypeError) as exc:
                raise CorruptDocumentError(
                    f"a compensation journal entry of {session.value} is unreadable: {exc}"
                ) from None
        return entries

    def used_ids(self, session: SessionName, candidates: Sequence[str]) -> set[str]:
        return rows.mentioned(self.db, ["messages", "compensations"], session.value, candidates)

    def record_compensations(
        self, session: SessionName, entries: Sequence[CompensationEntry], durable: bool = True
    ) -> None:
        """Committed on return, visible to every machine (the server syncs its own log)."""
        with self.db.transaction() as cur:
            cur.executemany(
                "INSERT INTO compensations (session, call_id, rollback_point, body) "
                "VALUES (%s, %s, %s, %s) ON CONFLICT (session, call_id, rollback_point) "
                "DO UPDATE SET body = excluded.body",
                [
                    (
                        session.value,
                        e.call.id or "",
                        e.rollback_point or "",
                        dump_entry(e),
                    )
                    for e in entries
                ],
            )


def _header(session: str, row: Sequence[Any]) -> Checkpoint:
    seq, cid, kind, manual, created_at, version, header_text, count = row
    try:
        header = json.loads(header_text)
    except ValueError:
        header = None
    if not isinstance(header, dict):
        raise CorruptDocumentError(f"checkpoint {cid} of {session} has an unreadable header")
    details = header.get("details")
    return Checkpoint(
        id=cid,
        session=session,
        seq=int(seq),
        kind=kind,
        created_at=created_at,
        reason=header.get("reason") or "",
        label=header.get("label"),
        manual=bool(manual),
        turn_id=header.get("turn_id"),
        step=header.get("step"),
        output=header.get("output"),
        details=dict(details) if isinstance(details, dict) else {},
        format_version=int(version),
        message_count=int(count or 0),
    )
