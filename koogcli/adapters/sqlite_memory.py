"""SqliteMemoryStore: long-term memory records in `<data>/memory.sqlite3` (WAL, 0600).

Search never scans records in Python:
- keyword: an FTS5 trigram index over the lower-cased content finds substrings of three
  or more characters; shorter queries use SQLite's own `instr` over that column. Results
  keep insertion order (`seq`), matching Koog's rule exactly.
- similarity: an inverted index (namespace, token) -> record, with each record's token
  count, so SQLite computes |Q ∩ D| / (|Q| + |D| - |Q ∩ D|) for the records sharing a word.
- embeddings: float32 vectors beside the records, one per record and model; cosine in
  Python over the namespace's vectors.
A file that is not a koog memory database is reported (exit 3) and never written. Every
SQLite failure becomes one message saying which of three it is: locked (another process is
writing), read-only or unopenable (permissions), or corrupt / missing koog's tables. The
first use creates the schema inside the write lock, so simultaneous first uses all succeed.
"""

from __future__ import annotations

import functools
import json
import math
import os
import sqlite3
import time
from array import array
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from koogcli.adapters.paths import ensure_dir
from koogcli.core.errors import (
    CorruptDocumentError,
    KoogError,
    LockTimeoutError,
    StorageError,
    UnknownFormatError,
)
from koogcli.core.memory import MemoryRecord, SearchHit, tokenize

