"""The PostgreSQL backend (SPEC §4, `[storage] url`): every store in koog's schema, turns
coordinated by advisory locks on connections of their own (locks.py), a whole-session
rename or delete one transaction (nothing is ever left halfway).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager

from koogcli.adapters.postgres import migrations, status
from koogcli.adapters.postgres.database import Database
from koogcli.adapters.postgres.locks import PgTurnLocks
from koogcli.adapters.postgres.sessions import PgHistoryStore
from koogcli.adapters.sql.moves import drop_everywhere, rename_everywhere
from koogcli.adapters.sql.stores import SqlStores
from koogcli.core.names import SessionName
from koogcli.core.ports import MemoryStore


class PostgresBackend(SqlStores):
    def __init__(
        self,
        url: str,
        schema: str,
        language: str = "english",
        timeouts: tuple[float, float] = (10.0, 60.0),
    ) -> None:
        self.db = Database(url, schema, lock_timeout=timeouts[0], statement_timeout=timeouts[1])
        self.language = language
        self._locks = PgTurnLocks(self.db)
        self.history = PgHistoryStore(self.db)
        SqlStores.__init__(self, self.db)

    def memory(self, warn: Callable[[str], None]) -> MemoryStore:
        from koogcli.adapters.postgres.memory import PgMemoryStore

        return PgMemoryStore(self.db, self.language, warn)

    def turn_lock(self, session: SessionName, exclusive: bool) -> AbstractContextManager[None]:
        return self._locks.hold(session.value, exclusive)

    def undo_lock(self, session: SessionName, wait: bool) -> AbstractContextManager[None]:
        return self._locks.hold(session.value, True, kind="undo", wait=wait)

    def turn_owner(self) -> dict[str, object]:
        return self._locks.owner()

    def owner_alive(self, owner: Mapping[str, object] | None) -> bool:
        return self._locks.alive(owner)

    def describe(self) -> dict[str, object]:
        return status.describe(self.db)

    def migrate(self) -> list[int]:
        return migrations.migrate(self.db)

    def rename_session(self, old: SessionName, new: SessionName) -> None:
        rename_everywhere(self.db, old, new, [("sessions", "name")], self.history.renamed(new))

    def drop_session(self, session: SessionName) -> None:
        drop_everywhere(self.db, session, [("sessions", "name")])

    def finish_moves(self) -> list[tuple[str, ...]]:
        return []  # one transaction each: nothing is ever left halfway
