"""Long-term memory over SQLite and PostgreSQL alike: records, Koog's word sets, vectors,
forgetting, namespaces and metadata filters are written once here; only ranking differs
(SqliteMemoryStore: FTS5 and the vector index; PgMemoryStore: tsvector and pgvector).

- jaccard: Koog's word sets inverted, (namespace, word) -> record with each record's word
  count, so the database computes |Q ∩ D| / (|Q| + |D| - |Q ∩ D|) for the records sharing
  a word.
- keyword: Koog's substring rule over the lower-cased content, in insertion order (`seq`).
- embeddings: one vector per record and model, written in the record's transaction.
- A forgotten record's source and a digest of its text are remembered (never the text),
  so ingestion never adds it again, in any namespace, from any copy of its message.
- Placements: the records placed after a message, by the message's digest (ids, scores,
  metrics), so any request carrying that message again gets them in the same place; kept
  while in use, gone after `PLACEMENT_DAYS` unused or beyond `PLACEMENT_ROWS`.
Reads of a memory never written return nothing and create nothing.
"""

from __future__ import annotations

import contextlib
import json
import random
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from koogcli.adapters.sql.dialect import Dialect
from koogcli.adapters.sql.memory_scores import Scored, above, fuse, record_from_row
from koogcli.core.memory import (
    MemoryQuery,
    MemoryRecord,
    Namespaces,
    SearchHit,
    content_key,
    tokenize,
)
from koogcli.core.messages import utc_now

COLUMNS = "seq, id, namespace, content, metadata, created_at, source"
# Placements by digest: dropped after this long unused, and beyond this many (oldest first).
PLACEMENT_DAYS = 30
PLACEMENT_ROWS = 200_000
PLACEMENT_TOUCH_SECONDS = 86400


@dataclass(frozen=True)
class Scope:
    """The namespaces (None: all) and metadata values a search or listing keeps."""

    spaces: list[str] | None
    where: Mapping[str, str]

    @classmethod
    def of(cls, namespace: Namespaces, where: Mapping[str, str] | None) -> Scope:
        spaces = [namespace] if isinstance(namespace, str) else namespace
        return cls(None if spaces is None else list(spaces), where or {})


