"""The embedded databases of the file backend (SPEC §4): `koog.sqlite3` in the data dir,
and `memory.sqlite3` beside it (the same class over the memory's schema).

Checkpoints, their message rows, the transcript, the compensation journal and pending
ingestion live here, in tables shaped like the PostgreSQL backend's, and the same stores
(adapters/sql/) write both. Long-term memory keeps its own file (`memory.sqlite3`): when
it is what failed, the messages waiting for it are safe here.

- WAL journal, `synchronous = NORMAL` for koog.sqlite3: a commit survives the process
  being killed at any instant (the session documents, the source of truth for a history,
  are synced apart); memory keeps SQLite's `FULL`.
- A write is one `BEGIN IMMEDIATE` transaction: it holds the database's write lock from
  its first statement, so writers queue (up to `busy_timeout`) instead of failing halfway,
  and no advisory lock is needed.
- One connection per thread. The schema (adapters/sql/migrations.py) is created when the
  file is new and upgraded when older; a file of another format or a newer version is
  refused (exit 3), never written.
- SQL is written with `%s` / `%(name)s` parameters, as for PostgreSQL; they are turned
  into SQLite's `?` / `:name` here.
"""

from __future__ import annotations

import contextlib
import errno
import os
import random
import re
import sqlite3
import stat
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from koogcli.adapters.paths import ensure_dir, symlink_error
from koogcli.adapters.sql import wal_check
from koogcli.adapters.sql.dialect import SQLITE
from koogcli.adapters.sql.migrations import STORE, Schema, sqlite_steps, upgrade
from koogcli.core.errors import (
    CorruptDocumentError,
    KoogError,
    LockTimeoutError,
    StorageError,
    UnknownFormatError,
)

KEEP = "koog never rewrites it; move it aside to start a new one"


def _mode(path: Path) -> int:
    try:
        return os.lstat(path).st_mode
    except OSError:
        return 0


def _stderr_warning(text: str) -> None:
    sys.stderr.write(f"koog: warning: {text}\n")


_ID_KEY = "database_id"
_NAMED = re.compile(r"%\((\w+)\)s")


