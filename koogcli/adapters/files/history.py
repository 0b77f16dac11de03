"""FileHistoryStore: one JSON document per session under `<data>/sessions/` (SPEC §4),
and beside it an append log (adapters/files/log.py) that turns write instead of the
whole document when they only append (or drop from the front), so a turn writes about the
size of its messages. The log is folded into the document when it passes half the
document's size (at least LOG_MIN_BYTES), when a change is not an append, or when the
history keeps less than half of the document's messages (a window dropping old ones).

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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from koogcli.adapters import atomic
from koogcli.adapters import digests as message_digests
from koogcli.adapters.codec.documents import (
    PREVIEW_CHARS,
    SUMMARY_BYTES,
    dump_history,
    parse_history,
    parse_messages,
    read_summary,
    read_tail,
)
from koogcli.adapters.files import log as history_log
from koogcli.adapters.paths import DataDir
from koogcli.core.errors import ConflictError, CorruptDocumentError, KoogError
from koogcli.core.injected import first_prompt
from koogcli.core.messages import Message, utc_now
from koogcli.core.names import SessionName
from koogcli.core.ports import CutCheck, SessionInfo, StoredHistory

_HEADER = re.compile(
    rb'\{"format": "koog\.chat-history", "version": ([12]), "session": "[^"]*", "revision": (\d+),'
)
LOG_MIN_BYTES = 256 * 1024


class FileHistoryStore:
    def __init__(
        self,
        data: DataDir,
        lock_timeout: float = 30.0,
        warn: Callable[[str], None] | None = None,
    ) -> None:
        self.data = data
        self.lock_timeout = lock_timeout
        self._warn = warn
        self._warned: set[str] = set()
        # The history this process last read or wrote per session, with its revision: a
        # write at that revision is compared with it to find what was appended, and a read
        # that finds the document and log as they were then (inode, size, times, the
        # document's header line) returns it without reading them (`koog serve`, the REPL).
        self._known: dict[str, _Known] = {}

    def _beside(self, session: SessionName, suffix: str) -> Path:
        """A file beside the session document: `sessions/NAME` + suffix."""
        path = self.data.session_file(session)
        return path.with_name(path.name[: -len(".json")] + suffix)

    def _log(self, session: SessionName) -> Path:
        return self._beside(session, ".log")

    def _digests(self, session: SessionName) -> Path:
        return self._beside(session, ".digests")

    def _once(self, text: str) -> None:
        """A warning about a torn log line, once per process (a REPL reads every turn)."""
        if self._warn is not None and text not in self._warned:
            self._warned.add(text)
            self._warn(text)

    def read(self, session: SessionName) -> StoredHistory:
        path = self.data.session_file(session)
        known = self._known.get(session.value)
        seen = self._files_as_they_are(session)
        if known is not None and seen is not None and known.files == seen:
            return StoredHistory(list(known.messages), known.revision, known.updated_at)
        for attempt in range(3):
            if not _exists(path):
                return StoredHistory([], 0)
            try:
                data = atomic.read_bytes(path)
            except FileNotFoundError:
                return StoredHistory([], 0)
            # A document byte for byte as a fold of koog's wrote it (its digests file says
            # so) needs no validation; checkpoints take its digests instead of hashing.
            keys = message_digests.cached(data, self._digests(session))
            raw = atomic.parse_json(data, path)
            header, messages = parse_history(raw, path, as_written=keys is not None)
            if keys is not None and not message_digests.spot_checked(messages, keys):
                keys = None  # a digests file not of these messages: checked as any other
                header, messages = parse_history(raw, path)
            message_digests.remember_document(data, messages, keys)
            try:
                entries = history_log.read(self._log(session), header.revision, self._once)
                messages, revision, at = history_log.apply(
                    messages, header.revision, entries, self._log(session)
                )
            except CorruptDocumentError:
                if attempt == 2:
                    raise
                continue  # folded by another process between the two reads: read again
            updated = at or header.updated_at
            unchanged = seen is not None and self._files_as_they_are(session) == seen
            files = seen if unchanged else None  # written meanwhile: checked next time
            self._known[session.value] = _Known(revision, list(messages), updated, files)
            return StoredHistory(messages, revision, updated)
        raise AssertionError("unreachable")

    def tail(self, session: SessionName, count: int) -> list[Message]:
        """The last `count` messages, read from the end of the document when it has the
        shape koog writes (`history show --last N` on a long session), plus what the log
        appended; the whole history otherwise."""
        path = self.data.session_file(session)
        try:
            with atomic.open_binary(path) as handle:
                found = read_tail(handle, count, str(path))
                handle.seek(0)
                summary = read_summary(handle.read(SUMMARY_BYTES))
        except FileNotFoundError:
            return []
        if found is not None and summary is not None:
            entries = history_log.read(self._log(session), summary.revision, self._once)
            if not entries or entries[0].base == summary.revision:
                total = entries[-1].count if entries else summary.message_count
                combined = [*found, *(m for e in entries for m in e.add)]
                return combined[len(combined) - min(count, total, len(combined)) :]
        messages = self.read(session).messages
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
            now = utc_now()
            known = self._known.get(session.value)
            change = (
                history_log.delta(known.messages, messages)
                if known is not None and known.revision == current
                else None
            )
            log = self._log(session)
            cached: _Known | None = None
            if (
                change is not None
                and not self._log_full(path, log)
                and not (change[0] and _mostly_dropped(path, len(messages)))
                and _logged(path)
            ):
                drop, added = change
                # The files as the cached history left them (a hand repair or `storage
                # copy` may change them without a new revision): else nothing is cached.
                cacheable = (
                    known is not None
                    and known.files is not None
                    and known.files == self._files_as_they_are(session)
                )
                first = first_prompt(messages)
                entry = history_log.Entry(revision, current, drop, added, len(messages), first, now)
                history_log.append(log, entry)
                if known is not None and cacheable:
                    # Under the session's write lock: the files as this append left them,
                    # holding what a read would return (the new messages as parsed back).
                    as_read = [*known.messages[drop:], *_as_read(added, log)]
                    files = self._files_as_they_are(session)
                    cached = _Known(revision, as_read, now, files)
            else:  # fold: the whole history as a new document, then no log
                document = dump_history(session.value, revision, now, messages)
                atomic.write_text(path, document)
                atomic.remove(log)
                message_digests.write_cache(self._digests(session), document, messages)
            self._known[session.value] = cached or _Known(revision, list(messages), now, None)
            return revision

    def splice(self, source: SessionName, target: SessionName, count: int, check: CutCheck) -> bool:
        """`target` as the first `count` messages of `source`, from the document's lines
        (adapters/files/fork.py); False when it must be written the ordinary way."""
        from koogcli.adapters.files import fork as history_fork

        with atomic.file_lock(self.data.lock_file(target), self.lock_timeout):
            if _exists(self.data.session_file(target)):
                raise ConflictError(f"session {target} exists already")
            return history_fork.splice(
                self.data.session_file(source),
                self._log(source),
                self.data.session_file(target),
                target.value,
                count,
                check,
                self._once,
            )

    def put(
        self, session: SessionName, messages: Sequence[Message], revision: int, updated_at: str
    ) -> None:
        """One document with this revision and time, no log (`storage copy`)."""
        path = self.data.session_file(session)
        with atomic.file_lock(self.data.lock_file(session), self.lock_timeout):
            document = dump_history(session.value, revision, updated_at, messages)
            atomic.write_text(path, document)
            atomic.remove(self._log(session))
            message_digests.write_cache(self._digests(session), document, messages)
            self._known[session.value] = _Known(revision, list(messages), updated_at, None)

    def _files_as_they_are(self, session: SessionName) -> _Files | None:
        """What every write of the document or log changes; None without a document."""
        try:
            doc = os.stat(self.data.session_file(session), follow_symlinks=False)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise atomic.read_failure(self.data.session_file(session), exc) from exc
        try:
            log = os.stat(self._log(session), follow_symlinks=False)
            logged = (log.st_ino, log.st_size, log.st_mtime_ns, log.st_ctime_ns)
        except FileNotFoundError:
            logged = None
        # The header's revision too: a rewrite of the same size within one tick of a
        # coarse clock, on a reused inode, still changes it.
        try:
            header = atomic.read_bytes(self.data.session_file(session), 512)
        except FileNotFoundError:
            return None
        return (doc.st_ino, doc.st_size, doc.st_mtime_ns, doc.st_ctime_ns, header, logged)

    def _log_full(self, path: Path, log: Path) -> bool:
        try:
            size = os.stat(log, follow_symlinks=False).st_size
        except FileNotFoundError:
            return False
        try:
            document = os.stat(path, follow_symlinks=False).st_size
        except FileNotFoundError:
            return True
        return size > max(LOG_MIN_BYTES, document // 2)

    def _current_revision(self, session: SessionName, fast: bool) -> int:
        """The stored revision. With `fast`, from koog's own header line and the log's
        last entry: the caller read the whole history when it loaded that revision."""
        path = self.data.session_file(session)
        if fast:
            try:
                match = _HEADER.match(atomic.read_bytes(path, 512))
            except FileNotFoundError:
                return 0
            if match:
                entry = history_log.last(self._log(session), self._once)
                revision = int(match.group(2))
                return entry.revision if entry and entry.revision > revision else revision
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
                entry = history_log.last(self._log(name), self._once)
                at: str | None
                if entry is not None and entry.revision > summary.revision:  # the log is ahead
                    count, revision, at = entry.count, entry.revision, entry.updated_at
                    preview = entry.preview
                else:
                    count, revision, at = (
                        summary.message_count,
                        summary.revision,
                        summary.updated_at,
                    )
                    preview = summary.preview
                return SessionInfo(name.value, count, revision, at, preview=preview)
            stored = self.read(name)
        except FileNotFoundError:
            return None
        except KoogError as err:
            return SessionInfo(name.value, 0, 0, None, problem=err.message)
        first = first_prompt(stored.messages)
        return SessionInfo(
            name.value,
            len(stored.messages),
            stored.revision,
            stored.updated_at,
            preview=first[:PREVIEW_CHARS],
        )

    def rename(self, old: SessionName, new: SessionName) -> None:
        """The whole history as a document under the new name (its header names the
        session), then the old document and log removed: a crash between leaves both, never
        neither; a log left without its document is never read. Done already (no old
        document): nothing to do, so a rename killed halfway can be finished."""
        if not self.exists(old):
            return
        stored = self.read(old)
        with atomic.file_lock(self.data.lock_file(old), self.lock_timeout):
            path = self.data.session_file(new)
            text = dump_history(new.value, stored.revision + 1, utc_now(), stored.messages)
            atomic.write_text(path, text)
            atomic.remove(self._log(new))
            message_digests.write_cache(self._digests(new), text, stored.messages)
            atomic.remove(self._digests(old))  # first: if it cannot go, nothing else went
            atomic.remove(self.data.session_file(old))
            atomic.remove(self._log(old))
        self._known.pop(old.value, None)
        self._known.pop(new.value, None)

    def delete(self, session: SessionName) -> bool:
        with atomic.file_lock(self.data.lock_file(session), self.lock_timeout):
            atomic.remove(self._digests(session))  # first: if it cannot go, nothing else went
            removed = atomic.remove(self.data.session_file(session))
            atomic.remove(self._log(session))
        self._known.pop(session.value, None)
        return removed


_Files = tuple[int, int, int, int, bytes, tuple[int, int, int, int] | None]


@dataclass(frozen=True, slots=True)
class _Known:
    revision: int
    messages: list[Message]
    updated_at: str | None
    files: _Files | None  # None: not known to be the files' contents


def _as_read(messages: Sequence[Message], where: Path) -> list[Message]:
    """Messages as a read parses them back from what was written."""
    import json

    written = json.dumps([m.to_dict() for m in messages], ensure_ascii=False)
    return parse_messages(json.loads(written), str(where))


def _logged(path: Path) -> bool:
    """Whether the document is of the version that says a log may follow it: a version 1
    document is folded first, so a koog that reads only version 1 refuses the session
    instead of missing what the log holds."""
    try:
        match = _HEADER.match(atomic.read_bytes(path, 512))
    except FileNotFoundError:
        return False
    return match is not None and match.group(1) == b"2"


def _exists(path: Path) -> bool:
    try:
        os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise atomic.read_failure(path, exc) from exc
    return True


def _mostly_dropped(path: Path, count: int) -> bool:
    """Whether a history of `count` messages keeps less than half of its document's (a
    window dropping from the front): it is then written whole, so later reads do not parse
    what it dropped."""
    try:
        with atomic.open_binary(path) as handle:
            summary = read_summary(handle.read(SUMMARY_BYTES))
    except FileNotFoundError:
        return False
    return summary is not None and summary.message_count > 2 * count + 64
