"""Every schema koog writes, as one list of versioned steps per database, each step with
its SQLite and PostgreSQL form side by side (SPEC §4).

- `STORE`: `koog.sqlite3` (checkpoints, messages, transcript, journal, pending
  ingestion, forks); its version is `meta.version`.
- `MEMORY`: `memory.sqlite3` (long-term memory); its version is `meta.version`.
- PostgreSQL holds both in one schema, versioned in `koog_schema`: `POSTGRES` is the two
  lists' PostgreSQL forms grouped by `in_postgres` (the schema was numbered before the
  lists were joined, so a PostgreSQL version may hold steps of both).

A new table is one new `Step` here, with both forms (and, keyed by session, its name in
`keyed_by_session`, so renames and deletes carry it); `upgrade` runs the steps a database
lacks, inside the caller's transaction (SQLite: `BEGIN IMMEDIATE`; PostgreSQL: an advisory
lock, adapters/postgres/migrations.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Step:
    version: int
    title: str
    sqlite: tuple[str, ...]
    postgres: str = ""  # "" where PostgreSQL has no such step (a SQLite-only rebuild)
    in_postgres: int = 0  # the version of koog's PostgreSQL schema that holds `postgres`
    # Its tables with a `session` column: renamed and dropped with the session
    # (adapters/sql/moves.py).
    keyed_by_session: tuple[str, ...] = ()


@dataclass(frozen=True)
class Schema:
    """One database's steps, oldest first."""

    format: str  # `meta.format` of the SQLite file
    noun: str  # what the file is, in messages
    steps: tuple[Step, ...]
    writing: str = ""  # who else may be writing it, in a lock's hint

    @property
    def latest(self) -> int:
        return self.steps[-1].version


def script(text: str) -> tuple[str, ...]:
    """Statements of a script without triggers (split on `;`)."""
    return tuple(s.strip() for s in text.split(";") if s.strip())


def upgrade(
    steps: Sequence[tuple[int, Sequence[str]]],
    current: int,
    execute: Callable[[str], object],
    target: int | None = None,
) -> list[int]:
    """Run every step after `current` up to `target` (the last one); the versions run."""
    last = steps[-1][0] if target is None else target
    done = []
    for version, statements in steps:
        if current < version <= last:
            for statement in statements:
                execute(statement)
            done.append(version)
    return done


def sqlite_steps(schema: Schema) -> list[tuple[int, Sequence[str]]]:
    return [(s.version, s.sqlite) for s in schema.steps]


# -- koog.sqlite3 and its PostgreSQL tables ------------------------------------------------

