"""Where a session forked from (`history fork`), on SQLite and PostgreSQL alike: one row
per fork, renamed and dropped with its session (adapters/sql/moves.py)."""

from __future__ import annotations

from typing import Any

from koogcli.core.messages import utc_now
from koogcli.core.names import SessionName


class SqlSessionOrigins:
    def __init__(self, db: Any) -> None:
        self.db = db

    def record(self, session: SessionName, source: SessionName, at: int) -> None:
        with self.db.transaction() as cur:
            cur.execute("DELETE FROM session_origins WHERE session = %s", [session.value])
            cur.execute(
                "INSERT INTO session_origins VALUES (%s, %s, %s, %s)",
                [session.value, source.value, at, utc_now()],
            )

    def all(self) -> dict[str, tuple[str, int]]:
        """Every fork: session → (source, message count taken)."""
        if not self.db.exists():
            return {}
        found = self.db.rows("SELECT session, source, at FROM session_origins")
        return {str(s): (str(source), int(at)) for s, source, at in found}
