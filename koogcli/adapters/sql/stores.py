"""The stores both backends keep in SQL over one database (checkpoints, transcript,
forks, the archive, pending ingestion): built here once, so a new one is added in one place."""

from __future__ import annotations

from typing import Any

from koogcli.adapters.sql.archive import SqlArchive
from koogcli.adapters.sql.checkpoints import SqlCheckpointStore
from koogcli.adapters.sql.origins import SqlSessionOrigins
from koogcli.adapters.sql.transcript import SqlPendingIngestion, SqlTranscriptStore
from koogcli.core.ports import PendingIngestion, TranscriptAppender


class SqlStores:
    """A backend's shared stores, over its database `db` (the backends inherit them)."""

    def __init__(self, db: Any) -> None:
        self._db = db
        self.transcript = SqlTranscriptStore(db)
        self.origins = SqlSessionOrigins(db)
        self.archive = SqlArchive(db)
        self.checkpoints = SqlCheckpointStore(db)
        self._pending = SqlPendingIngestion(db)

    def background_transcript(self) -> TranscriptAppender | None:
        """A transcript writer in a process of its own, for a long import: on SQLite,
        where indexing would share this process's core; None on PostgreSQL, whose server
        indexes in its own processes already."""
        from koogcli.adapters.sql.sqlite import SqliteDatabase

        if not isinstance(self._db, SqliteDatabase):
            return None
        from koogcli.adapters.sql.transcript_writer import BackgroundTranscript

        _ = self._db.conn  # created and brought up to date before the child writes
        return BackgroundTranscript(self._db.path, self._db.busy_timeout)

    def pending(self) -> PendingIngestion:
        return self._pending

    def prepare(self) -> None:
        """Create or upgrade the database now (a server, before its workers share it)."""
        _ = self._db.conn

    def close(self) -> None:
        """This process's connections (before a fork: each process opens its own)."""
        self._db.close()