class SqlMemoryStore:
    """The store over a database of adapters/sql (`rows`, `transaction`, `dialect`);
    subclasses name the tables and rank."""

    RECORDS, TOKENS, VECTORS, FORGOTTEN = "records", "tokens", "vectors", "forgotten"
    PLACEMENTS = "placements"
    VECTOR_PARAM = "%s"  # how a packed vector is passed
    VECTOR_ORDER = "v.record, v.model"
    DIMENSION = "cardinality(vector)"  # a stored vector's dimension, in SQL

    def __init__(self, db: Any) -> None:
        self.db = db
        self.dialect: Dialect = db.dialect

    def _ready(self) -> None:
        """Set up what the connection needs before its first use."""

    def _text_column(self, r: MemoryRecord, words: set[str]) -> tuple[str, str, list[object]]:
        """The record's extra column for ranking: (name, SQL value, its arguments)."""
        raise NotImplementedError

    def _index_text(self, cur: Any, seq: int, r: MemoryRecord) -> None:
        """Index a new record's text where the row does not (SQLite's FTS5 tables)."""

    def _unindex_text(self, cur: Any, seq: int, lowered: str, content: str) -> None:
        """Take a deleted record's text out of the indexes the row does not carry."""

    def _vectors_removed(self, cur: Any) -> None:
        """Vectors were deleted in this transaction."""

    def _scrub(self, cur: Any) -> None:
        """In the transaction that forgot records: leave their text in no index page."""

    def _pack(self, vector: Sequence[float]) -> object:
        raise NotImplementedError

    def _unpack(self, stored: Any) -> list[float]:
        raise NotImplementedError

    def _metadata(self, alias: str, key: str) -> tuple[str, object]:
        """A metadata value as text, as SQL with one parameter and its argument."""
        raise NotImplementedError

    def _fulltext(self, text: str, scope: Scope, limit: int, threshold: float) -> Scored:
        raise NotImplementedError

    def _nearest(self, vector: Sequence[float], scope: Scope, model: str, limit: int) -> Scored:
        """The `limit` nearest records in `scope`, as (seq, cosine)."""
        raise NotImplementedError

    def vectors_supported(self) -> bool:
        return True

    def _rows(self, sql: str, args: Sequence[object] = ()) -> list[Any]:
        self._ready()
        if not self.db.exists():
            return []
        return list(self.db.rows(sql, args))

    @contextmanager
    def _write(self) -> Iterator[Any]:
        self._ready()
        with self.db.transaction() as cur:
            yield cur

    def _record(self, row: Sequence[Any]) -> MemoryRecord:
        return record_from_row(row, self._where())

    def _where(self) -> str:
        """Where the records are, as a damaged record's message names it."""
        return f"table {self.RECORDS} of {self.db.label}"

    def _scope(self, scope: Scope, alias: str = "r") -> tuple[str, list[object]]:
        """Conditions (each led by AND) keeping `scope` (metadata compared as text)."""
        sql, args = "", list[object]()
        if scope.spaces is not None:
            sql += f" AND {alias}.namespace IN {self.dialect.each()}"
            args.append(self.dialect.listed(scope.spaces))
        for key, value in scope.where.items():
            expression, argument = self._metadata(alias, key)
            sql += f" AND {expression} = %s"
            args += [argument, value]
        return sql, args

    def _within(self, seqs: Sequence[int], scope: Scope) -> set[int]:
        """Which of `seqs` are in `scope`."""
        condition, args = self._scope(scope)
        found = self._rows(
            f"SELECT r.seq FROM {self.RECORDS} r WHERE r.seq IN {self.dialect.each('int')}"
            f"{condition}",
            [self.dialect.listed(list(seqs)), *args],
        )
        return {int(seq) for (seq,) in found}

    def add(
        self,
        records: Sequence[MemoryRecord],
        vectors: Sequence[Sequence[float]] | None = None,
        model: str = "",
    ) -> list[str]:
        """Insert records (and their vectors) in one transaction; skips known ids and
        sources, and sources the user forgot."""
        if not records:
            return []
        added: list[str] = []
        with self._write() as cur:
            for index, r in enumerate(records):
                if (
                    r.source
                    and cur.execute(
                        f"SELECT 1 FROM {self.FORGOTTEN} WHERE source = %s", [r.source]
                    ).fetchone()
                ):
                    continue
                words = tokenize(r.content)
                column, value, value_args = self._text_column(r, words)
                row = cur.execute(
                    f"INSERT INTO {self.RECORDS} (id, namespace, content, content_lower, "
                    f"metadata, created_at, source, {column}) VALUES (%s, %s, %s, %s, %s, %s, "
                    f"%s, {value}) ON CONFLICT DO NOTHING RETURNING seq",
                    [
                        r.id,
                        r.namespace,
                        r.content,
                        r.content.lower(),
                        json.dumps(r.metadata),
                        r.created_at,
                        r.source,
                        *value_args,
                    ],
                ).fetchone()
                if row is None:
                    continue
                seq = int(row[0])
                cur.executemany(
                    f"INSERT INTO {self.TOKENS} VALUES (%s, %s, %s, %s)",
                    [(r.namespace, w, seq, len(words)) for w in sorted(words)],
                )
                self._index_text(cur, seq, r)
                if vectors is not None:
                    cur.execute(
                        f"INSERT INTO {self.VECTORS} (record, model, vector) "
                        f"VALUES (%s, %s, {self.VECTOR_PARAM}) ON CONFLICT DO NOTHING",
                        [seq, model, self._pack(vectors[index])],
                    )
                added.append(r.id)
        return added

    def put_vectors(self, model: str, pairs: Sequence[tuple[str, Sequence[float]]]) -> None:
        if not pairs:
            return
        with self._write() as cur:
            cur.executemany(
                f"INSERT INTO {self.VECTORS} (record, model, vector) SELECT seq, %s, "
                f"{self.VECTOR_PARAM} FROM {self.RECORDS} WHERE id = %s ON CONFLICT DO NOTHING",
                [(model, self._pack(vector), record_id) for record_id, vector in pairs],
            )

    def delete(self, record_id: str) -> bool:
        if not self.db.exists():
            return False
        with self._write() as cur:
            return self._delete_in(cur, record_id)

    def forget(self, ids: Sequence[str]) -> list[MemoryRecord]:
        """Delete records for good, from every index, and remember their sources."""
        found = [r for r in map(self.get, ids) if r is not None]
        if not found:
            return []
        now = utc_now()
        with self._write() as cur:
            for record in found:
                self._delete_in(cur, record.id)
            # Its source, and a digest of its text: a copy of the message elsewhere (a fork,
            # an export imported) has another source but the same text.
            keys = [(r.namespace, r.source, now) for r in found if r.source]
            keys += [(r.namespace, content_key(r.content), now) for r in found]
            cur.executemany(
                f"INSERT INTO {self.FORGOTTEN} VALUES (%s, %s, %s) ON CONFLICT DO NOTHING", keys
            )
            self._scrub(cur)
        return found

    def _delete_in(self, cur: Any, record_id: str) -> bool:
        """One record out of the table, the word index, the text indexes and vectors."""
        row = cur.execute(
            f"SELECT seq, namespace, content_lower, content FROM {self.RECORDS} WHERE id = %s",
            [record_id],
        ).fetchone()
        if row is None:
            return False
        seq, namespace, lowered, content = row
        cur.execute(
            f"DELETE FROM {self.TOKENS} WHERE namespace = %s AND record = %s AND token IN "
            f"{self.dialect.each()}",
            [namespace, seq, self.dialect.listed(sorted(tokenize(lowered)))],
        )
        self._unindex_text(cur, seq, lowered, content)
        if cur.execute(f"DELETE FROM {self.VECTORS} WHERE record = %s", [seq]).rowcount:
            self._vectors_removed(cur)
        cur.execute(f"DELETE FROM {self.RECORDS} WHERE seq = %s", [seq])
        return True

    def known_sources(self, namespace: str, sources: Sequence[str]) -> set[str]:
        if not sources:
            return set()
        listed, each = self.dialect.listed(sources), self.dialect.each()
        found = self._rows(
            f"SELECT source FROM {self.RECORDS} WHERE namespace = %s AND source IN {each} "
            f"UNION SELECT source FROM {self.FORGOTTEN} WHERE source IN {each}",
            [namespace, listed, listed],  # forgotten in any namespace
        )
        return {r[0] for r in found}

    def records(
        self, namespace: Namespaces = None, where: Mapping[str, str] | None = None
    ) -> list[MemoryRecord]:
        condition, args = self._scope(Scope.of(namespace, where))
        found = self._rows(
            f"SELECT {COLUMNS} FROM {self.RECORDS} r WHERE 1 = 1{condition} ORDER BY seq", args
        )
        return [self._record(r) for r in found]

    def size(self, namespace: str) -> int:
        found = self._rows(f"SELECT count(*) FROM {self.RECORDS} WHERE namespace = %s", [namespace])
        return int(found[0][0]) if found else 0

    def get(self, record_id: str) -> MemoryRecord | None:
        found = self._rows(f"SELECT {COLUMNS} FROM {self.RECORDS} WHERE id = %s", [record_id])
        return self._record(found[0]) if found else None

    def get_many(self, record_ids: Sequence[str]) -> dict[str, MemoryRecord]:
        """The records that exist among `record_ids`, by id: one query a few hundred ids
        (a session's placed records are looked up on every request)."""
        found: dict[str, MemoryRecord] = {}
        ids = list(dict.fromkeys(record_ids))
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ", ".join(["%s"] * len(chunk))
            for row in self._rows(
                f"SELECT {COLUMNS} FROM {self.RECORDS} WHERE id IN ({marks})", chunk
            ):
                record = self._record(row)
                found[record.id] = record
        return found

    def placements(self, namespace: str, digests: Sequence[str]) -> dict[str, list[Any]]:
        """The entries placed after each of these messages (by digest) that are known;
        those unused for a day are marked used now, so what is in use never expires."""
        wanted = list(dict.fromkeys(digests))
        if not wanted:
            return {}
        found: dict[str, list[Any]] = {}
        stale: list[str] = []
        now = int(time.time())
        for row in self._rows(
            f"SELECT digest, entries, used_at FROM {self.PLACEMENTS} WHERE namespace = %s "
            f"AND digest IN {self.dialect.each()}",
            [namespace, self.dialect.listed(wanted)],
        ):
            with contextlib.suppress(ValueError):
                entries = json.loads(row[1])
                if isinstance(entries, list):
                    found[row[0]] = entries
            if row[2] < now - PLACEMENT_TOUCH_SECONDS:
                stale.append(row[0])
        if stale:
            with self._write() as cur:
                cur.execute(
                    f"UPDATE {self.PLACEMENTS} SET used_at = %s WHERE namespace = %s "
                    f"AND digest IN {self.dialect.each()}",
                    [now, namespace, self.dialect.listed(stale)],
                )
        return found

    def place(self, namespace: str, digest: str, entries: Sequence[Mapping[str, object]]) -> None:
        """Remember the entries placed after a message (the first placement stays: a
        message already sent with its records is never given others), and let go of
        placements unused for `PLACEMENT_DAYS` and of the oldest beyond `PLACEMENT_ROWS`."""
        now = int(time.time())
        with self._write() as cur:
            cur.execute(
                f"INSERT INTO {self.PLACEMENTS} VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING",
                [namespace, digest, json.dumps(list(entries), separators=(",", ":")), now],
            )
            cur.execute(
                f"DELETE FROM {self.PLACEMENTS} WHERE used_at < %s",
                [now - PLACEMENT_DAYS * 86400],
            )
            if random.random() < 1 / 64:  # counting costs a scan: now and then is enough
                (count,) = cur.execute(f"SELECT count(*) FROM {self.PLACEMENTS}").fetchone()
                if count > PLACEMENT_ROWS:
                    cur.execute(
                        f"DELETE FROM {self.PLACEMENTS} WHERE used_at <= (SELECT used_at FROM "
                        f"{self.PLACEMENTS} ORDER BY used_at LIMIT 1 OFFSET %s)",
                        [count - PLACEMENT_ROWS],
                    )

    def namespaces(self) -> list[str]:
        return [
            r[0] for r in self._rows(f"SELECT DISTINCT namespace FROM {self.RECORDS} ORDER BY 1")
        ]

    def ids_starting(self, prefix: str, limit: int = 10) -> list[str]:
        found = self._rows(
            f"SELECT id FROM {self.RECORDS} WHERE substr(id, 1, %s) = %s ORDER BY seq LIMIT %s",
            [len(prefix), prefix, limit],
        )
        return [r[0] for r in found]

    def without_vectors(self, namespace: str, model: str) -> list[MemoryRecord]:
        found = self._rows(
            f"SELECT {COLUMNS} FROM {self.RECORDS} r WHERE namespace = %s AND NOT EXISTS "
            f"(SELECT 1 FROM {self.VECTORS} v WHERE v.record = r.seq AND v.model = %s) "
            "ORDER BY seq",
            [namespace, model],
        )
        return [self._record(r) for r in found]

    def vector_count(self, model: str) -> int:
        found = self._rows(f"SELECT count(*) FROM {self.VECTORS} WHERE model = %s", [model])
        return int(found[0][0]) if found else 0

    def vectors(self) -> list[tuple[str, str, list[float]]]:
        found = self._rows(
            f"SELECT r.id, v.model, v.vector FROM {self.VECTORS} v "
            f"JOIN {self.RECORDS} r ON r.seq = v.record ORDER BY {self.VECTOR_ORDER}"
        )
        return [(rid, model, self._unpack(vector)) for rid, model, vector in found]

    def vector_dimension(self, model: str) -> int | None:
        """The dimension of the vectors stored for `model`; None when there are none."""
        found = self._rows(
            f"SELECT {self.DIMENSION} FROM {self.VECTORS} WHERE model = %s LIMIT 1", [model]
        )
        return int(found[0][0]) if found else None

    def search(self, q: MemoryQuery) -> list[SearchHit]:
        scope = Scope.of(q.namespaces, q.where)
        if q.mode == "keyword":
            if q.threshold > 1.0:  # every keyword hit scores 1.0
                return []
            return self._hits(self._keyword(q.text.lower(), scope, q.limit), "keyword")
        if q.mode == "jaccard":
            return self._hits(self._jaccard(q, scope), "jaccard")
        if q.mode == "fulltext":
            return self._hits(self._fulltext(q.text, scope, q.limit, q.threshold), "bm25")
        if q.mode == "embedding":
            near = above(self._nearest(q.vector, scope, q.model, q.limit), q.floor)
            return self._hits([(seq, s) for seq, s in near if s >= q.threshold], "cosine")
        # hybrid: full-text and vector rankings fused by reciprocal rank, so exact names and
        # identifiers come through where the embedding blurs them; a record with no
        # full-text match counts only when its cosine is above `floor` (§5.16).
        depth = max(q.limit * 4, 20)
        words = self._fulltext(q.text, scope, depth, 0.0)
        near = above(self._nearest(q.vector, scope, q.model, depth), q.floor)
        fused = [(seq, s) for seq, s in fuse([words, near], q.limit) if s >= q.threshold]
        return self._hits(fused, "hybrid")

    def _keyword(self, needle: str, scope: Scope, limit: int) -> Scored:
        condition, args = self._scope(scope)
        found = self._rows(
            f"SELECT r.seq FROM {self.RECORDS} r WHERE "
            f"{self.dialect.contains('r.content_lower', '%s')}{condition} ORDER BY r.seq LIMIT %s",
            [needle, *args, limit],
        )
        return [(int(seq), 1.0) for (seq,) in found]

    def _jaccard(self, q: MemoryQuery, scope: Scope) -> Scored:
        words = sorted(tokenize(q.text))
        if not words:
            return []
        # The (namespace, token, record) key answers most of it; records are joined only
        # for metadata filters.
        space_sql, space_args = "", list[object]()
        if scope.spaces is not None and len(scope.spaces) == 1:
            space_sql, space_args = " AND t.namespace = %s", [scope.spaces[0]]
        elif scope.spaces is not None:
            space_sql = f" AND t.namespace IN {self.dialect.each()}"
            space_args = [self.dialect.listed(scope.spaces)]
        join, condition, args = "", "", list[object]()
        if scope.where:
            condition, args = self._scope(Scope(None, scope.where))
            join = f" JOIN {self.RECORDS} r ON r.seq = t.record"
        score = "CAST(count(*) AS double precision) / (%s + t.ntokens - count(*))"
        found = self._rows(
            f"SELECT t.record, {score} AS score FROM {self.TOKENS} t{join} "
            f"WHERE t.token IN {self.dialect.each()}{space_sql}{condition} "
            f"GROUP BY t.record, t.ntokens HAVING {score} >= %s "
            "ORDER BY score DESC, t.record LIMIT %s",
            [
                len(words),
                self.dialect.listed(words),
                *space_args,
                *args,
                len(words),
                q.threshold,
                q.limit,
            ],
        )
        return [(int(seq), float(value)) for seq, value in found]

    def _hits(self, scored: Sequence[tuple[int, float]], metric: str) -> list[SearchHit]:
        if not scored:
            return []
        found = self._rows(
            f"SELECT {COLUMNS} FROM {self.RECORDS} WHERE seq IN {self.dialect.each('int')}",
            [self.dialect.listed([s for s, _ in scored])],
        )
        rows = {int(r[0]): self._record(r) for r in found}
        return [SearchHit(rows[s], score, metric) for s, score in scored if s in rows]  # type: ignore[arg-type]
