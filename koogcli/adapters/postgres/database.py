"""One connection to koog's PostgreSQL schema, opened on first use.

Why one object: every store of a process (history, transcript, checkpoints, pending
ingestion) shares the connection, so a turn costs one connect and one schema check. Every
error the driver raises becomes a StorageError (exit 3) whose text never holds the
password: people read these messages, and CI logs keep them.

Nothing waits forever: every connection sets `lock_timeout` and `statement_timeout`
(`[storage] lock_timeout_seconds`, `statement_timeout_seconds`). A lock wait that times out
is a LockTimeoutError naming the tables another connection holds locked, and who holds
them; work that may rightly run long (a migration, building a vector index) lifts the
statement limit for its own transaction.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from koogcli.adapters.sql.dialect import POSTGRES
from koogcli.core.errors import LockTimeoutError, StorageError

if TYPE_CHECKING:
    import psycopg

CONNECT_TIMEOUT_SECONDS = 10
IDLE_CHECK = 5.0  # seconds a connection may sit unused before it is checked


def parts(url: str) -> dict[str, str]:
    """host, port, dbname, user and password of a URL (libpq's own parsing and defaults)."""
    import psycopg.conninfo

    try:
        found = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError as exc:
        raise StorageError(f"storage.url is not a PostgreSQL URL: {scrub(str(exc), url)}") from None
    return {k: str(v) for k, v in found.items() if v is not None}


def where(url: str) -> str:
    """`host:port/dbname` as people read it; never the password."""
    found = parts(url)
    host = found.get("host") or found.get("hostaddr") or "localhost"
    return f"{host}:{found.get('port') or 5432}/{found.get('dbname') or found.get('user') or ''}"


def scrub(text: str, url: str) -> str:
    """The text with the URL's password, and the URL itself, taken out."""
    from urllib.parse import urlsplit

    try:
        password = urlsplit(url).password
    except ValueError:
        password = None
    text = text.replace(url, "<storage.url>")
    return text.replace(password, "***") if password else text


def _reason(exc: Exception, url: str) -> str:
    """The driver's first line without its `connection to server at ... failed:` preamble,
    which repeats the host and port already named."""
    import re

    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    first = re.sub(r"^connection failed: (connection to server at .*? failed: )?", "", first)
    return scrub(first.replace("FATAL:  ", ""), url)


class Database:
    """A lazily opened autocommit connection with `search_path` set to koog's schema, one
    per thread: a transaction belongs to its connection, so threads running turns side by
    side (`koog serve`) never share one."""

    dialect = POSTGRES

    def __init__(
        self,
        url: str,
        schema: str,
        check_version: bool = True,
        lock_timeout: float = 10.0,
        statement_timeout: float = 60.0,
    ) -> None:
        self.url = url
        self.schema = schema
        self.check_version = check_version
        self.lock_timeout = lock_timeout
        self.statement_timeout = statement_timeout
        self._local = threading.local()
        self._checked = False  # the schema's version, once per process
        self._all: list[psycopg.Connection[Any]] = []
        self._all_lock = threading.Lock()

    @property
    def _conn(self) -> psycopg.Connection[Any] | None:
        conn: psycopg.Connection[Any] | None = getattr(self._local, "conn", None)
        return conn

    @_conn.setter
    def _conn(self, conn: psycopg.Connection[Any] | None) -> None:
        self._local.conn = conn
        if conn is not None:
            with self._all_lock:
                self._all.append(conn)

    @property
    def _used(self) -> float:
        used: float = getattr(self._local, "used", 0.0)
        return used

    @_used.setter
    def _used(self, value: float) -> None:
        self._local.used = value

    @property
    def where(self) -> str:
        return where(self.url)

    @property
    def label(self) -> str:
        """The database as messages name it."""
        return f"PostgreSQL {self.where}"

    def exists(self) -> bool:
        """The schema is there (it is created on first use)."""
        return True

    def connect(self) -> psycopg.Connection[Any]:
        """A new connection (locks hold their own, so a turn's lock outlives no statement)."""
        import psycopg

        try:
            conn = psycopg.connect(
                self.url,
                autocommit=True,
                connect_timeout=CONNECT_TIMEOUT_SECONDS,
                application_name="koog",
                options=f"-c lock_timeout={round(self.lock_timeout * 1000)} "
                f"-c statement_timeout={round(self.statement_timeout * 1000)}",
            )
        except psycopg.Error as exc:
            raise StorageError(
                f"cannot reach the PostgreSQL database at {self.where}: {_reason(exc, self.url)}",
                hint="check storage.url (or KOOG_DATABASE_URL) and that the server is running",
            ) from None
        with self.errors():
            conn.execute(f"SET search_path TO {self.schema}, public")
        return conn

    def unchecked(self) -> psycopg.Connection[Any]:
        """The shared connection, whatever version the schema is at (migrations, status).
        One idle for a while (the REPL between turns) is checked first: a server restarted
        meanwhile has ended it, and a new one is opened instead of failing the next turn."""
        import time

        import psycopg

        now = time.monotonic()
        if self._conn is not None and not self._conn.closed and now - self._used > IDLE_CHECK:
            try:
                self._conn.execute("SELECT 1")
            except psycopg.Error:
                self._conn.close()
        if self._conn is None or self._conn.closed:
            self._conn = self.connect()
        self._used = now
        return self._conn

    @property
    def conn(self) -> psycopg.Connection[Any]:
        """The shared connection, once the schema is known to be this koog's version."""
        conn = self.unchecked()
        if self.check_version and not self._checked:
            from koogcli.adapters.postgres import migrations

            migrations.ensure_current(self)
            self._checked = True
        return conn

    @contextmanager
    def errors(self) -> Iterator[None]:
        """Driver errors as StorageError naming the database, password scrubbed."""
        import psycopg

        try:
            yield
        except psycopg.errors.LockNotAvailable:
            raise LockTimeoutError(
                f"PostgreSQL at {self.where}: waited {self.lock_timeout:g} s for a lock"
                f"{self._holders()}",
                hint="wait for that connection to finish (or end it), or raise "
                "storage.lock_timeout_seconds",
            ) from None
        except psycopg.errors.QueryCanceled:
            raise StorageError(
                f"PostgreSQL at {self.where}: a statement ran past "
                f"{self.statement_timeout:g} s and was cancelled",
                hint="the server is overloaded or a lock is held; raise "
                "storage.statement_timeout_seconds if the work is that large",
            ) from None
        except psycopg.Error as exc:
            first = scrub(str(exc).strip().splitlines()[0] if str(exc).strip() else "", self.url)
            raise StorageError(
                f"PostgreSQL at {self.where} failed: {first or type(exc).__name__}"
            ) from None

    def _holders(self) -> str:
        """`: table koog.sessions is locked by another connection (pid N, psql)`, from
        what other connections hold on koog's tables now; empty if that cannot be told."""
        import psycopg

        try:
            found = (
                self.unchecked()
                .execute(
                    "SELECT DISTINCT c.relname, l.pid, coalesce(a.application_name, '') "
                    "FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
                    "JOIN pg_namespace n ON n.oid = c.relnamespace "
                    "LEFT JOIN pg_stat_activity a ON a.pid = l.pid "
                    "WHERE n.nspname = %s AND l.granted AND l.pid <> pg_backend_pid() "
                    "AND l.mode IN ('ShareLock', 'ShareRowExclusiveLock', 'ExclusiveLock', "
                    "'AccessExclusiveLock') ORDER BY 1 LIMIT 5",
                    [self.schema],
                )
                .fetchall()
            )
        except psycopg.Error:
            return ""
        if not found:
            return " (a row or advisory lock another connection holds)"
        held = ", ".join(
            f"table {self.schema}.{name} (pid {pid}{f', {app}' if app else ''})"
            for name, pid, app in found
        )
        return f": locked by another connection: {held}"

    def unlimited(self, conn: psycopg.Connection[Any]) -> None:
        """No statement limit for the rest of this transaction: work that may rightly
        take long (a migration, building a vector index)."""
        conn.execute("SET LOCAL statement_timeout = 0")

    @contextmanager
    def transaction(self) -> Iterator[psycopg.Cursor[Any]]:
        """A cursor in one transaction: everything it does lands together or not at all."""
        conn = self.conn
        with self.errors(), conn.transaction(), conn.cursor() as cur:
            yield cur

    def rows(self, sql: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        with self.errors():
            return self.conn.execute(sql, params).fetchall()

    def one(self, sql: str, params: Sequence[object] = ()) -> tuple[Any, ...] | None:
        with self.errors():
            return self.conn.execute(sql, params).fetchone()

    def close(self) -> None:
        """Every thread's connection."""
        with self._all_lock:
            opened, self._all = self._all, []
        for conn in opened:
            conn.close()
        self._local = threading.local()
