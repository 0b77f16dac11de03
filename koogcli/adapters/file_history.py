"""FileHistoryStore: one JSON document per session under `<data>/sessions/` (SPEC §4).

Invariants:
- Writes are atomic (adapters/atomic.py) and serialised per session by a file lock.
- `write` checks the revision the caller loaded; a moved revision raises ConflictError and
  writes nothing, so concurrent turns are re-applied rather than lost.
- A document that does not parse or has an unknown format/version raises a StorageError
  naming the file; it is never overwritten or deleted implicitly.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

from koogcli.adapters import atomic
from koogcli.adapters.documents import (
    PREVIEW_CHARS,
    SUMMARY_BYTES,
    dump_history,
    parse_history,
    read_summary,
    read_tail,
)
from koogcli.adapters.paths import DataDir
from koogcli.core.errors import ConflictError, KoogError
from koogcli.core.messages import Message, utc_now
from koogcli.core.names import SessionName
from koogcli.core.ports import SessionInfo, StoredHistory

_HEADER = re.compile(
    rb'\{"format": "koog\.chat-history", "version": 1, "session": "[^"]*", "revision": (\d+),'
)


class FileHistoryStore:
    def __init__(self, data: DataDir, lock_timeout: float = 30.0) -> None:
        self.data = data
        self.lock_timeout = lock_timeout

    def load(self, session: SessionName) -> list[Message]:
        return self.read(session).messages

    def store(self, session: SessionName, messages: Sequence[Message]) -> None:
        self.write(session, messages, expected_revision=None)

    def read(self, session: SessionName) -> StoredHistory:
        path = self.data.session_file(session)
        if not _exists(path):
            return StoredHistory([], 0)
        header, messages = parse_history(atomic.read_json(path), path)
        return StoredHistory(messages, header.revision, header.updated_at)

    def tail(self, session: SessionName, count: int) -> list[Message]:
        """The last `count` messages, read from the end of the document when it has the
        shape koog writes (`history show --last N` on a long session); whole otherwise."""
        path = self.data.session_file(session)
        try:
            with atomic.open_binary(path) as handle:
                found = read_tail(handle, count, str(path))
        except FileNotFoundError:
            return []
        if found is not None:
            return found
        messages = self.load(session)
        return messages[-count:] if count > 0 else []

    def write(
        self, session: SessionName, messages: Sequence[Message], expected_revision: int | None
    ) -> int:
        path = self.data.session_file(session)
        with atomic.file_lock(self.data.lock_file(session), self.lock_timeout):
            current = self._current_revision(session, fast=expected_revision is not None)
            if expected_revision is not None and current != expected_revision:
                raise ConflictError(f"session {session} changed (revision {current})")
            revision = current + 1
            atomic.write_text(path, dump_history(session.value, revision, utc_now(), messages))
            return revision

    def _current_revision(self, session: SessionName, fast: bool) -> int:
        """The stored revision. With `fast`, read it from koog's own header line: the caller
        parsed the whole document when it loaded that revision, and writes are atomic."""
        path = self.data.session_file(session)
        if fast:
            try:
                match = _HEADER.match(atomic.read_bytes(path, 512))
            except FileNotFoundError:
                return 0
            if match:
                return int(match.group(1))
        return self.read(session).revision

    def exists(self, session: SessionName) -> bool:
        return _exists(self.data.session_file(session))

    def names(self) -> list[str]:
        """Session names from the folder listing alone (cheap: no document is read)."""
        try:
            entries = os.listdir(self.data.sessions_dir)
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise atomic.read_failure(self.data.sessions_dir, exc) from exc
        names = []
        for entry in entries:
            if entry.endswith(".json") and not entry.startswith("."):
                try:
                    names.append(SessionName.parse(entry[: -len(".json")]).value)
                except KoogError:
                    continue
        return sorted(names)

    def sessions(self) -> list[SessionInfo]:
        """Every session; one that cannot be read is listed with its problem, so a bad file
        never hides the healthy sessions. Files that are no session of koog's are skipped."""
        folder = self.data.sessions_dir
        try:
            entries = sorted(os.listdir(folder))
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise atomic.read_failure(folder, exc) from exc
        out = []
        for entry in entries:
            if not entry.endswith(".json") or entry.startswith("."):
                continue
            try:
                name = SessionName.parse(entry[: -len(".json")])
            except KoogError:
                continue  # not a name koog would ever have written
            info = self._info(name)
            if info is not None:  # None: deleted since the folder was listed
                out.append(info)
        return out

    def _info(self, name: SessionName) -> SessionInfo | None:
        """From the document's first bytes when it carries a summary; read whole if not."""
        path = self.data.session_file(name)
        try:
            summary = read_summary(atomic.read_bytes(path, SUMMARY_BYTES))
            if summary is not None:
                return SessionInfo(
                    name.value,
                    summary.message_count,
                    summary.revision,
                    summary.updated_at,
                    preview=summary.preview,
                )
            stored = self.read(name)
        except FileNotFoundError:
            return None
        except KoogError as err:
            return SessionInfo(name.value, 0, 0, None, problem=err.message)
        first = next((m.text for m in stored.messages if m.role == "user"), "")
        return SessionInfo(
            name.value,
            len(stored.messages),
            stored.revision,
            stored.updated_at,
            preview=first[:PREVIEW_CHARS],
        )

    def rename(self, old: SessionName, new: SessionName) -> None:
        """The document under its new name (its header names the session), then the old
        one removed: a crash between leaves both, never neither."""
        stored = self.read(old)
        with atomic.file_lock(self.data.lock_file(old), self.lock_timeout):
            path = self.data.session_file(new)
            text = dump_history(new.value, stored.revision + 1, utc_now(), stored.messages)
            atomic.write_text(path, text)
            atomic.remove(self.data.session_file(old))

    def delete(self, session: SessionName) -> bool:
        with atomic.file_lock(self.data.lock_file(session), self.lock_timeout):
            return atomic.remove(self.data.session_file(session))


def _exists(path: Path) -> bool:
    try:
        os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise atomic.read_failure(path, exc) from exc
    return True