FORMAT, VERSION = "koog.memory", "1"
P = ParamSpec("P")
R = TypeVar("R")
_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE records (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    namespace TEXT NOT NULL,
    content TEXT NOT NULL,
    content_lower TEXT NOT NULL,
    metadata TEXT NOT NULL,
    created_at TEXT NOT NULL,
    source TEXT,
    ntokens INTEGER NOT NULL,
    UNIQUE (namespace, source)
);
CREATE INDEX records_by_namespace ON records (namespace, seq);
CREATE TABLE tokens (
    namespace TEXT NOT NULL, token TEXT NOT NULL, record INTEGER NOT NULL, ntokens INTEGER NOT NULL,
    PRIMARY KEY (namespace, token, record)
) WITHOUT ROWID;
CREATE VIRTUAL TABLE records_fts USING fts5(content_lower, content='', tokenize='trigram');
CREATE TABLE vectors (
    record INTEGER NOT NULL, model TEXT NOT NULL, vector BLOB NOT NULL, PRIMARY KEY (record, model)
);
"""
_COLUMNS = "seq, id, namespace, content, metadata, created_at, source"


def _tables(db: sqlite3.Connection) -> set[str]:
    return {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}


_KEEP = "koog never rewrites it; move it aside to start a new one"


def _explain(path: Path, exc: sqlite3.Error, timeout: float) -> StorageError:
    """Locked, read-only and corrupt are different problems with different remedies."""
    text = str(exc).lower()
    if "locked" in text or "busy" in text:
        return LockTimeoutError(
            f"{path} stayed locked for {timeout:g}s",
            hint="another koog process is writing long-term memory; retry when it is done",
        )
    if "readonly" in text or "read-only" in text or "unable to open" in text:
        return StorageError(
            f"{path} cannot be written or opened ({exc})",
            hint="check the permissions of the file and of its folder",
        )
    if "no such table" in text or "no such column" in text:
        return CorruptDocumentError(f"{path} lacks part of koog's schema ({exc})", hint=_KEEP)
    if isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError):
        return CorruptDocumentError(f"{path} is not a readable SQLite database ({exc})", hint=_KEEP)
    return StorageError(f"{path}: {exc}")


def _sqlite_errors(method: Callable[P, R]) -> Callable[P, R]:
    """Reads and writes report SQLite failures as koog errors naming the file."""

    @functools.wraps(method)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(*args, **kwargs)
        except sqlite3.Error as exc:
            store: Any = args[0]
            raise _explain(store.path, exc, store.busy_timeout) from exc

    return wrapper


class SqliteMemoryStore:
    def __init__(self, path: Path, busy_timeout: float = 30.0) -> None:
        self.path = path
        self.busy_timeout = busy_timeout
        self._db: sqlite3.Connection | None = None

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
                db = self._open()
                break
            except LockTimeoutError:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.02)
        self._db = db
        return db

    def _open(self) -> sqlite3.Connection:
        try:
            db = sqlite3.connect(self.path, timeout=self.busy_timeout, isolation_level=None)
        except sqlite3.Error as exc:
            raise _explain(self.path, exc, self.busy_timeout) from exc
        try:
            if not _tables(db):
                with _transaction(db):
                    if not _tables(db):  # another process may have created it meanwhile
                        for statement in _SCHEMA.split(";"):
                            if statement.strip():
                                db.execute(statement)
                        db.executemany(
                            "INSERT INTO meta VALUES (?, ?)",
                            [("format", FORMAT), ("version", VERSION)],
                        )
            tables = _tables(db)
            meta = (
                dict(db.execute("SELECT key, value FROM meta").fetchall())
                if "meta" in tables
                else {}
            )
            if meta.get("format") != FORMAT or meta.get("version") != VERSION:
                raise UnknownFormatError(
                    f"{self.path} is not a koog memory database of version {VERSION} "
                    f"(format {meta.get('format')!r}, version {meta.get('version')!r})",
                    hint="koog never rewrites it; move it aside to start a new one",
                )
            if db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                db.execute("PRAGMA journal_mode=WAL")
        except sqlite3.Error as exc:
            db.close()
            raise _explain(self.path, exc, self.busy_timeout) from exc
        except KoogError:
            db.close()
            raise
        return db

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        db = self._connect(create=True)
        assert db is not None
        try:
            with _transaction(db):
                yield db
        except sqlite3.Error as exc:
            raise _explain(self.path, exc, self.busy_timeout) from exc

    def _read(self) -> sqlite3.Connection | None:
        return self._connect(create=False)

    # -- writes --------------------------------------------------------------------

    @_sqlite_errors
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
                if vectors is not None:
                    db.execute(
                        "INSERT INTO vectors VALUES (?, ?, ?)", (seq, model, _pack(vectors[index]))
                    )
                added.append(r.id)
        return added

    @_sqlite_errors
    def put_vectors(self, model: str, pairs: Sequence[tuple[str, Sequence[float]]]) -> None:
        with self._write() as db:
            for record_id, vector in pairs:
                db.execute(
                    "INSERT OR REPLACE INTO vectors SELECT seq, ?, ? FROM records WHERE id = ?",
                    (model, _pack(vector), record_id),
                )

    @_sqlite_errors
    def delete(self, record_id: str) -> bool:
        if self._read() is None:
            return False
        with self._write() as db:
            row = db.execute(
                "SELECT seq, namespace, content_lower FROM records WHERE id = ?", (record_id,)
            ).fetchone()
            if row is None:
                return False
            seq, namespace, lowered = row
            db.execute(
                "DELETE FROM tokens WHERE namespace = ? AND record = ? AND token IN "
                "(SELECT value FROM json_each(?))",
                (namespace, seq, json.dumps(sorted(tokenize(lowered)))),
            )
            db.execute(
                "INSERT INTO records_fts (records_fts, rowid, content_lower) VALUES "
                "('delete', ?, ?)",
                (seq, lowered),
            )
            db.execute("DELETE FROM vectors WHERE record = ?", (seq,))
            db.execute("DELETE FROM records WHERE seq = ?", (seq,))
        return True

    # -- reads ---------------------------------------------------------------------

    @_sqlite_errors
    def known_sources(self, namespace: str, sources: Sequence[str]) -> set[str]:
        db = self._read()
        if db is None or not sources:
            return set()
        rows = db.execute(
            "SELECT source FROM records WHERE namespace = ? AND source IN "
            "(SELECT value FROM json_each(?))",
            (namespace, json.dumps(list(sources))),
        )
        return {r[0] for r in rows}

    @_sqlite_errors
    def records(self, namespace: str | None = None) -> list[MemoryRecord]:
        db = self._read()
        if db is None:
            return []
        if namespace is None:
            rows = db.execute(f"SELECT {_COLUMNS} FROM records ORDER BY seq")
        else:
            rows = db.execute(
                f"SELECT {_COLUMNS} FROM records WHERE namespace = ? ORDER BY seq", (namespace,)
            )
        return [_record(r) for r in rows]

    @_sqlite_errors
    def size(self, namespace: str) -> int:
        db = self._read()
        if db is None:
            return 0
        return int(
            db.execute("SELECT COUNT(*) FROM records WHERE namespace = ?", (namespace,)).fetchone()[
                0
            ]
        )

    @_sqlite_errors
    def search_keyword(
        self, query: str, namespace: str, limit: int, threshold: float = 0.0
    ) -> list[SearchHit]:
        db = self._read()
        if db is None or threshold > 1.0:
            return []
        needle = query.lower()
        if len(needle) >= 3:
            phrase = '"' + needle.replace('"', '""') + '"'
            rows = db.execute(
                f"SELECT {', '.join('r.' + c for c in _COLUMNS.split(', '))} FROM records_fts f "
                "JOIN records r ON r.seq = f.rowid WHERE records_fts MATCH ? AND r.namespace = ? "
                "AND instr(r.content_lower, ?) > 0 ORDER BY r.seq LIMIT ?",
                (phrase, namespace, needle, limit),
            )
        else:
            rows = db.execute(
                f"SELECT {_COLUMNS} FROM records WHERE namespace = ? AND instr(content_lower, ?) > 0 "
                "ORDER BY seq LIMIT ?",
                (namespace, needle, limit),
            )
        return [SearchHit(_record(r), 1.0, "keyword") for r in rows]

    @_sqlite_errors
    def search_similarity(
        self, query: str, namespace: str, limit: int, threshold: float = 0.0
    ) -> list[SearchHit]:
        db = self._read()
        words = sorted(tokenize(query))
        if db is None or not words:
            return []
        scored = db.execute(
            "SELECT record, CAST(COUNT(*) AS REAL) / (? + ntokens - COUNT(*)) AS score FROM tokens "
            "WHERE namespace = ? AND token IN (SELECT value FROM json_each(?)) GROUP BY record "
            "HAVING score > 0 AND score >= ? ORDER BY score DESC, record ASC LIMIT ?",
            (len(words), namespace, json.dumps(words), threshold, limit),
        ).fetchall()
        return self._hits(db, scored, "jaccard")

    @_sqlite_errors
    def search_vectors(
        self,
        vector: Sequence[float],
        namespace: str,
        model: str,
        limit: int,
        threshold: float = 0.0,
    ) -> list[SearchHit]:
        db = self._read()
        if db is None:
            return []
        rows = db.execute(
            "SELECT v.record, v.vector FROM vectors v JOIN records r ON r.seq = v.record "
            "WHERE r.namespace = ? AND v.model = ? ORDER BY v.record",
            (namespace, model),
        )
        query = list(vector)
        scored = [(seq, _cosine(query, _unpack(blob))) for seq, blob in rows]
        kept = sorted((s for s in scored if s[1] >= threshold), key=lambda s: -s[1])[:limit]
        return self._hits(db, kept, "cosine")

    @_sqlite_errors
    def without_vectors(self, namespace: str, model: str) -> list[MemoryRecord]:
        db = self._read()
        if db is None:
            return []
        rows = db.execute(
            f"SELECT {_COLUMNS} FROM records r WHERE namespace = ? AND NOT EXISTS "
            "(SELECT 1 FROM vectors v WHERE v.record = r.seq AND v.model = ?) ORDER BY seq",
            (namespace, model),
        )
        return [_record(r) for r in rows]

    @_sqlite_errors
    def vector_dimension(self, model: str) -> int | None:
        """The dimension of the vectors stored for `model`; None when there are none."""
        db = self._read()
        if db is None:
            return None
        row = db.execute(
            "SELECT length(vector) FROM vectors WHERE model = ? LIMIT 1", (model,)
        ).fetchone()
        return None if row is None else int(row[0]) // array("f").itemsize

    @_sqlite_errors
    def ids_starting(self, prefix: str, limit: int = 10) -> list[str]:
        db = self._read()
        if db is None:
            return []
        rows = db.execute(
            "SELECT id FROM records WHERE substr(id, 1, ?) = ? ORDER BY seq LIMIT ?",
            (len(prefix), prefix, limit),
        )
        return [r[0] for r in rows]

    @_sqlite_errors
    def get(self, record_id: str) -> MemoryRecord | None:
        db = self._read()
        if db is None:
            return None
        row = db.execute(f"SELECT {_COLUMNS} FROM records WHERE id = ?", (record_id,)).fetchone()
        return None if row is None else _record(row)

    @_sqlite_errors
    def namespaces(self) -> list[str]:
        db = self._read()
        if db is None:
            return []
        return [r[0] for r in db.execute("SELECT DISTINCT namespace FROM records ORDER BY 1")]

    @_sqlite_errors
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
            r[0]: _record(r)
            for r in db.execute(
                f"SELECT {_COLUMNS} FROM records WHERE seq IN (SELECT value FROM json_each(?))",
                (seqs,),
            )
        }
        return [SearchHit(rows[s], score, metric) for s, score in scored if s in rows]  # type: ignore[arg-type]

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None


@contextmanager
def _transaction(db: sqlite3.Connection) -> Iterator[None]:
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def _record(row: Sequence[object]) -> MemoryRecord:
    _, rid, namespace, content, metadata, created_at, source = row
    return MemoryRecord(
        str(content),
        str(namespace),
        str(rid),
        json.loads(str(metadata)),
        str(created_at),
        source if isinstance(source, str) else None,
    )


def _pack(vector: Sequence[float]) -> bytes:
    return array("f", vector).tobytes()


def _unpack(blob: bytes) -> list[float]:
    values = array("f")
    values.frombytes(blob)
    return values.tolist()


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    if len(a) != len(b):
        return 0.0
    dot = math.fsum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(math.fsum(x * x for x in a)) * math.sqrt(math.fsum(y * y for y in b))
    return dot / norm if norm else 0.0
