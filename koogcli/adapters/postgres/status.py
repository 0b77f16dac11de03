"""What `koog storage status` shows of a PostgreSQL backend: where, which schema version,
how much is stored. Never the password."""

from __future__ import annotations

from koogcli.adapters.postgres import migrations
from koogcli.adapters.postgres.database import Database

_COUNTS = (
    ("sessions", "sessions"),
    ("messages", "messages"),
    ("transcript_messages", "transcript"),
    ("checkpoints", "checkpoints"),
    ("memory_records", "memory_records"),
)


def describe(db: Database) -> dict[str, object]:
    conn = db.unchecked()
    with db.errors():
        current = migrations.version(conn, db.schema)
        counts: dict[str, int] = {}
        for label, table in _COUNTS:
            exists = conn.execute("SELECT to_regclass(%s)", [f"{db.schema}.{table}"]).fetchone()
            if exists and exists[0] is not None:
                row = conn.execute(f"SELECT count(*) FROM {db.schema}.{table}").fetchone()
                counts[label] = int(row[0]) if row else 0
        vector = conn.execute(
            "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
        ).fetchone()
        server = conn.info.server_version
    return {
        "backend": "postgresql",
        "where": db.where,
        "schema": db.schema,
        "schema_version": current or 0,
        "program_schema_version": migrations.LATEST,
        "server_version": f"{server // 10000}.{server % 10000}",
        "pgvector": vector[0] if vector else None,
        "counts": counts,
    }
