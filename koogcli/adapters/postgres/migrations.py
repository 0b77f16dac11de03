"""Versioned schema migrations for the PostgreSQL backend.

Each migration runs in one transaction holding an advisory lock keyed by the schema name,
so two machines never migrate at once: the second waits, then finds nothing left to do.
An empty schema is created on first use (nothing can be lost); a schema at an older
version is refused until `koog storage migrate` runs, and one written by a newer koog is
refused outright (exit 3), so an old program never misreads new tables.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from koogcli.adapters.sql.migrations import POSTGRES_LATEST, postgres_steps, upgrade
from koogcli.core.errors import StorageError

if TYPE_CHECKING:
    import psycopg

    from koogcli.adapters.postgres.database import Database

STEPS = postgres_steps()  # adapters/sql/migrations.py: both forms of every step
LATEST = POSTGRES_LATEST


def version(conn: psycopg.Connection[Any], schema: str) -> int | None:
    """The schema's version; None when koog's tables are not there at all."""
    found = conn.execute(
        "SELECT 1 FROM information_schema.tables WHERE table_schema = %s "
        "AND table_name = 'koog_schema'",
        [schema],
    ).fetchone()
    if found is None:
        return None
    row = conn.execute(f"SELECT max(version) FROM {schema}.koog_schema").fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def migrate(db: Database, target: int = LATEST) -> list[int]:
    """Apply every migration up to `target` not applied yet; the versions applied."""
    conn = db.unchecked()
    schema = db.schema
    with db.errors(), conn.transaction():
        db.unlimited(conn)
        conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [f"koog:{schema}"])
        current = version(conn, schema)
        _refuse_newer(db, current)
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {schema}.koog_schema ("
            "version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        conn.execute(f"SET LOCAL search_path TO {schema}, public")
        if (current or 0) < 2 <= target:
            _try_vector_extension(conn)

        def run(statement: str) -> None:
            conn.execute(statement)

        applied = upgrade(STEPS, current or 0, run, target)
        for number in applied:
            conn.execute("INSERT INTO koog_schema (version) VALUES (%s)", [number])
    return applied


def _try_vector_extension(conn: psycopg.Connection[Any]) -> None:
    """pgvector when the server has it and this user may enable it; without it vector
    search is exact (and says so)."""
    import psycopg

    try:
        with conn.transaction():  # a savepoint: a refusal leaves the migration intact
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public")
    except psycopg.Error:
        pass


def ensure_current(db: Database) -> None:
    """Called once per connection: create an empty schema, refuse an older or newer one."""
    with db.errors():
        current = version(db.unchecked(), db.schema)
    if current is None:
        migrate(db)
        return
    _refuse_newer(db, current)
    if current < LATEST:
        raise StorageError(
            f"the koog schema {db.schema!r} at {db.where} is at version {current}; "
            f"this koog needs version {LATEST}",
            hint="run `koog storage migrate` (every machine sharing it then needs this koog)",
        )


def _refuse_newer(db: Database, current: int | None) -> None:
    if current is not None and current > LATEST:
        raise StorageError(
            f"the koog schema {db.schema!r} at {db.where} is at version {current}, newer "
            f"than this koog (version {LATEST})",
            hint="use a newer koog; nothing was changed",
        )
