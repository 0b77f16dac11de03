"""Turn locks and turn owners across machines, from PostgreSQL's own bookkeeping.

A file lock only coordinates processes of one machine. Here a running turn holds a shared
advisory lock on a connection of its own, and a resume takes it exclusively, so a resume
never runs beside a live turn on any machine. A turn's owner names that connection's server
process and start time: the server ends the connection the moment its client dies (killed,
crashed, machine gone), so "is the owner alive" is one look at `pg_stat_activity`,
whatever host ran the turn.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from koogcli.adapters import processes
from koogcli.core.errors import LockTimeoutError

if TYPE_CHECKING:
    from koogcli.adapters.postgres.database import Database


class PgTurnLocks:
    def __init__(self, db: Database, timeout: float = 30.0) -> None:
        self.db = db
        self.timeout = timeout
        self._backend: tuple[int, str] | None = None  # the lock connection while held

    @contextmanager
    def hold(
        self, session: str, exclusive: bool, kind: str = "turn", wait: bool = True
    ) -> Iterator[None]:
        """`kind` "turn": the turn lock (its connection names the turn's owner); "undo":
        the lock a session's compensations run under."""
        conn = self.db.connect()
        function = "pg_try_advisory_lock" if exclusive else "pg_try_advisory_lock_shared"
        key = f"koog:{self.db.schema}:{kind}:{session}"
        try:
            with self.db.errors():
                deadline = time.monotonic() + (self.timeout if wait else 0.0)
                pause = 0.005
                while not conn.execute(
                    f"SELECT {function}(hashtextextended(%s, 0))", [key]
                ).fetchone()[0]:  # type: ignore[index]
                    if time.monotonic() >= deadline:
                        busy = "a turn" if kind == "turn" else "a rollback"
                        raise LockTimeoutError(
                            f"session {session} is busy: another koog is running {busy} in it",
                            hint="wait for it to finish, or run again in a moment",
                        )
                    time.sleep(pause)
                    pause = min(pause * 2, 0.2)
                row = conn.execute(
                    "SELECT pg_backend_pid(), backend_start::text FROM pg_stat_activity "
                    "WHERE pid = pg_backend_pid()"
                ).fetchone()
            outer = self._backend
            if kind == "turn":
                self._backend = (int(row[0]), str(row[1])) if row else None
            try:
                yield
            finally:
                self._backend = outer
        finally:
            conn.close()  # the server releases the lock with the connection

    def owner(self) -> dict[str, object]:
        """This process, and the connection that holds its turn lock."""
        owner: dict[str, object] = {**processes.current_owner(), "host": socket.gethostname()}
        if self._backend is not None:
            owner["backend"], owner["backend_start"] = self._backend
        return owner

    def alive(self, owner: Mapping[str, Any] | None) -> bool:
        if not isinstance(owner, Mapping):
            return False
        backend, started = owner.get("backend"), owner.get("backend_start")
        if isinstance(backend, int) and isinstance(started, str):
            found = self.db.one(
                "SELECT 1 FROM pg_stat_activity WHERE pid = %s AND backend_start::text = %s",
                [backend, started],
            )
            return found is not None
        if owner.get("host") not in (None, socket.gethostname()):
            return False  # no lock connection recorded and another machine: cannot be told
        return processes.owner_alive(owner)
