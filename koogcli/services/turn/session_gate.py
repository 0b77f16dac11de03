"""One request at a time per session in this process (SPEC §6); the turn lock orders
processes. A request that waits past `[serve] session_wait_seconds` is refused as busy."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from koogcli.core.errors import KoogError
from koogcli.core.names import SessionName


class SessionBusyError(KoogError):
    """Another request on the same session held it past the wait bound."""

    exit_code = 3


class SessionGate:
    """One request at a time per session, in this process (the turn lock orders processes)."""

    def __init__(self, wait_seconds: float) -> None:
        self.wait_seconds = wait_seconds
        self._guard = threading.Lock()
        self._locks: dict[str, tuple[threading.Lock, int]] = {}

    @contextmanager
    def hold(self, session: SessionName) -> Iterator[None]:
        with self._guard:
            lock, users = self._locks.get(session.value, (threading.Lock(), 0))
            self._locks[session.value] = (lock, users + 1)
        try:
            if not lock.acquire(timeout=self.wait_seconds):
                raise SessionBusyError(
                    f"session {session.value!r} stayed busy with another request for "
                    f"{self.wait_seconds:g}s",
                    hint="send one request per session at a time, or raise "
                    "[serve] session_wait_seconds",
                )
            try:
                yield
            finally:
                lock.release()
        finally:
            with self._guard:
                lock, users = self._locks[session.value]
                if users == 1:
                    del self._locks[session.value]
                else:
                    self._locks[session.value] = (lock, users - 1)
