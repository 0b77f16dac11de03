"""What a backend holds of a session, as bytes: the same bytes before and after means
nothing was written (files: the document and its append log; PostgreSQL: the session row
and every message row it refers to)."""

from __future__ import annotations

from typing import Any

from koogcli.core.names import SessionName


def stored_bytes(ctx: Any, session: SessionName) -> bytes:
    db = getattr(ctx.history, "db", None)
    if db is None:
        path = ctx.data.session_file(session)
        log = path.with_name(path.name[: -len(".json")] + ".log")
        return path.read_bytes() + (log.read_bytes() if log.exists() else b"")
    row = db.one(
        "SELECT revision, updated_at, items FROM sessions WHERE name = %s", [session.value]
    )
    assert row is not None, f"no session {session.value} stored"
    bodies = db.rows("SELECT id, body FROM messages WHERE id = ANY(%s)", [row[2]])
    by_id = dict(bodies)
    return repr((row[0], row[1], [by_id[i] for i in row[2]])).encode()
