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
)


def describe(db: Database) -> dict[str, object]:
    conn = db.unchecked()
    with db.errors():
        current = migrations.version(conn, db.schema)
        counts: dict[str, int] = {}
        if current:
            for label, table in _COUNTS:
                row = conn.execute(f"SELECT count(*) FROM {db.schema}.{table}").fetchone()
                counts[label] = int(row[0]) if row else 0
        server = conn.info.server_version
    return {
        "backend": "postgresql",
        "where": db.where,
        "schema": db.schema,
        "schema_version": current or 0,
        "program_schema_version": migrations.LATEST,
        "server_version": f"{server // 10000}.{server % 10000}",
        "counts": counts,
    }
