"""An in-memory history store for tests of core/chat_memory.py."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from koogcli.core.errors import ConflictError
from koogcli.core.messages import Message
from koogcli.core.names import SessionName
from koogcli.core.ports import SessionInfo, StoredHistory


class InMemoryHistoryStore:
    """Koog's InMemoryChatHistoryProvider: a dict guarded by a lock, with the sessions
    each read and write named (the part of HistoryStore ChatMemory uses)."""

    def __init__(self) -> None:
        self._data: dict[str, StoredHistory] = {}
        self._lock = threading.Lock()
        self.loads: list[str] = []
        self.stores: list[str] = []

    def read(self, session: SessionName) -> StoredHistory:
        self.loads.append(session.value)
        with self._lock:
            return self._data.get(session.value, StoredHistory([], 0))

    def write(
        self, session: SessionName, messages: Sequence[Message], expected_revision: int | None
    ) -> int:
        self.stores.append(session.value)
        with self._lock:
            current = self._data.get(session.value, StoredHistory([], 0)).revision
            if expected_revision is not None and expected_revision != current:
                raise ConflictError(f"session {session} changed (revision {current})")
            self._data[session.value] = StoredHistory(list(messages), current + 1)
            return current + 1

    def exists(self, session: SessionName) -> bool:
        return session.value in self._data

    def sessions(self) -> list[SessionInfo]:
        return [
            SessionInfo(name, len(h.messages), h.revision, h.updated_at)
            for name, h in sorted(self._data.items())
        ]

    def names(self) -> list[str]:
        return sorted(self._data)

    def rename(self, old: SessionName, new: SessionName) -> None:
        with self._lock:
            self._data[new.value] = self._data.pop(old.value)

    def delete(self, session: SessionName) -> bool:
        with self._lock:
            return self._data.pop(session.value, None) is not None
