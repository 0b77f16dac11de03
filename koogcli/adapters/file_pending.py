"""FilePendingIngestion: `<data>/memory-pending/<session>.json`, the messages of stored turns
whose ingestion into long-term memory failed (SPEC §5.12).

The list is kept outside the memory database on purpose: the database may be what failed.
It is written atomically and removed once the messages are ingested; ingestion's source
keys make a retry add each message at most once.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from koogcli.adapters import atomic
from koogcli.adapters.documents import dump_pending, parse_pending
from koogcli.adapters.paths import DataDir
from koogcli.core.errors import CorruptDocumentError
from koogcli.core.messages import Message
from koogcli.core.names import SessionName


class FilePendingIngestion:
    def __init__(self, data: DataDir) -> None:
        self.data = data

    def _path(self, session: SessionName) -> Path:
        return self.data.pending_ingest_file(session)

    def load(self, session: SessionName) -> list[Message]:
        path = self._path(session)
        if not path.exists():
            return []
        try:
            return parse_pending(atomic.read_json(path), str(path))
        except CorruptDocumentError as err:
            raise CorruptDocumentError(err.message, hint=atomic.CORRUPT_HINT) from None

    def save(self, session: SessionName, messages: Sequence[Message]) -> None:
        atomic.write_text(self._path(session), dump_pending(session.value, messages))

    def rename(self, old: SessionName, new: SessionName) -> None:
        atomic.rename(self._path(old), self._path(new))

    def clear(self, session: SessionName) -> None:
        atomic.remove(self._path(session))
