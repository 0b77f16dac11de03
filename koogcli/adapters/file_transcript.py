"""Append-only transcript: every message of a session, never windowed or compressed.

One JSON object per line in `<data>/transcripts/<session>.jsonl`, each a message plus the
id of the turn that produced it. Lines are appended as messages are produced, so a failed
turn keeps what it produced. A line torn by a crash or a full disk is closed off by the
next append (atomic.append_text) and skipped on read; `unreadable` names the lines the
last read skipped, so the user is warned.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from koogcli.adapters import atomic
from koogcli.adapters.documents import parse_messages
from koogcli.adapters.paths import DataDir
from koogcli.core.errors import CorruptDocumentError
from koogcli.core.messages import Message
from koogcli.core.names import SessionName


class FileTranscriptStore:
    def __init__(self, data: DataDir) -> None:
        self.data = data
        self._skipped: dict[str, list[int]] = {}

    def append(self, session: SessionName, messages: Sequence[Message], turn_id: str) -> None:
        path = self.data.transcript_file(session)
        for m in messages:
            record = {**m.to_dict(), "turn_id": turn_id}
            atomic.append_line(path, json.dumps(record, ensure_ascii=False))

    def read(self, session: SessionName) -> list[Message]:
        return [m for m, _turn in self.entries(session)]

    def sessions(self) -> list[str]:
        folder = self.data.root / "transcripts"
        if not folder.is_dir():
            return []
        return sorted(p.name[: -len(".jsonl")] for p in folder.glob("*.jsonl"))

    def entries(self, session: SessionName) -> list[tuple[Message, str]]:
        path = self.data.transcript_file(session)
        try:
            lines = atomic.read_bytes(path).splitlines()
        except FileNotFoundError:
            return []
        records, numbers, skipped = [], [], []
        for number, line in enumerate(lines, start=1):
            try:
                records.append(json.loads(line))
                numbers.append(number)
            except (ValueError, RecursionError):
                if line.strip():
                    skipped.append(number)  # torn by a crash; everything else is intact
        try:
            kept = list(zip(parse_messages(records, str(path)), records, strict=True))
        except CorruptDocumentError:  # some line parses as JSON but is no message: find it
            kept = []
            for number, record in zip(numbers, records, strict=True):
                try:
                    kept += [(m, record) for m in parse_messages([record], str(path))]
                except CorruptDocumentError:
                    skipped.append(number)
        self._skipped[session.value] = sorted(skipped)
        return [(m, str(record.get("turn_id") or "")) for m, record in kept]

    def used_ids(self, session: SessionName, candidates: Sequence[str]) -> set[str]:
        if not candidates:
            return set()
        try:
            data = atomic.read_bytes(self.data.transcript_file(session))
        except FileNotFoundError:
            return set()
        return {c for c in candidates if json.dumps(c, ensure_ascii=False).encode() in data}

    def unreadable(self, session: SessionName) -> list[int]:
        """Line numbers the last `read` of this session skipped."""
        return list(self._skipped.get(session.value, []))

    def exists(self, session: SessionName) -> bool:
        return self.data.transcript_file(session).exists()

    def rename(self, old: SessionName, new: SessionName) -> None:
        atomic.rename(self.data.transcript_file(old), self.data.transcript_file(new))

    def delete(self, session: SessionName) -> bool:
        return atomic.remove(self.data.transcript_file(session))
