"""Append-only transcript: every message of a session, never windowed or compressed.

One JSON object per line in `<data>/transcripts/<session>.jsonl`, each a message plus the
id of the turn that produced it. Lines are appended as messages are produced, so a failed
turn keeps what it produced. A torn last line (a crash mid-append) is skipped on read.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from koogcli.adapters import atomic
from koogcli.adapters.documents import parse_messages
from koogcli.adapters.paths import DataDir
from koogcli.core.errors import CorruptDocumentError, StorageError
from koogcli.core.messages import Message
from koogcli.core.names import SessionName


class FileTranscriptStore:
    def __init__(self, data: DataDir) -> None:
        self.data = data

    def append(self, session: SessionName, messages: Sequence[Message], turn_id: str) -> None:
        path = self.data.transcript_file(session)
        for m in messages:
            record = {**m.to_dict(), "turn_id": turn_id}
            atomic.append_line(path, json.dumps(record, ensure_ascii=False))

    def read(self, session: SessionName) -> list[Message]:
        path = self.data.transcript_file(session)
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            return []
        except (OSError, UnicodeDecodeError) as exc:
            raise StorageError(f"cannot read transcript {path}: {exc}") from exc
        records = []
        for number, line in enumerate(lines, start=1):
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as exc:
                if number == len(lines):
                    break  # a crash mid-append; everything before it is intact
                raise CorruptDocumentError(
                    f"{path} line {number} is not valid JSON", hint=atomic.CORRUPT_HINT
                ) from exc
        return parse_messages(records, str(path))

    def exists(self, session: SessionName) -> bool:
        return self.data.transcript_file(session).exists()

    def delete(self, session: SessionName) -> bool:
        return atomic.remove(self.data.transcript_file(session))
