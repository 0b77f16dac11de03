"""The append log beside a session document: `sessions/NAME.log`.

A turn that only appends messages (or drops some from the front, as a window does) writes
one line here instead of rewriting the document: `{"r": REVISION, "b": BASE, "drop": K,
"add": [messages], "count": N, "preview": "...", "at": UPDATED_AT}` turns revision BASE
into REVISION by dropping the first K messages and appending `add`. The line is written
whole and synced while the session's lock is held.

Reading applies, after the document, the lines whose revision is above the document's, in
order, each based on the one before. A line torn by a crash (no newline, or not JSON) is
skipped: its turn never completed. Folding writes the whole history as a new document of
the latest revision, then removes the log; a crash between leaves lines at or below the
document's revision, which are skipped.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from koogcli.adapters import atomic
from koogcli.adapters.documents import PREVIEW_CHARS, parse_messages
from koogcli.core.errors import CorruptDocumentError
from koogcli.core.messages import Message


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


def read(path: Path, after: int) -> list[Entry]:
    """The entries above revision `after`, in order; [] when there is no log."""
    try:
        data = atomic.read_bytes(path)
    except FileNotFoundError:
        return []
    entries = []
    for raw in data[: data.rfind(b"\n") + 1].splitlines():
        entry = _parse(raw, path)
        if entry is not None and entry.revision > after:
            entries.append(entry)
    return entries


def last(path: Path) -> Entry | None:
    """The newest complete entry, read from the end of the file."""
    try:
        with atomic.open_binary(path) as handle:
            size = handle.seek(0, 2)
            chunk = 64 * 1024
            while True:
                start = max(0, size - chunk)
                handle.seek(start)
                data = handle.read(size - start)
                lines = data[: data.rfind(b"\n") + 1].splitlines()
                complete = lines if start == 0 else lines[1:]  # the first may be cut
                for raw in reversed(complete):
                    entry = _parse(raw, path)
                    if entry is not None:
                        return entry
                if start == 0:
                    return None
                chunk *= 4
    except FileNotFoundError:
        return None


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
    atomic.append_text(path, line(entry) + "\n")


def _parse(raw: bytes, path: Path) -> Entry | None:
    try:
        data = json.loads(raw)
        entry = Entry(
            int(data["r"]),
            int(data["b"]),
            int(data["drop"]),
            [],
            int(data["count"]),
            str(data.get("preview", "")),
            str(data["at"]),
        )
        added = data["add"]
    except (ValueError, KeyError, TypeError, RecursionError):
        return None  # torn by a crash and closed off later: that turn never completed
    if entry.drop < 0 or not isinstance(added, list):
        return None
    return Entry(
        entry.revision,
        entry.base,
        entry.drop,
        parse_messages(added, str(path)),
        entry.count,
        entry.preview,
        entry.updated_at,
    )


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
