"""ChatMemory turn semantics (KOOG_SEMANTICS §1, newest behaviour).

- Load: history = preprocess(stored); an empty history keeps the live prompt intact,
  otherwise the prompt is the live system messages + the history without its system
  messages (stored system messages are ignored, the live system prompt always wins).
- Store: once, when the turn completes: preprocess(entire prompt). A failed turn stores
  nothing, so the previous history is untouched.
- Lost updates: a store names the revision it loaded. On conflict the current history is
  reloaded, this turn's new messages re-appended and the result preprocessed again.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass

from koogcli.core.errors import ConflictError, LockTimeoutError
from koogcli.core.messages import Message, without_system
from koogcli.core.names import SessionName
from koogcli.core.ports import HistoryStore, SessionInfo, StoredHistory
from koogcli.core.preprocessors import Pipeline

MAX_STORE_ATTEMPTS = 200


def merge(live_prompt: Sequence[Message], history: Sequence[Message]) -> list[Message]:
    """Live system messages + history without its system messages.

    A stored system message with the same text as a live one stands in for it, keeping its
    id and timestamp: the history stays an extension of earlier snapshots (restore points,
    rollback's prefix rule) and the content sent is the live prompt either way.
    """
    if not history:
        return list(live_prompt)
    stored = {m.text: m for m in history if m.role == "system"}
    live = [stored.get(m.text, m) for m in live_prompt if m.role == "system"]
    return live + without_system(history)


@dataclass(frozen=True, slots=True)
class LoadedPrompt:
    messages: list[Message]
    revision: int


@dataclass(frozen=True, slots=True)
class Committed:
    messages: list[Message]
    revision: int


class ChatMemory:
    def __init__(self, store: HistoryStore, pipeline: Pipeline) -> None:
        self.store = store
        self.pipeline = pipeline

    def load(self, session: SessionName, live_prompt: Sequence[Message]) -> LoadedPrompt:
        return self.prepare(self.store.read(session), live_prompt)

    def prepare(self, stored: StoredHistory, live_prompt: Sequence[Message]) -> LoadedPrompt:
        return LoadedPrompt(merge(live_prompt, self.pipeline(stored.messages)), stored.revision)

    def commit(
        self,
        session: SessionName,
        live_prompt: Sequence[Message],
        loaded: LoadedPrompt,
        new_messages: Sequence[Message],
    ) -> Committed:
        """Store preprocess(prompt + new), re-applying on top of concurrent writers."""
        candidate = self.pipeline([*loaded.messages, *new_messages])
        revision = loaded.revision
        for _ in range(MAX_STORE_ATTEMPTS):
            try:
                written = self.store.write(session, candidate, expected_revision=revision)
                return Committed(candidate, written)
            except ConflictError:
                current = self.load(session, live_prompt)
                # Messages already there (a resumed turn whose store had landed) are not
                # appended twice.
                present = {m.id for m in current.messages}
                missing = [m for m in new_messages if m.id not in present]
                candidate = self.pipeline([*current.messages, *missing])
                revision = current.revision
        raise LockTimeoutError(
            f"session {session} kept changing under this turn; gave up after "
            f"{MAX_STORE_ATTEMPTS} attempts"
        )


class InMemoryHistoryStore:
    """Koog's InMemoryChatHistoryProvider: a dict guarded by a lock (tests, embedding)."""

    def __init__(self) -> None:
        self._data: dict[str, StoredHistory] = {}
        self._lock = threading.Lock()
        self.loads: list[str] = []
        self.stores: list[str] = []

    def load(self, session: SessionName) -> list[Message]:
        return list(self.read(session).messages)

    def store(self, session: SessionName, messages: Sequence[Message]) -> None:
        self.write(session, messages, expected_revision=None)

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

    def delete(self, session: SessionName) -> bool:
        with self._lock:
            return self._data.pop(session.value, None) is not None
