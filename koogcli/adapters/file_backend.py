"""The file backend (SPEC §4, the embedded default): session documents with their append
logs, transcripts, checkpoints and pending ingestion under the data dir, long-term memory
in `memory.sqlite3`. Turns are coordinated by file locks (flock: released by the kernel
when a process dies) and whole-session renames and deletes by intents (session_moves.py).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from functools import cached_property

from koogcli.adapters import atomic, processes
from koogcli.adapters.file_checkpoints import FileCheckpointStore
from koogcli.adapters.file_history import FileHistoryStore
from koogcli.adapters.file_transcript import FileTranscriptStore
from koogcli.adapters.paths import DataDir
from koogcli.adapters.session_moves import FileSessionMoves, Parts
from koogcli.core.names import SessionName
from koogcli.core.ports import MemoryStore, PendingIngestion


def stderr_warning(text: str) -> None:
    sys.stderr.write(f"koog: warning: {text}\n")


class FileBackend:
    def __init__(self, data: DataDir, warn: Callable[[str], None] = stderr_warning) -> None:
        self.data = data
        self.history = FileHistoryStore(data, warn=warn)
        self.transcript = FileTranscriptStore(data)
        self.checkpoints = FileCheckpointStore(data)
        pending = self.pending()
        self._moves = FileSessionMoves(
            data,
            Parts(
                rename=[
                    self.checkpoints.rename,
                    self.transcript.rename,
                    pending.rename,
                    self.history.rename,
                ],
                delete=[
                    self.history.delete,
                    self.transcript.delete,
                    self.checkpoints.drop,
                    pending.clear,
                ],
            ),
        )

    def pending(self) -> PendingIngestion:
        return self._pending

    @cached_property
    def _pending(self) -> PendingIngestion:
        from koogcli.adapters.file_pending import FilePendingIngestion

        return FilePendingIngestion(self.data)

    def memory(self, warn: Callable[[str], None]) -> MemoryStore:
        from koogcli.adapters.sqlite_memory import SqliteMemoryStore

        return SqliteMemoryStore(self.data.memory_file)

    def turn_lock(self, session: SessionName, exclusive: bool) -> AbstractContextManager[None]:
        return atomic.shared_or_exclusive(self.data.lock_file(session, "turn"), exclusive)

    def turn_owner(self) -> dict[str, object]:
        return processes.current_owner()

    def owner_alive(self, owner: Mapping[str, object] | None) -> bool:
        return processes.owner_alive(owner)

    def describe(self) -> dict[str, object]:
        return {"backend": "files", "where": str(self.data.root)}

    def migrate(self) -> list[int]:
        return []  # files carry their format version in each document: nothing to migrate

    def rename_session(self, old: SessionName, new: SessionName) -> None:
        self._moves.rename(old, new)

    def drop_session(self, session: SessionName) -> None:
        self._moves.delete(session)

    def finish_moves(self) -> list[tuple[str, ...]]:
        return self._moves.finish()