# Message rows are shared by a session's history and its checkpoints, which refer to them
# by row id (`items`), so a checkpoint costs its header plus the messages never seen before.
# SQLite keeps `items` as runs of ids (adapters/sql/dialect.py) and the histories in
# session documents; PostgreSQL keeps them in `sessions`.
_STORE_V1_SQLITE = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session TEXT NOT NULL,
    digest TEXT NOT NULL,
    body TEXT NOT NULL,
    UNIQUE (session, digest)
);
CREATE TABLE transcript (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session TEXT NOT NULL,
    turn_id TEXT NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX transcript_by_session ON transcript (session, id);
CREATE TABLE checkpoints (
    session TEXT NOT NULL,
    seq INTEGER NOT NULL,
    id TEXT NOT NULL,
    kind TEXT NOT NULL,
    manual INTEGER NOT NULL,
    created_at TEXT NOT NULL,
    stored_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP,
    format_version INTEGER NOT NULL,
    header TEXT NOT NULL,
    message_count INTEGER NOT NULL,
    items TEXT NOT NULL,
    PRIMARY KEY (session, seq),
    UNIQUE (session, id)
);
CREATE TABLE row_epochs (session TEXT PRIMARY KEY, epoch INTEGER NOT NULL);
CREATE TABLE compensations (
    position INTEGER PRIMARY KEY AUTOINCREMENT,
    session TEXT NOT NULL,
    call_id TEXT NOT NULL,
    rollback_point TEXT NOT NULL,
    body TEXT NOT NULL,
    UNIQUE (session, call_id, rollback_point)
);
CREATE TABLE pending_ingestion (session TEXT PRIMARY KEY, body TEXT NOT NULL);
"""
_STORE_V1_POSTGRES = """
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
_ORIGINS = """
CREATE TABLE session_origins (
    session {text} PRIMARY KEY, source {text} NOT NULL, at {int} NOT NULL,
    created_at {text} NOT NULL
)
"""
# The transcript's full-text index: each row's text, its JSON's `content`, as words of no
# language in particular (names and code stay as typed). SQLite's is kept by triggers.
_TRANSCRIPT_TEXT_SQLITE = (
    "CREATE VIRTUAL TABLE transcript_text USING fts5(text, tokenize='unicode61')",
    "CREATE TRIGGER transcript_text_in AFTER INSERT ON transcript BEGIN "
    "INSERT INTO transcript_text (rowid, text) VALUES (new.id, "
    "CASE WHEN json_valid(new.body) THEN coalesce(json_extract(new.body, '$.content'), '') "
    "ELSE '' END); END",
    "CREATE TRIGGER transcript_text_out AFTER DELETE ON transcript BEGIN "
    "DELETE FROM transcript_text WHERE rowid = old.id; END",
    # Turn numbers of hits, counted from the index alone.
    "CREATE INDEX transcript_turns ON transcript (session, id, turn_id)",
    "INSERT INTO transcript_text (rowid, text) SELECT id, CASE WHEN json_valid(body) "
    "THEN coalesce(json_extract(body, '$.content'), '') ELSE '' END FROM transcript",
)
# The index without a copy of the text (`content=''`: search reads the transcript's rows),
# so a message's storage is its rows and its index, not twice its text; a row leaves the
# index by FTS5's 'delete' command, given the text it was indexed with.
_ROW_TEXT = "CASE WHEN json_valid({row}.body) THEN coalesce(json_extract({row}.body, '$.content'), '') ELSE '' END"
_TRANSCRIPT_INDEX_SQLITE = (
    "DROP TRIGGER transcript_text_in",
    "DROP TRIGGER transcript_text_out",
    "DROP TABLE transcript_text",
    "CREATE VIRTUAL TABLE transcript_text USING fts5(text, content='', tokenize='unicode61')",
    "CREATE TRIGGER transcript_text_in AFTER INSERT ON transcript BEGIN "
    f"INSERT INTO transcript_text (rowid, text) VALUES (new.id, {_ROW_TEXT.format(row='new')}); "
    "END",
    "CREATE TRIGGER transcript_text_out AFTER DELETE ON transcript BEGIN "
    "INSERT INTO transcript_text (transcript_text, rowid, text) VALUES ('delete', old.id, "
    f"{_ROW_TEXT.format(row='old')}); END",
    f"INSERT INTO transcript_text (rowid, text) SELECT id, {_ROW_TEXT.format(row='transcript')} "
    "FROM transcript",
)
_TRANSCRIPT_TEXT_POSTGRES = """
CREATE FUNCTION transcript_words(body text) RETURNS tsvector
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT to_tsvector('simple'::regconfig, coalesce(body::jsonb ->> 'content', '')) $$;
CREATE INDEX transcript_text ON transcript USING gin (transcript_words(body));
CREATE INDEX transcript_turns ON transcript (session, id, turn_id);
"""

# The archive (SPEC §4a): where each imported session came from, and what was read of each
# source file on each machine (size, mtime, and the reader's own state as JSON).
_ARCHIVE = """
CREATE TABLE archive_sessions (
    session {text} PRIMARY KEY, tool {text} NOT NULL, source_id {text} NOT NULL,
    file {text} NOT NULL, cwd {text}, model {text}, started_at {text}, updated_at {text},
    imported_at {text} NOT NULL
);
CREATE INDEX archive_sessions_by_tool ON archive_sessions (tool);
CREATE TABLE archive_files (
    machine {text} NOT NULL, path {text} NOT NULL, size bigint NOT NULL,
    mtime_ns bigint NOT NULL, state {text} NOT NULL,
    PRIMARY KEY (machine, path)
)
"""

STORE = Schema(
    "koog.store",
    "koog database",
    (
        Step(
            1,
            "sessions, transcripts, checkpoints",
            script(_STORE_V1_SQLITE),
            _STORE_V1_POSTGRES,
            in_postgres=1,
            keyed_by_session=(
                "messages",
                "transcript",
                "checkpoints",
                "compensations",
                "pending_ingestion",
            ),
        ),
        Step(
            2,
            "session origins",
            (_ORIGINS.format(text="TEXT", int="INTEGER"),),
            _ORIGINS.format(text="text", int="integer") + ";",
            in_postgres=3,
            keyed_by_session=("session_origins",),
        ),
        Step(
            3,
            "transcript search",
            _TRANSCRIPT_TEXT_SQLITE,
            _TRANSCRIPT_TEXT_POSTGRES,
            in_postgres=4,
        ),
        Step(4, "transcript search without a copy of the text", _TRANSCRIPT_INDEX_SQLITE),
        Step(
            5,
            "the archive",
            script(_ARCHIVE.format(text="TEXT")),
            _ARCHIVE.format(text="text") + ";",
            in_postgres=6,
            keyed_by_session=("archive_sessions",),
        ),
    ),
)


# -- memory.sqlite3 and its PostgreSQL tables ---------------------------------------------

# Records, Koog's word sets inverted (namespace, word) -> record with each record's word
# count (jaccard), and the lower-cased content (keyword search: SQLite's trigram index).
_MEMORY_V1_SQLITE = """
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
# Full-text search (FTS5, porter over unicode61 without diacritics) and vectors with their
# own row number (the vector index appends by it). PostgreSQL: a `tsvector` per record in
# the configured language, and vectors as `real[]`, the same with or without pgvector
# (with it, each model gets an HNSW index over the arrays cast to its dimension).
_MEMORY_V2_SQLITE = """
ALTER TABLE vectors RENAME TO vectors_v1;
CREATE VIRTUAL TABLE records_text USING fts5(
    content, content='', tokenize='porter unicode61 remove_diacritics 2'
);
CREATE TABLE vectors (
    vid INTEGER PRIMARY KEY AUTOINCREMENT,
    record INTEGER NOT NULL, model TEXT NOT NULL, vector BLOB NOT NULL,
    UNIQUE (record, model)
);
INSERT INTO records_text (rowid, content) SELECT seq, content FROM records;
INSERT INTO vectors (record, model, vector) SELECT record, model, vector FROM vectors_v1
    ORDER BY record, model;
DROP TABLE vectors_v1;
"""
_MEMORY_V2_POSTGRES = """
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
# Sources of records a user forgot (`memory forget`): ingestion never adds them again.
_FORGOTTEN = """
CREATE TABLE {table} (
    namespace {text} NOT NULL, source {text} NOT NULL, forgotten_at {text} NOT NULL,
    PRIMARY KEY (namespace, source)
){rowid}
"""

# The records placed after a message, by the message's digest (core/memory_placement.py):
# ids, scores and metrics, never text; expiring after a while unused.
_PLACEMENTS = """
CREATE TABLE {table} (
    namespace {text} NOT NULL, digest {text} NOT NULL, entries {text} NOT NULL,
    used_at bigint NOT NULL,
    PRIMARY KEY (namespace, digest)
){rowid};
CREATE INDEX {table}_by_use ON {table} (used_at)
"""

MEMORY = Schema(
    "koog.memory",
    "koog memory database",
    writing=" long-term memory",
    steps=(
        Step(1, "long-term memory", script(_MEMORY_V1_SQLITE)),
        Step(
            2,
            "memory full-text search and vectors",
            script(_MEMORY_V2_SQLITE),
            _MEMORY_V2_POSTGRES,
            in_postgres=2,
        ),
        Step(
            3,
            "forgotten memory",
            (_FORGOTTEN.format(table="forgotten", text="TEXT", rowid=" WITHOUT ROWID"),),
            _FORGOTTEN.format(table="memory_forgotten", text="text", rowid="") + ";",
            in_postgres=3,
        ),
        Step(
            4,
            "memory placed by message",
            script(_PLACEMENTS.format(table="placements", text="TEXT", rowid=" WITHOUT ROWID")),
            _PLACEMENTS.format(table="memory_placements", text="text", rowid="") + ";",
            in_postgres=5,
        ),
    ),
)


def postgres_steps() -> list[tuple[int, Sequence[str]]]:
    """PostgreSQL's versions, each the PostgreSQL forms of the steps it holds."""
    versions: dict[int, list[str]] = {}
    for step in (*STORE.steps, *MEMORY.steps):
        if step.postgres:
            versions.setdefault(step.in_postgres, []).append(step.postgres)
    return [(v, ("\n".join(versions[v]),)) for v in sorted(versions)]


POSTGRES_LATEST = max(s.in_postgres for s in (*STORE.steps, *MEMORY.steps))
