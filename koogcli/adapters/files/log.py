"""The append log beside a session document: `sessions/NAME.log`.

A turn that only appends messages (or drops some from the front, as a window does) writes
one line here instead of rewriting the document: `{"r": REVISION, "b": BASE, "drop": K,
"add": [messages], "count": N, "preview": "...", "at": UPDATED_AT}` turns revision BASE
into REVISION by dropping the first K messages and appending `add`. The line is written
whole and synced while the session's lock is held.

Reading applies, after the document, the lines whose revision is above the document's, in
order, each based on the one before. Folding writes the whole history as a new document of
the latest revision, then removes the log; a crash between leaves lines at or below the
document's revision, which are skipped.

Torn is told from damaged (a damaged line must never silently drop a completed turn):
- Only an incomplete last line (no newline: a crash or a full disk cut the append short)
  is torn: its turn never completed. It is skipped with a warning naming the file. The
  next append closes it off with a newline and a marker line (TORN_MARK), so it stays
  known as torn once lines follow it.
- Any other line that does not parse, holds values out of range or is longer than
  MAX_LINE_BYTES is damage: a storage error naming the file and the line, and nothing is
  written over it (the turn it holds comes back once the line is repaired by hand).
The log is read in bounded pieces: a huge tail (a crash can leave gigabytes of zeros)
costs time to skip, never memory.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from koogcli.adapters import atomic
from koogcli.adapters.codec.documents import PREVIEW_CHARS, parse_messages
from koogcli.core.errors import CorruptDocumentError, KoogError
from koogcli.core.messages import Message

# The largest line a turn can write: its message (chat.max_input_bytes is 8 MiB by
# default), tool results (1 MiB each) and replies, as JSON, with room to spare.
MAX_LINE_BYTES = 64 * 1024 * 1024
TORN_MARK = b'{"torn": "the line above was cut short by a crash"}'
_CHUNK = 1024 * 1024
_TAIL = 256 * 1024  # `last` reads this much of the end first


@dataclass(frozen=True)
class Entry:
    revision: int
    base: int
    drop: int
    add: list[Message]
    count: int
    preview: str
    updated_at: str


def line(entry: Entry) -> str:
    return json.dumps(
        {
            "r": entry.revision,
            "b": entry.base,
            "drop": entry.drop,
            "add": [m.to_dict() for m in entry.add],
            "count": entry.count,
            "preview": entry.preview[:PREVIEW_CHARS],
            "at": entry.updated_at,
        },
        ensure_ascii=False,
    )


def read(path: Path, after: int, warn: Callable[[str], None] | None = None) -> list[Entry]:
    """The entries above revision `after`, in order; [] when there is no log. A torn last
    line is skipped (and `warn` told); a damaged line is a CorruptDocumentError."""
    return [entry for entry in _entries(path, warn) if entry.revision > after]


def last(path: Path, warn: Callable[[str], None] | None = None) -> Entry | None:
    """The newest entry, from the end of the file when its last line is a whole entry (a
    turn asks before every write: the earlier lines are checked by `read`); otherwise the
    log is read as `read` reads it, so a torn or damaged end is told apart the same way."""
    try:
        with atomic.open_binary(path) as handle:
            size = handle.seek(0, 2)
            start = max(0, size - _TAIL)
            handle.seek(start)
            tail = handle.read(size - start)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise atomic.read_failure(path, exc) from exc
    if not tail:
        return None
    cut = tail.rfind(b"\n", 0, len(tail) - 1)
    raw = tail[cut + 1 : -1]
    if tail.endswith(b"\n") and (cut >= 0 or start == 0) and raw != TORN_MARK:
        try:
            return _parse(raw, path)
        except _Unreadable:
            pass
    found = None
    for entry in _entries(path, warn):
        found = entry
    return found


def _entries(path: Path, warn: Callable[[str], None] | None) -> Iterator[Entry]:
    bad: tuple[int, str] | None = None  # a line that did not parse, unless a mark follows
    for number, raw, complete in _lines(path):
        if not complete:
            if warn is not None:
                warn(
                    f"{path}: its last line (line {number}) was cut short by a crash; its "
                    "turn never completed and is skipped"
                )
            break
        if raw == TORN_MARK and bad is not None and bad[0] == number - 1:
            bad = None  # closed off by a later append: torn, not damaged
            continue
        if bad is not None:
            raise _damage(path, *bad)
        if raw is None:
            bad = (number, f"it is longer than {MAX_LINE_BYTES:,} bytes")
            continue
        try:
            yield _parse(raw, path)
        except _Unreadable as exc:
            bad = (number, str(exc))
    if bad is not None:
        raise _damage(path, *bad)


def _lines(path: Path) -> Iterator[tuple[int, bytes | None, bool]]:
    """(line number, its bytes or None when over MAX_LINE_BYTES, whether it ended with a
    newline), read a piece at a time."""
    try:
        handle = atomic.open_binary(path)
    except FileNotFoundError:
        return
    with handle:
        number, pending, oversized = 1, bytearray(), False
        while True:
            try:
                chunk = handle.read(_CHUNK)
            except OSError as exc:
                raise atomic.read_failure(path, exc) from exc
            if not chunk:
                break
            start = 0
            while True:
                end = chunk.find(b"\n", start)
                piece = chunk[start:] if end < 0 else chunk[start:end]
                if not oversized:
                    pending += piece
                    if len(pending) > MAX_LINE_BYTES:
                        oversized, pending = True, bytearray()
                if end < 0:
                    break
                yield number, None if oversized else bytes(pending), True
                number, pending, oversized = number + 1, bytearray(), False
                start = end + 1
        if pending or oversized:
            yield number, None, False


def apply(
    messages: list[Message], revision: int, entries: Sequence[Entry], path: Path
) -> tuple[list[Message], int, str | None]:
    """The history after the entries; an entry not based on the revision before it means
    the log and the document do not belong together (retried by the caller, then exit 3)."""
    updated_at = None
    for entry in entries:
        if entry.base != revision or entry.drop > len(messages):
            raise CorruptDocumentError(
                f"{path}: revision {entry.revision} follows {entry.base}, "
                f"but the history before it is at revision {revision}",
                hint=atomic.CORRUPT_HINT,
            )
        messages = [*messages[entry.drop :], *entry.add]
        revision = entry.revision
        updated_at = entry.updated_at
    return messages, revision, updated_at


def append(path: Path, entry: Entry) -> None:
    atomic.append_text(path, line(entry) + "\n", torn_mark=TORN_MARK.decode())


class _Unreadable(ValueError):
    """A complete line that is no entry: why, for the message."""


def _damage(path: Path, number: int, why: str) -> CorruptDocumentError:
    return CorruptDocumentError(
        f"{path}: line {number} is damaged ({why}); nothing was written over it",
        hint="repair or remove that line by hand (its turn comes back once it parses), "
        "or roll back",
    )


def _parse(raw: bytes, path: Path) -> Entry:
    try:
        data = json.loads(raw)
        if not isinstance(data, dict):
            raise _Unreadable("not a JSON object")
        numbers = [data["r"], data["b"], data["drop"], data["count"]]
        added, at, preview = data["add"], data["at"], data.get("preview", "")
    except _Unreadable:
        raise
    except (ValueError, KeyError, TypeError, RecursionError) as exc:
        raise _Unreadable(f"not a log entry: {type(exc).__name__}") from None
    if not all(isinstance(n, int) and not isinstance(n, bool) and 0 <= n < 2**53 for n in numbers):
        raise _Unreadable("a number out of range")
    revision, base, drop, count = numbers
    if revision <= base or not isinstance(added, list) or not isinstance(at, str):
        raise _Unreadable("fields that do not fit together")
    try:
        messages = parse_messages(added, str(path))
    except KoogError as exc:
        raise _Unreadable(exc.message.removeprefix(f"{path}: ")) from None
    return Entry(revision, base, drop, messages, count, str(preview), at)


def delta(old: Sequence[Message], new: Sequence[Message]) -> tuple[int, list[Message]] | None:
    """(messages dropped from the front, messages appended) turning `old` into `new`, or
    None when `new` is not `old` with a front cut and a tail added (then fold)."""
    if not old or not new:
        return None
    first = new[0]
    drop = 0
    if not (old[0] is first or old[0] == first):
        drop = next((i for i, m in enumerate(old) if m.id == first.id), -1)
        if drop < 0:
            return None
    kept = len(old) - drop
    if kept > len(new):
        return None
    for before, after in zip(old[drop:], new[:kept], strict=True):
        if before is not after and before != after:
            return None
    return drop, list(new[kept:])
