"""The archive's bookkeeping (SPEC §4a), on SQLite and PostgreSQL alike: each imported
session's source (one row, renamed and dropped with its session), and what was read of
each source file on each machine, so an unchanged file is skipped without reading it."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from koogcli.core.messages import utc_now
from koogcli.core.names import SessionName
from koogcli.core.ports import FileRead, SessionSource

if TYPE_CHECKING:
    from koogcli.core.archive import Conversation

_COLUMNS = "session, tool, source_id, file, cwd, model, started_at, updated_at, imported_at"


class SqlArchive:
    def __init__(self, db: Any) -> None:
        self.db = db

    def record(self, found: Sequence[tuple[SessionName, Conversation]]) -> None:
        """Each session's source, in one transaction."""
        if not found:
            return
        now = utc_now()
        with self.db.transaction() as cur:
            for session, conversation in found:
                cur.execute("DELETE FROM archive_sessions WHERE session = %s", [session.value])
                cur.execute(
                    f"INSERT INTO archive_sessions ({_COLUMNS}) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                    [
                        session.value,
                        conversation.tool,
                        conversation.source_id,
                        conversation.file,
                        conversation.cwd,
                        conversation.model,
                        conversation.started_at,
                        conversation.updated_at,
                        now,
                    ],
                )

    def sources(self) -> dict[str, SessionSource]:
        """Every imported session: name → where it came from."""
        if not self.db.exists():
            return {}
        found = self.db.rows(f"SELECT {_COLUMNS} FROM archive_sessions")
        return {str(row[0]): _source(row[1:]) for row in found}

    def source(self, session: SessionName) -> SessionSource | None:
        if not self.db.exists():
            return None
        found = self.db.rows(
            f"SELECT {_COLUMNS} FROM archive_sessions WHERE session = %s", [session.value]
        )
        return _source(found[0][1:]) if found else None

    def files(self, machine: str) -> dict[str, FileRead]:
        if not self.db.exists():
            return {}
        found = self.db.rows(
            "SELECT path, size, mtime_ns, state FROM archive_files WHERE machine = %s", [machine]
        )
        return {
            str(p): FileRead(int(size), int(mtime), _state(state))
            for p, size, mtime, state in found
        }

    def read(self, machine: str, files: Mapping[str, FileRead]) -> None:
        """What was read of these files, in one transaction."""
        if not files:
            return
        with self.db.transaction() as cur:
            for path, seen in files.items():
                cur.execute(
                    "DELETE FROM archive_files WHERE machine = %s AND path = %s", [machine, path]
                )
                cur.execute(
                    "INSERT INTO archive_files VALUES (%s, %s, %s, %s, %s)",
                    [machine, path, seen.size, seen.mtime_ns, json.dumps(dict(seen.state))],
                )


def _source(row: Any) -> SessionSource:
    tool, source_id, file, *rest = (None if v is None else str(v) for v in row)
    return SessionSource(str(tool), str(source_id), str(file), *rest)


def _state(text: object) -> Mapping[str, object]:
    try:
        found = json.loads(str(text))
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}
