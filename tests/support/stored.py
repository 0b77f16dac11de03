"""What a backend holds of a session, as bytes: the same bytes before and after means
nothing was written (files: the document and its append log; PostgreSQL: the session row
and every message row it refers to)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
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


def checkpoint_doc(folder: Path, cid: str) -> dict[str, Any]:
    """The stored document of one checkpoint in a session's checkpoints.jsonl."""
    docs = [json.loads(line) for line in (folder / "checkpoints.jsonl").read_text().splitlines()]
    return next(d for d in reversed(docs) if d.get("id") == cid)


def edit_checkpoint(folder: Path, cid: str, line: Callable[[dict[str, Any]], str]) -> Path:
    """Replace the line of one checkpoint in checkpoints.jsonl (as a hand edit or a newer
    koog would); returns the file."""
    pack = folder / "checkpoints.jsonl"
    lines = pack.read_text().splitlines()
    for i, text in enumerate(lines):
        doc = json.loads(text)
        if doc.get("id") == cid:
            lines[i] = line(doc)
        elif doc.get("format") == "koog.checkpoint-pack":  # a new file, as koog rewrites it
            lines[i] = json.dumps({**doc, "file": f"edited-{cid}-{doc['file']}"})
    edited = pack.with_name("edited.tmp")
    edited.write_text("".join(f"{text}\n" for text in lines))
    edited.replace(pack)
    return pack


def roll(
    ctx: Any,
    session: SessionName,
    target: Any,
    compensate: bool = True,
    *,
    force: bool = False,
    compensate_imported: bool = False,
) -> Any:
    """A rollback to `target` through the one rollback service, as the CLI runs it."""
    from koogcli.services import rollback

    options = rollback.Options(compensate, force, compensate_imported)
    return rollback.execute(ctx, rollback.plan(ctx, session, target, options))