class SqliteDatabase:
    dialect = SQLITE
    schema = "main"

    def __init__(
        self,
        path: Path,
        busy_timeout: float = 30.0,
        identity: Path | None = None,
        schema: Schema = STORE,
        synchronous: str = "NORMAL",
        warn: Callable[[str], None] | None = None,
    ) -> None:
        self.path = path
        self.warn = warn or _stderr_warning
        self.busy_timeout = busy_timeout
        self.schema_steps = schema
        self.synchronous = synchronous
        # A file beside the database naming it (`koog.sqlite3.id`): the data dir's session
        # documents were written with that database, so an empty or another one in its
        # place is refused (exit 3) instead of taken for a fresh start.
        self.identity = identity
        self._local = threading.local()

    @property
    def where(self) -> str:
        return str(self.path)

    @property
    def label(self) -> str:
        return str(self.path)

    @property
    def conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            # Setting up can meet SQLITE_BUSY without SQLite's own wait (another process
            # creating the schema or switching the journal mode): retried until the timeout.
            deadline = time.monotonic() + self.busy_timeout
            while conn is None:
                try:
                    conn = self._local.conn = self._open()
                except LockTimeoutError:
                    if time.monotonic() >= deadline:
                        raise
                    time.sleep(0.02)
        return conn

    def exists(self) -> bool:
        """Whether the database was ever created (readers of a new data dir need not)."""
        return (
            getattr(self._local, "conn", None) is not None
            or self.path.exists()
            or (self.identity is not None and self.identity.exists())  # removed: refused
        )

    @contextmanager
    def errors(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as exc:
            raise self._explain(exc) from exc

    @contextmanager
    def transaction(self) -> Iterator[_Cursor]:
        """One write transaction holding the database's write lock from its start."""
        conn = self.conn
        with self.errors(), immediate(conn):
            yield _Cursor(conn.cursor())
        checked: wal_check.Checked | None = getattr(self._local, "checked", None)
        if checked is not None:
            self._local.checked = None
            checked.remember()

    def rows(self, sql: str, params: Sequence[object] | dict[str, object] = ()) -> list[Any]:
        with self.errors():
            return self.conn.execute(_sqlite(sql), params).fetchall()

    def one(self, sql: str, params: Sequence[object] | dict[str, object] = ()) -> Any:
        with self.errors():
            return self.conn.execute(_sqlite(sql), params).fetchone()

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def _open(self) -> sqlite3.Connection:
        ensure_dir(self.path.parent)
        # Looked at, never opened and closed where it exists: closing any descriptor of a
        # file releases every POSIX lock this process holds on it (another thread's
        # connection in koog serve). A new file is made 0600, with no link followed.
        try:
            try:
                kind = os.lstat(self.path).st_mode
            except FileNotFoundError:
                flags = os.O_RDONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                with contextlib.suppress(FileExistsError):  # another opener made it first
                    os.close(os.open(self.path, flags, 0o600))
                kind = os.lstat(self.path).st_mode
        except OSError as exc:
            if exc.errno == errno.ELOOP or stat.S_ISLNK(_mode(self.path)):
                raise symlink_error(self.path) from exc
            raise StorageError(f"cannot open {self.path}: {exc.strerror}") from exc
        if stat.S_ISLNK(kind):
            raise symlink_error(self.path)
        if not stat.S_ISREG(kind):
            raise StorageError(
                f"cannot read {self.path}: it is not a regular file, where koog keeps a file",
                hint="move it aside; koog never reads or removes it",
            )
        wal = self.path.with_name(self.path.name + "-wal")
        checked = wal_check.check(wal)  # read as SQLite's recovery will read it
        damage = checked.damage
        self._local.checked = checked  # remembered once this process writes
        copy = wal_check.keep_copy(wal, damage) if damage is not None else ""
        try:
            conn = sqlite3.connect(self.path, timeout=self.busy_timeout, isolation_level=None)
        except sqlite3.Error as exc:
            raise self._explain(exc) from exc
        try:
            self._schema(conn)  # first: a file of another format is never written
            use_wal(conn, self.busy_timeout)
            conn.execute(f"PRAGMA synchronous={self.synchronous}")
            # A large write leaves the WAL that large; past this, each checkpoint that
            # empties it cuts it back (a message's storage stays a small multiple of it).
            conn.execute(f"PRAGMA journal_size_limit={WAL_LIMIT}")
            if damage is not None:
                self.warn(wal_check.said(wal, damage, copy))
                if copy:  # what SQLite kept goes into the database, the WAL starts over:
                    with contextlib.suppress(sqlite3.Error):  # said once
                        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.Error as exc:
            conn.close()
            raise self._explain(exc) from exc
        except KoogError:
            conn.close()
            raise
        return conn

    def _schema(self, conn: sqlite3.Connection) -> None:
        """Create the tables of a new file, run the steps an older one lacks (once, whoever
        comes first), refuse another format or a newer version."""
        schema, steps = self.schema_steps, sqlite_steps(self.schema_steps)
        if not conn.execute("SELECT 1 FROM sqlite_master").fetchone():
            self._refuse_empty()
            with immediate(conn):
                if not conn.execute("SELECT 1 FROM sqlite_master").fetchone():
                    upgrade(steps, 0, conn.execute)
                    conn.executemany(
                        "INSERT INTO meta VALUES (?, ?)",
                        [("format", schema.format), ("version", str(schema.latest))],
                    )
        found = self._meta(conn)
        older = found.get("version", "")
        if found.get("format") == schema.format and older.isdigit() and int(older) < schema.latest:
            with immediate(conn):
                found = self._meta(conn)
                if found.get("version") == older:  # not upgraded by another process meanwhile
                    upgrade(steps, int(older), conn.execute)
                    conn.execute(
                        "UPDATE meta SET value = ? WHERE key = 'version'", (str(schema.latest),)
                    )
                    found = self._meta(conn)
        if (found.get("format"), found.get("version")) != (schema.format, str(schema.latest)):
            raise UnknownFormatError(
                f"{self.path} is not a {schema.noun} of version {schema.latest} "
                f"(format {found.get('format')!r}, version {found.get('version')!r})",
                hint=KEEP,
            )
        if self.identity is not None:
            self._check_identity(conn, found.get(_ID_KEY))

    @staticmethod
    def _meta(conn: sqlite3.Connection) -> dict[str, str]:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if "meta" not in tables:
            return {}
        return dict(conn.execute("SELECT key, value FROM meta").fetchall())

    def _expected(self) -> str | None:
        assert self.identity is not None
        try:
            return self.identity.read_text().strip() or None
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StorageError(f"cannot read {self.identity}: {exc.strerror}") from exc

    def _refuse_empty(self) -> None:
        """A database with no tables where the data dir names one: emptied or removed."""
        expected = self._expected() if self.identity is not None else None
        if expected is not None:
            raise StorageError(
                f"{self.path} is empty, but this data dir's sessions were written with the "
                f"database {expected[:12]} (their checkpoints, transcript and journal are in "
                "it); nothing was changed",
                hint=f"put that koog.sqlite3 back; to start a new one, remove {self.identity}",
            )

    def _check_identity(self, conn: sqlite3.Connection, found: str | None) -> None:
        assert self.identity is not None
        if found is None:  # created before databases had an identity: given one now
            found = uuid.uuid4().hex
            with immediate(conn):
                conn.execute("INSERT OR IGNORE INTO meta VALUES (?, ?)", (_ID_KEY, found))
                found = str(
                    conn.execute("SELECT value FROM meta WHERE key = ?", (_ID_KEY,)).fetchone()[0]
                )
        expected = self._expected()
        if expected is None:
            from koogcli.adapters import atomic

            atomic.write_text(self.identity, found + "\n")
        elif expected != found:
            raise StorageError(
                f"{self.path} is not the database this data dir's sessions were written with "
                f"(it is {found[:12]}, they name {expected[:12]}: another data dir's?); "
                "nothing was changed",
                hint=f"put this data dir's koog.sqlite3 back; to use this one, remove "
                f"{self.identity}",
            )

    def _explain(self, exc: sqlite3.Error) -> StorageError:
        return explain(self.path, exc, self.busy_timeout, self.schema_steps.writing)


@contextmanager
def immediate(conn: sqlite3.Connection) -> Iterator[None]:
    """One write transaction holding the database's write lock from its first statement;
    rolled back on any exception."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


WAL_LIMIT = 4 << 20


def use_wal(conn: sqlite3.Connection, timeout: float) -> None:
    """Switch a database to WAL, waiting up to `timeout` for other processes.

    The switch needs the file to itself, and SQLite answers "locked" at once, without
    its busy handler, when processes opening a new database at the same time collide,
    so the wait is here.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            if conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal":
                return
            # A refused switch may also answer with the mode it kept.
            if conn.execute("PRAGMA journal_mode=WAL").fetchone()[0] == "wal":
                return
            if time.monotonic() > deadline:
                raise sqlite3.OperationalError("database is locked")
        except sqlite3.OperationalError as exc:
            text = str(exc).lower()
            if ("locked" not in text and "busy" not in text) or time.monotonic() > deadline:
                raise
        time.sleep(random.uniform(0.005, 0.05))


def explain(path: Path, exc: sqlite3.Error, timeout: float, what: str = "") -> StorageError:
    """Locked, read-only and damaged are different problems with different remedies."""
    text = str(exc).lower()
    if "locked" in text or "busy" in text:
        return LockTimeoutError(
            f"{path} stayed locked for {timeout:g}s",
            hint=f"another koog process is writing{what}; retry when it is done",
        )
    if "readonly" in text or "read-only" in text or "unable to open" in text:
        return StorageError(
            f"{path} cannot be written or opened ({exc})",
            hint="check the permissions of the file and of its folder",
        )
    if "no such table" in text or "no such column" in text:
        return CorruptDocumentError(f"{path} lacks part of koog's schema ({exc})", hint=KEEP)
    if isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError):
        return CorruptDocumentError(f"{path} is not a readable SQLite database ({exc})", hint=KEEP)
    return StorageError(f"{path}: {exc}")


class _Cursor:
    """A cursor taking PostgreSQL-style parameters."""

    def __init__(self, cursor: sqlite3.Cursor) -> None:
        self._cursor = cursor

    def execute(self, sql: str, params: Sequence[object] | dict[str, object] = ()) -> _Cursor:
        self._cursor.execute(_sqlite(sql), params)
        return self

    def executemany(self, sql: str, params: Sequence[Sequence[object]]) -> None:
        self._cursor.executemany(_sqlite(sql), params)

    def fetchone(self) -> Any:
        return self._cursor.fetchone()

    def fetchall(self) -> list[Any]:
        return self._cursor.fetchall()

    @property
    def rowcount(self) -> int:
        return self._cursor.rowcount


_CACHE: dict[str, str] = {}


def _sqlite(sql: str) -> str:
    found = _CACHE.get(sql)
    if found is None:
        found = _CACHE[sql] = _NAMED.sub(r":\1", sql).replace("%s", "?")
    return found
