"""The file backend (SPEC §4, the embedded default): session documents with their append
logs under the data dir (the product's contract: JSON a person can read), and everything
else — checkpoints and their message rows, the transcript, the compensation journal,
pending ingestion — in `koog.sqlite3` beside them, written by the same stores as the
PostgreSQL backend's (adapters/sql/). Long-term memory is `memory.sqlite3`.

Turns are coordinated by file locks (flock: released by the kernel when a process dies).
A whole-session rename or delete writes an intent first (session_moves.py); its database
part is one transaction. A data dir of an older layout (a file per transcript, folders of
checkpoints) is moved into the database when the backend is opened (adapters/files/legacy/).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager

from koogcli.adapters import atomic, processes
from koogcli.adapters.files.history import FileHistoryStore
from koogcli.adapters.files.moves import FileSessionMoves, Parts
from koogcli.adapters.paths import DataDir
from koogcli.adapters.sql.moves import drop_everywhere, rename_everywhere
from koogcli.adapters.sql.sqlite import SqliteDatabase
from koogcli.adapters.sql.stores import SqlStores
from koogcli.core.names import SessionName
from koogcli.core.ports import MemoryStore

DATABASE = "koog.sqlite3"
_COUNTED = (
    ("messages", "messages"),
    ("transcript_messages", "transcript"),
    ("checkpoints", "checkpoints"),
)


def stderr_warning(text: str) -> None:
    sys.stderr.write(f"koog: warning: {text}\n")


class FileBackend(SqlStores):
    def __init__(self, data: DataDir, warn: Callable[[str], None] = stderr_warning) -> None:
        self.data = data
        self.warn = warn
        self.db = SqliteDatabase(
            data.root / DATABASE, identity=data.root / f"{DATABASE}.id", warn=warn
        )
        self.history = FileHistoryStore(data, warn=warn)
        SqlStores.__init__(self, self.db)
        self._moves = FileSessionMoves(
            data,
            Parts(
                rename=[self._rename_rows, self.history.rename],
                delete=[self.history.delete, self._drop_rows],
            ),
        )
        from koogcli.adapters.files.legacy.migrate import pending_layout

        self._moved_at_open = bool(pending_layout(data.root) and self._migrate())

    def memory(self, warn: Callable[[str], None]) -> MemoryStore:
        from koogcli.adapters.sql.sqlite_memory import SqliteMemoryStore

        return SqliteMemoryStore(self.data.memory_file)

    def turn_lock(self, session: SessionName, exclusive: bool) -> AbstractContextManager[None]:
        return atomic.shared_or_exclusive(self.data.lock_file(session, "turn"), exclusive)

    def undo_lock(self, session: SessionName, wait: bool) -> AbstractContextManager[None]:
        path = self.data.lock_file(session, "undo")
        return atomic.file_lock(path, 30.0 if wait else 0.0, "rolling this session back")

    def turn_owner(self) -> dict[str, object]:
        return processes.current_owner()

    def owner_alive(self, owner: Mapping[str, object] | None) -> bool:
        return processes.owner_alive(owner)

    def describe(self) -> dict[str, object]:
        counts = {"sessions": len(self.history.names())}
        if self.db.exists():
            for label, table in _COUNTED:
                counts[label] = int(self.db.one(f"SELECT count(*) FROM {table}")[0])
        return {
            "backend": "files",
            "where": str(self.data.root),
            "database": str(self.db.path),
            "counts": counts,
        }

    def migrate(self) -> list[int]:
        """[1] when an older layout was moved into the database (by this call, or when
        this backend was opened: every command does that first), else []."""
        return [1] if self._moved_at_open or self._migrate() else []

    def _migrate(self) -> bool:
        from koogcli.adapters.files.legacy.migrate import migrate, pending_layout

        if not pending_layout(self.data.root):
            return False
        for problem in migrate(self.data.root, self):
            self.warn(problem)
        return True

    def rename_session(self, old: SessionName, new: SessionName) -> None:
        self._moves.rename(old, new)

    def drop_session(self, session: SessionName) -> None:
        self._moves.delete(session)

    def finish_moves(self) -> list[tuple[str, ...]]:
        return self._moves.finish()

    def _rename_rows(self, old: SessionName, new: SessionName) -> None:
        rename_everywhere(self.db, old, new)

    def _drop_rows(self, session: SessionName) -> None:
        drop_everywhere(self.db, session)
