"""Versioned schema migrations for the PostgreSQL backend.

Each migration runs in one transaction holding an advisory lock keyed by the schema name,
so two machines never migrate at once: the second waits, then finds nothing left to do.
An empty schema is created on first use (nothing can be lost); a schema at an older
version is refused until `koog storage migrate` runs, and one written by a newer koog is
refused outright (exit 3), so an old program never misreads new tables.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from koogcli.core.errors import StorageError

if TYPE_CHECKING:
    import psycopg

    from koogcli.adapters.postgres.database import Database

# Message rows are shared by a session's history and its checkpoints, which refer to them
# by row id (`items`), so a checkpoint costs its header plus the messages never seen before.
_V1 = """
CREATE TABLE messages (
    id bigserial PRIMARY KEY,
    session text NOT NULL,
    digest text NOT NULL,
    body text NOT NULL,
    UNIQUE (session, digest)
);
CREATE TABLE sessions (
    name text PRIMARY KEY,
    revision bigint NOT NULL,
    updated_at text NOT NULL,
    items bigint[] NOT NULL,
    message_count integer NOT NULL,
    preview text NOT NULL DEFAULT ''
);
CREATE TABLE transcript (
    id bigserial PRIMARY KEY,
    session text NOT NULL,
    turn_id text NOT NULL,
    body text NOT NULL
);
CREATE INDEX transcript_by_session ON transcript (session, id);
CREATE TABLE checkpoints (
    session text NOT NULL,
    seq integer NOT NULL,
    id text NOT NULL,
    kind text NOT NULL,
    manual boolean NOT NULL,
    created_at text NOT NULL,
    stored_at timestamptz NOT NULL DEFAULT now(),
    format_version integer NOT NULL,
    header text NOT NULL,
    items bigint[] NOT NULL,
    PRIMARY KEY (session, seq),
    UNIQUE (session, id)
);
CREATE TABLE compensations (
    session text NOT NULL,
    call_id text NOT NULL,
    rollback_point text NOT NULL,
    position bigserial,
    body text NOT NULL,
    PRIMARY KEY (session, call_id, rollback_point)
);
CREATE TABLE pending_ingestion (
    session text PRIMARY KEY,
    body text NOT NULL
);
"""

# Long-term memory. `memory_tokens` (Koog's word sets, inverted) answers jaccard,
# `content_lower` keyword search, `search` full-text search (words without diacritics, in
# the configured text search language). Vectors are plain arrays, so the table is the same
# with or without the pgvector extension; with it, each model gets an HNSW index over the
# arrays cast to its dimension (adapters/postgres/memory.py).
_V2 = """
CREATE TABLE memory_records (
    seq bigserial PRIMARY KEY,
    id text NOT NULL UNIQUE,
    namespace text NOT NULL,
    content text NOT NULL,
    content_lower text NOT NULL,
    metadata text NOT NULL,
    created_at text NOT NULL,
    source text,
    search tsvector NOT NULL
);
CREATE INDEX memory_records_by_namespace ON memory_records (namespace, seq);
CREATE UNIQUE INDEX memory_records_by_source ON memory_records (namespace, source)
    WHERE source IS NOT NULL;
CREATE TABLE memory_tokens (
    namespace text NOT NULL,
    token text NOT NULL,
    record bigint NOT NULL REFERENCES memory_records (seq) ON DELETE CASCADE,
    ntokens integer NOT NULL,
    PRIMARY KEY (namespace, token, record)
);
CREATE INDEX memory_tokens_by_record ON memory_tokens (record);
CREATE INDEX memory_records_search ON memory_records USING gin (search);
CREATE TABLE memory_vectors (
    record bigint NOT NULL REFERENCES memory_records (seq) ON DELETE CASCADE,
    model text NOT NULL,
    vector real[] NOT NULL,
    PRIMARY KEY (model, record)
);
CREATE TABLE memory_settings (
    key text PRIMARY KEY,
    value text NOT NULL
);
"""

# Sources of memory records a user forgot (`memory forget`): ingestion never adds them
# again. Where a session forked from (`history fork`).
_V3 = """
CREATE TABLE memory_forgotten (
    namespace text NOT NULL,
    source text NOT NULL,
    forgotten_at text NOT NULL,
    PRIMARY KEY (namespace, source)
);
CREATE TABLE session_origins (
    session text PRIMARY KEY,
    source text NOT NULL,
    at integer NOT NULL,
    created_at text NOT NULL
);
"""

# The transcript's full-text index (`koog history search`): each row's text, its JSON's
# `content`, as words of no language in particular (names and code stay as typed).
_V4 = """
CREATE FUNCTION transcript_words(body text) RETURNS tsvector
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT to_tsvector('simple'::regconfig, coalesce(body::jsonb ->> 'content', '')) $$;
CREATE INDEX transcript_text ON transcript USING gin (transcript_words(body));
CREATE INDEX transcript_turns ON transcript (session, id, turn_id);
"""

MIGRATIONS: tuple[tuple[int, str, str], ...] = (
    (1, "sessions, transcripts, checkpoints", _V1),
    (2, "long-term memory", _V2),
    (3, "forgotten memory, session origins", _V3),
    (4, "transcript search", _V4),
)
LATEST = MIGRATIONS[-1][0]


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
    applied: list[int] = []
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
        for number, _title, sql in MIGRATIONS:
            if number <= (current or 0) or number > target:
                continue
            if number == 2:
                _try_vector_extension(conn)
            conn.execute(sql)
            conn.execute("INSERT INTO koog_schema (version) VALUES (%s)", [number])
            applied.append(number)
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
