"""One connection to koog's PostgreSQL schema, opened on first use.

Why one object: every store of a process (history, transcript, checkpoints, pending
ingestion) shares the connection, so a turn costs one connect and one schema check. Every
error the driver raises becomes a StorageError (exit 3) whose text never holds the
password: people read these messages, and CI logs keep them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from koogcli.core.errors import StorageError

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
    """A lazily opened autocommit connection with `search_path` set to koog's schema."""

    def __init__(self, url: str, schema: str, check_version: bool = True) -> None:
        self.url = url
        self.schema = schema
        self.check_version = check_version
        self._conn: psycopg.Connection[Any] | None = None
        self._checked = False
        self._used = 0.0

    @property
    def where(self) -> str:
        return where(self.url)

    def connect(self) -> psycopg.Connection[Any]:
        """A new connection (locks hold their own, so a turn's lock outlives no statement)."""
        import psycopg

        try:
            conn = psycopg.connect(
                self.url,
                autocommit=True,
                connect_timeout=CONNECT_TIMEOUT_SECONDS,
                application_name="koog",
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
        except psycopg.Error as exc:
            first = scrub(str(exc).strip().splitlines()[0] if str(exc).strip() else "", self.url)
            raise StorageError(
                f"PostgreSQL at {self.where} failed: {first or type(exc).__name__}"
            ) from None

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
        if self._conn is not None:
            self._conn.close()
            self._conn = None
