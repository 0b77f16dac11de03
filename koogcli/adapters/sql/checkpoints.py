"""SqlCheckpointStore: checkpoints as rows referring to the session's message rows, and
the compensation journal, on SQLite (the file backend) and PostgreSQL alike.

- A checkpoint's messages are `items`, ids of message rows (adapters/sql/rows.py): storing
  one writes its header plus the messages never stored before, so 1,000 turns of
  checkpoints cost little more than their messages once.
- `seq` is the highest stored one plus one, taken inside the saving transaction (under an
  advisory lock on PostgreSQL, the write lock on SQLite), so two processes never take one
  number.
- A row of another format version is listed (the user sees it) but `get` refuses it; a
  restore gets the stored messages, each checked against its digest.
- The compensation journal is a table keyed by (session, call id, rollback point); each
  mark is committed before the call it announces, so a killed rollback runs nothing twice.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from koogcli.adapters.sql import rows
from koogcli.adapters.sql.journal import dump_entry, parse_entry
from koogcli.core.checkpoints import CHECKPOINT_FORMAT_VERSION, Checkpoint, CompensationEntry
from koogcli.core.errors import CorruptDocumentError, StorageError, UnknownFormatError
from koogcli.core.names import SessionName


class SqlCheckpointStore:
    def __init__(self, db: Any) -> None:
        self.db = db
        self._columns = (
            "seq, id, kind, manual, created_at, format_version, header, " + db.dialect.item_count()
        )

    def save(self, checkpoint: Checkpoint) -> Checkpoint:
        seq, count = self._insert(checkpoint, keep_seq=False)
        if seq is None:
            raise StorageError(f"checkpoint id {checkpoint.id} is taken in {checkpoint.session}")
        return replace(checkpoint, seq=seq, message_count=count)

    def put(self, checkpoint: Checkpoint) -> None:
        self._insert(checkpoint, keep_seq=True)

    def _insert(self, checkpoint: Checkpoint, keep_seq: bool) -> tuple[int | None, int]:
        """The next seq, or the checkpoint's own (then nothing when its id is stored
        already); returns the seq stored."""
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
        # SQLite keeps the count beside the runs; PostgreSQL's is the array's cardinality.
        counted = "" if self.db.dialect.postgres else ", message_count"
        with self.db.transaction() as cur:
            self.db.dialect.lock(cur, f"koog:{self.db.schema}:checkpoints:{name}")
            items = rows.store(cur, self.db, name, checkpoint.messages)
            cur.execute(
                "INSERT INTO checkpoints (session, seq, id, kind, manual, created_at, "
                f"format_version, header, items{counted}) SELECT %(s)s, {seq}, "
                "%(id)s, %(kind)s, %(manual)s, %(at)s, %(v)s, %(header)s, %(items)s"
                f"{counted.replace(', ', ', %(').replace('message_count', 'count)s')} "
                "WHERE true ON CONFLICT DO NOTHING RETURNING seq",
                {
                    "s": name,
                    "seq": checkpoint.seq,
                    "id": checkpoint.id,
                    "kind": checkpoint.kind,
                    "manual": checkpoint.manual,
                    "at": checkpoint.created_at,
                    "v": checkpoint.format_version,
                    "header": json.dumps(header, ensure_ascii=False),
                    "items": self.db.dialect.items(items),
                    "count": len(items),
                },
            )
            row = cur.fetchone()
        rows.remember(self.db, name, checkpoint.messages, items)
        return (int(row[0]) if row else None), len(items)

    def headers(self, session: SessionName) -> list[Checkpoint]:
        if not self.db.exists():
            return []
        found = self.db.rows(
            f"SELECT {self._columns} FROM checkpoints WHERE session = %s ORDER BY seq",
            [session.value],
        )
        return [_header(session.value, row) for row in found]

    def get(self, session: SessionName, checkpoint_id: str) -> Checkpoint:
        row = self.db.one(
            f"SELECT {self._columns}, items FROM checkpoints WHERE session = %s AND id = %s",
            [session.value, checkpoint_id],
        )
        source = f"checkpoint {checkpoint_id} of {session.value} in {self.db.label}"
        if row is None:
            raise StorageError(f"no checkpoint {checkpoint_id} in session {session.value}")
        checkpoint = _header(session.value, row[:-1])
        if checkpoint.format_version == UNREADABLE:
            raise CorruptDocumentError(
                f"{source} is not readable (its header is damaged)",
                hint="koog never rewrites it; delete it with `koog checkpoint delete`",
            )
        if checkpoint.format_version != CHECKPOINT_FORMAT_VERSION:
            raise UnknownFormatError(
                f"{source} has format version {checkpoint.format_version}; "
                f"this koog reads version {CHECKPOINT_FORMAT_VERSION}",
                hint="use a newer koog; it is listed but never used or rewritten",
            )
        try:
            items = self.db.dialect.read_items(row[-1])
        except (ValueError, TypeError, RecursionError, OverflowError) as exc:
            why = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)[:120]
            raise CorruptDocumentError(
                f"{source}: its list of message rows is damaged ({why})",
                hint="koog never rewrites it; delete it with `koog checkpoint delete` (the "
                "session's other checkpoints are intact)",
            ) from None
        messages = rows.load(self.db, session.value, items, source, verify=True)
        return replace(checkpoint, messages=tuple(messages))

    def delete(self, session: SessionName, checkpoint_id: str) -> bool:
        with self.db.transaction() as cur:
            cur.execute(
                "DELETE FROM checkpoints WHERE session = %s AND id = %s RETURNING items",
                [session.value, checkpoint_id],
            )
            freed = [row[0] for row in cur.fetchall()]
            if freed:
                rows.drop_unreferenced(cur, self.db, session.value, freed)
        return bool(freed)

    def sessions(self) -> list[str]:
        if not self.db.exists():
            return []
        return [r[0] for r in self.db.rows("SELECT DISTINCT session FROM checkpoints ORDER BY 1")]

    def prune(self, session: SessionName, keep_last: int) -> int:
        """Keep the newest `keep_last` turn checkpoints (steps and tombstones) and the newest
        `keep_last` automatic restore points; manual ones always stay. Message rows nothing
        refers to any more go with them."""
        with self.db.transaction() as cur:
            cur.execute(
                """
                DELETE FROM checkpoints WHERE session = %(s)s AND seq IN (
                    SELECT seq FROM (
                        SELECT seq, row_number() OVER (
                            PARTITION BY kind = 'restore' ORDER BY seq DESC) AS newer
                        FROM checkpoints
                        WHERE session = %(s)s AND NOT (kind = 'restore' AND manual)
                    ) ranked WHERE ranked.newer > %(keep)s)
                RETURNING items
                """,
                {"s": session.value, "keep": keep_last},
            )
            freed = [row[0] for row in cur.fetchall()]
            if freed:
                rows.drop_unreferenced(cur, self.db, session.value, freed)
        return len(freed)

    def prune_steps(self, session: SessionName, before: str, batch: int = 1000) -> int:
        """Oldest first, so a turn's steps go before its tombstone: no batch boundary ever
        leaves an old turn looking interrupted. Each batch takes its message rows nothing
        refers to any more with it."""
        total = 0
        earlier = self.db.dialect.earlier("created_at")
        while True:
            with self.db.transaction() as cur:
                cur.execute(
                    "DELETE FROM checkpoints WHERE session = %(s)s AND seq IN ("
                    "SELECT seq FROM checkpoints WHERE session = %(s)s "
                    f"AND kind IN ('step', 'tombstone') AND {earlier} "
                    "ORDER BY seq LIMIT %(batch)s) RETURNING items",
                    {"s": session.value, "before": before, "batch": batch},
                )
                freed = [row[0] for row in cur.fetchall()]
                if freed:
                    rows.drop_unreferenced(cur, self.db, session.value, freed)
            total += len(freed)
            if len(freed) < batch:
                break
        with self.db.transaction() as cur:  # and whatever a killed prune left behind
            rows.drop_unreferenced(cur, self.db, session.value)
        return total

    def compensations(self, session: SessionName) -> list[CompensationEntry]:
        if not self.db.exists():
            return []
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
                    f"a compensation journal entry of {session.value} in {self.db.label} is "
                    f"unreadable: {exc}"
                ) from None
        return entries

    def record_compensations(
        self, session: SessionName, entries: Sequence[CompensationEntry], durable: bool = True
    ) -> None:
        """Committed on return, visible to every process."""
        with self.db.transaction() as cur:
            cur.executemany(
                "INSERT INTO compensations (session, call_id, rollback_point, body) "
                "VALUES (%s, %s, %s, %s) ON CONFLICT (session, call_id, rollback_point) "
                "DO UPDATE SET body = excluded.body",
                [
                    (session.value, e.call.id or "", e.rollback_point or "", dump_entry(e))
                    for e in entries
                ],
            )

    def used_ids(self, session: SessionName, candidates: Sequence[str]) -> set[str]:
        return rows.mentioned(self.db, ["messages", "compensations"], session.value, candidates)


def _header(session: str, row: Sequence[Any]) -> Checkpoint:
    """The checkpoint a row describes; one whose header is damaged is listed as unreadable
    (format version -1: shown, refused by name, never used)."""
    seq, cid, kind, manual, created_at, version, header_text, count = row
    try:
        header = json.loads(header_text)
    except (ValueError, RecursionError):
        header = None
    texts = ("label", "turn_id", "step", "output")
    if (
        not isinstance(header, dict)
        or not isinstance(header.get("reason", ""), str)
        or not all(isinstance(header.get(k), (str, type(None))) for k in texts)
        or not isinstance(header.get("details", {}), dict)
    ):
        return Checkpoint(cid, session, int(seq), kind, str(created_at), format_version=UNREADABLE)
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
        details=dict(header.get("details") or {}),
        format_version=int(version),
        message_count=int(count or 0),
    )


UNREADABLE = -1
