"""SqliteMemoryStore: long-term memory records in `<data>/memory.sqlite3` (WAL, 0600).

Search never scans records in Python (the SQL is in adapters/sql/memory_queries.py):
- fulltext: FTS5, porter over unicode61 without diacritics, ranked by BM25.
- keyword: an FTS5 trigram index over the lower-cased content finds substrings of three
  or more characters; shorter queries use SQLite's own `instr` over that column. Results
  keep insertion order (`seq`), matching Koog's rule exactly.
- jaccard: an inverted index (namespace, token) -> record, with each record's token
  count, so SQLite computes |Q ∩ D| / (|Q| + |D| - |Q ∩ D|) for the records sharing a word.
- embeddings: float32 vectors beside the records, one per record and model, written in the
  record's transaction; searched through a derived index (adapters/sql/vector_index.py).
Version 1 databases (no full-text table, vectors without their own row number) are
migrated in place, in one transaction, the first time this version opens them.
A file that is not a koog memory database is reported (exit 3) and never written. Every
SQLite failure becomes one message saying which of three it is: locked (another process is
writing), read-only or unopenable (permissions), or corrupt / missing koog's tables. The
first use creates the schema inside the write lock, so simultaneous first uses all succeed.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from array import array
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

from koogcli.adapters.paths import ensure_dir
from koogcli.adapters.sql import memory_queries as queries
from koogcli.adapters.sql.memory_db import explain, open_database, sqlite_errors, transaction
from koogcli.adapters.sql.memory_search import dispatch
from koogcli.adapters.sql.vector_index import VectorIndex, bump_epoch
from koogcli.core.errors import LockTimeoutError, StorageError
from koogcli.core.memory import MemoryQuery, MemoryRecord, Namespaces, SearchHit, tokenize
from koogcli.core.messages import utc_now

_COLUMNS = "seq, id, namespace, content, metadata, created_at, source"


class SqliteMemoryStore:
    def __init__(self, path: Path, busy_timeout: float = 30.0) -> None:
        self.path = path
        self.busy_timeout = busy_timeout
        # One connection per thread (`koog serve` answers from a pool of threads; a
        # connection may only be used by the thread that made it).
        self._local = threading.local()

    @property
    def _db(self) -> sqlite3.Connection | None:
        db: sqlite3.Connection | None = getattr(self._local, "db", None)
        return db

    @_db.setter
    def _db(self, db: sqlite3.Connection | None) -> None:
        self._local.db = db

    # -- connection ----------------------------------------------------------------

    def _connect(self, create: bool) -> sqlite3.Connection | None:
        if self._db is not None:
            return self._db
        if not self.path.exists():
            if not create:
                return None
            ensure_dir(self.path.parent)
            try:
                os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600))
            except OSError as exc:
                raise StorageError(f"cannot create {self.path}: {exc.strerror}") from exc
        # Setting up can meet SQLITE_BUSY without SQLite's own wait (another process is
        # creating the schema or switching the journal mode): retry until the timeout.
        deadline = time.monotonic() + self.busy_timeout
        while True:
            try:
                db = open_database(self.path, self.busy_timeout)
                break
            except LockTimeoutError:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.02)
        self._db = db
        return db

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        db = self._connect(create=True)
        assert db is not None
        try:
            with transaction(db):
                yield db
        except sqlite3.Error as exc:
            raise explain(self.path, exc, self.busy_timeout) from exc

    def _read(self) -> sqlite3.Connection | None:
        return self._connect(create=False)

    # -- writes --------------------------------------------------------------------

    @sqlite_errors
    def add(
        self,
        records: Sequence[MemoryRecord],
        vectors: Sequence[Sequence[float]] | None = None,
        model: str = "",
    ) -> list[str]:
        """Insert records (and their vectors) in one transaction; skips known sources."""
        added: list[str] = []
        with self._write() as db:
            for index, r in enumerate(records):
                if (
                    r.source
                    and db.execute(
                        "SELECT 1 FROM forgotten WHERE source = ?", (r.source,)
                    ).fetchone()
                ):
                    continue  # forgotten by the user: never added again, in any namespace
                words = tokenize(r.content)
                cursor = db.execute(
                    "INSERT OR IGNORE INTO records (id, namespace, content, content_lower, metadata,"
                    " created_at, source, ntokens) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        r.id,
                        r.namespace,
                        r.content,
                        r.content.lower(),
                        json.dumps(r.metadata),
                        r.created_at,
                        r.source,
                        len(words),
                    ),
                )
                if cursor.rowcount == 0:
                    continue
                seq = cursor.lastrowid
                db.executemany(
                    "INSERT INTO tokens VALUES (?, ?, ?, ?)",
                    [(r.namespace, w, seq, len(words)) for w in words],
                )
                db.execute(
                    "INSERT INTO records_fts (rowid, content_lower) VALUES (?, ?)",
                    (seq, r.content.lower()),
                )
                db.execute(
                    "INSERT INTO records_text (rowid, content) VALUES (?, ?)", (seq, r.content)
                )
                if vectors is not None:
                    db.execute(
                        "INSERT INTO vectors (record, model, vector) VALUES (?, ?, ?)",
                        (seq, model, _pack(vectors[index])),
                    )
                added.append(r.id)
        return added

    @sqlite_errors
    def put_vectors(self, model: str, pairs: Sequence[tuple[str, Sequence[float]]]) -> None:
        with self._write() as db:
            for record_id, vector in pairs:
                db.execute(
                    "INSERT OR IGNORE INTO vectors (record, model, vector) "
                    "SELECT seq, ?, ? FROM records WHERE id = ?",
                    (model, _pack(vector), record_id),
                )

    @sqlite_errors
    def delete(self, record_id: str) -> bool:
        if self._read() is None:
            return False
        with self._write() as db:
            return _delete_in(db, record_id)

    @sqlite_errors
    def forget(self, ids: Sequence[str]) -> list[MemoryRecord]:
        """Delete records for good: from every index, their sources remembered so ingestion
        never adds them again, and their text overwritten in the file (secure_delete, the
        full-text segments merged, the WAL checkpointed into the database and emptied)."""
        found = [r for r in map(self.get, ids) if r is not None]
        if not found:
            return []
        now = utc_now()
        connection = self._connect(create=True)
        assert connection is not None
        connection.execute("PRAGMA secure_delete = ON")
        with self._write() as db:
            for record in found:
                _delete_in(db, record.id)
                if record.source:
                    db.execute(
                        "INSERT OR IGNORE INTO forgotten VALUES (?, ?, ?)",
                        (record.namespace, record.source, now),
                    )
            for index in ("records_fts", "records_text"):
                db.execute(f"INSERT INTO {index} ({index}) VALUES ('optimize')")
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return found

    # -- reads ---------------------------------------------------------------------

    @sqlite_errors
    def known_sources(self, namespace: str, sources: Sequence[str]) -> set[str]:
        db = self._read()
        if db is None or not sources:
            return set()
        rows = db.execute(
            "SELECT source FROM records WHERE namespace = ? AND source IN "
            "(SELECT value FROM json_each(?)) UNION SELECT source FROM forgotten "
            "WHERE source IN (SELECT value FROM json_each(?))",  # forgotten in any namespace
            (namespace, json.dumps(list(sources)), json.dumps(list(sources))),
        )
        return {r[0] for r in rows}

    @sqlite_errors
    def records(
        self, namespace: Namespaces = None, where: Mapping[str, str] | None = None
    ) -> list[MemoryRecord]:
        db = self._read()
        if db is None:
            return []
        condition, args = queries.scope(_spaces(namespace), where or {})
        rows = db.execute(
            f"SELECT {_COLUMNS} FROM records r WHERE 1 = 1{condition} ORDER BY seq", args
        )
        return [self._record(r) for r in rows]

    @sqlite_errors
    def size(self, namespace: str) -> int:
        db = self._read()
        if db is None:
            return 0
        return int(
            db.execute("SELECT COUNT(*) FROM records WHERE namespace = ?", (namespace,)).fetchone()[
                0
            ]
        )

    def search(self, query: MemoryQuery) -> list[SearchHit]:
        return dispatch(self, query)

    def _keyword(self, q: MemoryQuery) -> list[SearchHit]:
        return self._by_words("keyword", q)

    def _jaccard(self, q: MemoryQuery) -> list[SearchHit]:
        return self._by_words("jaccard", q)

    def _bm25(self, q: MemoryQuery) -> list[SearchHit]:
        return self._by_words("bm25", q)

    @sqlite_errors
    def _by_words(
        self, metric: Literal["keyword", "jaccard", "bm25"], q: MemoryQuery
    ) -> list[SearchHit]:
        db = self._read()
        if db is None:
            return []
        spaces, wanted = _spaces(q.namespaces), q.where or {}
        if metric == "keyword":
            found = queries.keyword(db, q.text, spaces, wanted, q.limit)
        elif metric == "jaccard":
            found = queries.jaccard(db, q.text, spaces, wanted, q.limit, q.threshold)
        else:
            found = queries.fulltext(db, q.text, spaces, wanted, q.limit, q.threshold)
        return self._hits(db, found, metric)

    @sqlite_errors
    def _cosine(self, q: MemoryQuery) -> list[SearchHit]:
        db = self._read()
        if db is None:
            return []
        near = self._nearest(db, q.vector, q.namespaces, q.model, q.limit, q.where or {})
        kept = queries.above(near, q.floor)
        return self._hits(db, [(seq, s) for seq, s in kept if s >= q.threshold], "cosine")

    @sqlite_errors
    def _hybrid(self, q: MemoryQuery) -> list[SearchHit]:
        """Full-text and vector rankings fused by reciprocal rank: exact names and
        identifiers come through even where the embedding blurs them. A record with no
        full-text match counts only when its cosine is above `floor` (§5.16)."""
        db = self._read()
        if db is None:
            return []
        depth, wanted = max(q.limit * 4, 20), q.where or {}
        words = queries.fulltext(db, q.text, _spaces(q.namespaces), wanted, depth, 0.0)
        near = self._nearest(db, q.vector, q.namespaces, q.model, depth, wanted)
        ranked = queries.fuse([words, queries.above(near, q.floor)], q.limit)
        return self._hits(db, [(seq, s) for seq, s in ranked if s >= q.threshold], "hybrid")

    def _nearest(
        self,
        db: sqlite3.Connection,
        vector: Sequence[float],
        namespace: Namespaces,
        model: str,
        limit: int,
        where: Mapping[str, str],
    ) -> list[tuple[int, float]]:
        """The `limit` nearest records with the metadata asked for, as (seq, cosine)."""
        index = VectorIndex(self.path.parent / "memory-vectors", model)
        width = limit * (8 if where else 1)
        while True:  # metadata filters apply after scoring: widen until enough pass
            found = index.search(db, vector, _spaces(namespace), width)
            if where:
                passing = queries.within(db, [seq for seq, _ in found], None, where)
                kept = [(seq, score) for seq, score in found if seq in passing]
            else:
                kept = found
            if len(kept) >= limit or len(found) < width:
                return kept[:limit]
            width *= 4

    def vectors_supported(self) -> bool:
        return True

    @sqlite_errors
    def without_vectors(self, namespace: str, model: str) -> list[MemoryRecord]:
        db = self._read()
        if db is None:
            return []
        rows = db.execute(
            f"SELECT {_COLUMNS} FROM records r WHERE namespace = ? AND NOT EXISTS "
            "(SELECT 1 FROM vectors v WHERE v.record = r.seq AND v.model = ?) ORDER BY seq",
            (namespace, model),
        )
        return [self._record(r) for r in rows]

    @sqlite_errors
    def vectors(self) -> list[tuple[str, str, list[float]]]:
        db = self._read()
        if db is None:
            return []
        rows = db.execute(
            "SELECT r.id, v.model, v.vector FROM vectors v JOIN records r ON r.seq = v.record "
            "ORDER BY v.vid"
        )
        return [(rid, model, array("f", blob).tolist()) for rid, model, blob in rows]

    @sqlite_errors
    def vector_dimension(self, model: str) -> int | None:
        """The dimension of the vectors stored for `model`; None when there are none."""
        db = self._read()
        if db is None:
            return None
        row = db.execute(
            "SELECT length(vector) FROM vectors WHERE model = ? LIMIT 1", (model,)
        ).fetchone()
        return None if row is None else int(row[0]) // array("f").itemsize

    @sqlite_errors
    def ids_starting(self, prefix: str, limit: int = 10) -> list[str]:
        db = self._read()
        if db is None:
            return []
        rows = db.execute(
            "SELECT id FROM records WHERE substr(id, 1, ?) = ? ORDER BY seq LIMIT ?",
            (len(prefix), prefix, limit),
        )
        return [r[0] for r in rows]

    @sqlite_errors
    def get(self, record_id: str) -> MemoryRecord | None:
        db = self._read()
        if db is None:
            return None
        row = db.execute(f"SELECT {_COLUMNS} FROM records WHERE id = ?", (record_id,)).fetchone()
        return None if row is None else self._record(row)

    @sqlite_errors
    def namespaces(self) -> list[str]:
        db = self._read()
        if db is None:
            return []
        return [r[0] for r in db.execute("SELECT DISTINCT namespace FROM records ORDER BY 1")]

    @sqlite_errors
    def vector_count(self, model: str) -> int:
        db = self._read()
        if db is None:
            return 0
        return int(
            db.execute("SELECT COUNT(*) FROM vectors WHERE model = ?", (model,)).fetchone()[0]
        )

    def _hits(
        self, db: sqlite3.Connection, scored: Sequence[tuple[int, float]], metric: str
    ) -> list[SearchHit]:
        if not scored:
            return []
        seqs = json.dumps([s for s, _ in scored])
        rows = {
            r[0]: self._record(r)
            for r in db.execute(
                f"SELECT {_COLUMNS} FROM records WHERE seq IN (SELECT value FROM json_each(?))",
                (seqs,),
            )
        }
        return [SearchHit(rows[s], score, metric) for s, score in scored if s in rows]  # type: ignore[arg-type]

    def _record(self, row: Sequence[object]) -> MemoryRecord:
        return queries.record_from_row(row, str(self.path))

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None


def _pack(vector: Sequence[float]) -> bytes:
    return array("f", vector).tobytes()


def _spaces(namespace: Namespaces) -> list[str] | None:
    if namespace is None:
        return None
    return [namespace] if isinstance(namespace, str) else list(namespace)


def _delete_in(db: sqlite3.Connection, record_id: str) -> bool:
    """One record out of the table, the token index, both full-text indexes and vectors."""
    row = db.execute(
        "SELECT seq, namespace, content_lower, content FROM records WHERE id = ?", (record_id,)
    ).fetchone()
    if row is None:
        return False
    seq, namespace, lowered, content = row
    db.execute(
        "DELETE FROM tokens WHERE namespace = ? AND record = ? AND token IN "
        "(SELECT value FROM json_each(?))",
        (namespace, seq, json.dumps(sorted(tokenize(lowered)))),
    )
    db.execute(
        "INSERT INTO records_fts (records_fts, rowid, content_lower) VALUES ('delete', ?, ?)",
        (seq, lowered),
    )
    db.execute(
        "INSERT INTO records_text (records_text, rowid, content) VALUES ('delete', ?, ?)",
        (seq, content),
    )
    if db.execute("DELETE FROM vectors WHERE record = ?", (seq,)).rowcount:
        bump_epoch(db)
    db.execute("DELETE FROM records WHERE seq = ?", (seq,))
    return True
