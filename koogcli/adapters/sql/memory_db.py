"""The memory database itself: schema, version check and migration, transactions, and
SQLite failures told as koog errors (the store is in adapters/sql/sqlite_memory.py)."""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from koogcli.adapters.sql.sqlite import explain as sqlite_explain
from koogcli.adapters.sql.sqlite import immediate, use_wal
from koogcli.core.errors import KoogError, StorageError, UnknownFormatError

FORMAT, VERSION = "koog.memory", "3"
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
"""
# What version 2 added, for new databases and for migrating version 1 ones.
_V2 = """
CREATE VIRTUAL TABLE records_text USING fts5(
    content, content='', tokenize='porter unicode61 remove_diacritics 2'
);
CREATE TABLE vectors (
    vid INTEGER PRIMARY KEY AUTOINCREMENT,
    record INTEGER NOT NULL, model TEXT NOT NULL, vector BLOB NOT NULL,
    UNIQUE (record, model)
);
"""
# Version 3: sources of records a user forgot, so ingestion never brings them back.
_V3 = """
CREATE TABLE forgotten (
    namespace TEXT NOT NULL, source TEXT NOT NULL, forgotten_at TEXT NOT NULL,
    PRIMARY KEY (namespace, source)
) WITHOUT ROWID;
"""
_FROM_V2 = _V3 + "UPDATE meta SET value = '3' WHERE key = 'version';"
_FROM_V1 = (
    """
ALTER TABLE vectors RENAME TO vectors_v1;
"""
    + _V2
    + """
INSERT INTO records_text (rowid, content) SELECT seq, content FROM records;
INSERT INTO vectors (record, model, vector) SELECT record, model, vector FROM vectors_v1
    ORDER BY record, model;
DROP TABLE vectors_v1;
UPDATE meta SET value = '2' WHERE key = 'version';
"""
)


def _tables(db: sqlite3.Connection) -> set[str]:
    return {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def _meta(db: sqlite3.Connection) -> tuple[str | None, str | None]:
    if "meta" not in _tables(db):
        return None, None
    meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
    return meta.get("format"), meta.get("version")


def _run(db: sqlite3.Connection, script: str) -> None:
    for statement in script.split(";"):
        if statement.strip():
            db.execute(statement)


def explain(path: Path, exc: sqlite3.Error, timeout: float) -> StorageError:
    return sqlite_explain(path, exc, timeout, " long-term memory")


def sqlite_errors(method: Callable[P, R]) -> Callable[P, R]:
    """Reads and writes report SQLite failures as koog errors naming the file."""

    @functools.wraps(method)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(*args, **kwargs)
        except sqlite3.Error as exc:
            store: Any = args[0]
            raise explain(store.path, exc, store.busy_timeout) from exc

    return wrapper


def open_database(path: Path, busy_timeout: float) -> sqlite3.Connection:
    """A connection to a koog memory database: created if empty, migrated if older; a
    file of another format or a newer version is refused (exit 3)."""
    try:
        db = sqlite3.connect(path, timeout=busy_timeout, isolation_level=None)
    except sqlite3.Error as exc:
        raise explain(path, exc, busy_timeout) from exc
    try:
        if not _tables(db):
            with transaction(db):
                if not _tables(db):  # another process may have created it meanwhile
                    _run(db, _SCHEMA + _V2 + _V3)
                    db.executemany(
                        "INSERT INTO meta VALUES (?, ?)",
                        [("format", FORMAT), ("version", VERSION)],
                    )
        for older, script in (("1", _FROM_V1), ("2", _FROM_V2)):
            if _meta(db) == (FORMAT, older):
                with transaction(db):
                    if _meta(db) == (FORMAT, older):  # not migrated by another process meanwhile
                        _run(db, script)
        found = _meta(db)
        if found != (FORMAT, VERSION):
            raise UnknownFormatError(
                f"{path} is not a koog memory database of version {VERSION} "
                f"(format {found[0]!r}, version {found[1]!r})",
                hint="koog never rewrites it; move it aside to start a new one",
            )
        use_wal(db, busy_timeout)
    except sqlite3.Error as exc:
        db.close()
        raise explain(path, exc, busy_timeout) from exc
    except KoogError:
        db.close()
        raise
    return db


transaction = immediate  # one BEGIN IMMEDIATE transaction (adapters/sql/sqlite.py)
