"""Moving a data dir of the older layout (adapters/files/legacy/files.py) into `koog.sqlite3`.

Kill-safe: each part is written so that writing it again changes nothing (checkpoints by
id, journal entries by call and rollback point, the transcript and pending ingestion only
where the database has none for the session), and the old files go only once their
contents are committed. Killed at any point and run again, the result is the same as an
uninterrupted run, and nothing is lost. One process moves at a time.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from koogcli.adapters import atomic
from koogcli.adapters.files.legacy import files
from koogcli.adapters.sql import rows
from koogcli.core.errors import KoogError
from koogcli.core.names import SessionName


def pending_layout(root: Path) -> bool:
    """Whether anything of the older layout is left (three looks at the data dir)."""
    return any((root / f).is_dir() for f in ("checkpoints", "transcripts", "memory-pending"))


def migrate(root: Path, backend: Any) -> list[str]:
    """Move every session; what could not be moved, named (the rest moved regardless)."""
    problems: list[str] = []
    with atomic.file_lock(root / "locks" / ".migrate.lock"):
        for name in files.names(root):
            try:
                session = SessionName.parse(name)
            except KoogError:
                continue  # no name koog would have written
            found = files.read(root, name)
            _move(backend, session, found)
            problems += found.problems
            for path in found.paths:
                if path.is_dir():
                    shutil.rmtree(path)
                else:
                    atomic.remove(path)
        for folder in ("checkpoints", "transcripts", "memory-pending"):
            place = root / folder
            if place.is_dir() and not any(place.iterdir()):
                place.rmdir()
    return problems


def _move(backend: Any, session: SessionName, found: files.Session) -> None:
    for checkpoint in found.checkpoints:
        backend.checkpoints.put(checkpoint)
    if found.journal:
        backend.checkpoints.record_compensations(session, found.journal)
    db = backend.db
    if found.transcript:
        with db.transaction() as cur:
            cur.execute("SELECT 1 FROM transcript WHERE session = %s LIMIT 1", [session.value])
            if cur.fetchone() is None:
                cur.executemany(
                    "INSERT INTO transcript (session, turn_id, body) VALUES (%s, %s, %s)",
                    [(session.value, turn, rows.body(m)) for m, turn in found.transcript],
                )
    if found.pending and not backend.pending().load(session):
        backend.pending().save(session, found.pending)
