"""A fork of a session document without reading its whole history (`history fork`).

A document koog wrote holds one message per line after its header (adapters/codec/documents.py),
and its log only drops messages from the front or appends them (adapters/files/log.py).
So the first N messages of a history are a run of the document's lines plus, past them,
a few messages of the log: the fork's document is a new header followed by those bytes,
and only the messages around the cut are parsed (the caller checks that the cut does not
split a tool call from its results). Whatever does not have that shape returns None and
is forked the ordinary way.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from koogcli.adapters import atomic
from koogcli.adapters.codec.documents import (
    HISTORY_FORMAT,
    HISTORY_VERSION,
    MESSAGES_KEY,
    PREVIEW_CHARS,
    SUMMARY_BYTES,
    parse_messages,
    read_summary,
)
from koogcli.adapters.files import log as history_log
from koogcli.core.injected import first_prompt
from koogcli.core.messages import Message, utc_now
from koogcli.core.ports import CutCheck

# Messages parsed before the cut (and one after): few enough to be checked by hand, never
# by pydantic, whose import alone costs more than the rest of a fork.
AROUND = 32


@dataclass
class _History:
    """A history as document lines (from `skip`) followed by messages from the log."""

    lines: list[bytes]
    skip: int
    tail: list[Message]

    @property
    def total(self) -> int:
        return len(self.lines) - self.skip + len(self.tail)

    def drop(self, count: int) -> None:
        from_lines = min(count, len(self.lines) - self.skip)
        self.skip += from_lines
        self.tail = self.tail[count - from_lines :]

    def messages(self, start: int, end: int, source: str) -> list[Message]:
        """Messages [start, end) of the history, parsed."""
        in_lines = len(self.lines) - self.skip
        chosen = self.lines[self.skip + start : self.skip + min(end, in_lines)]
        raw = [json.loads(line.rstrip(b",")) for line in chosen]
        parsed = parse_messages(raw, source) if raw else []
        return [*parsed, *self.tail[max(0, start - in_lines) : max(0, end - in_lines)]]


def splice(
    document: Path,
    log: Path,
    target: Path,
    target_name: str,
    count: int,
    check: CutCheck,
    warn: Callable[[str], None],
) -> bool:
    """Write `target` as the first `count` messages of the history in `document` + `log`;
    False when they do not have the shape this needs (nothing written then). `check` is
    given the total and the messages just before and after the cut, and may raise."""
    try:
        data = atomic.read_bytes(document)
    except FileNotFoundError:
        return False
    summary = read_summary(data[:SUMMARY_BYTES])
    start = data.find(MESSAGES_KEY)
    if summary is None or start < 0:
        return False
    body = data[start + len(MESSAGES_KEY) :]
    if summary.message_count == 0:
        lines: list[bytes] = []
    elif body.startswith(b"\n") and body.endswith(b"\n]}\n"):
        lines = body[1:-4].split(b"\n")  # each but the last ends with its comma
    else:
        return False
    if len(lines) != summary.message_count:
        return False
    history = _History(lines, 0, [])
    revision = summary.revision
    for entry in history_log.read(log, summary.revision, warn):
        if entry.base != revision or entry.drop > history.total:
            return False  # read the ordinary way, which says what is wrong
        history.drop(entry.drop)
        history.tail.extend(entry.add)
        revision = entry.revision
    source = str(document)
    before = history.messages(max(0, count - AROUND), count, source)
    after = history.messages(count, min(history.total, count + 1), source)
    check(history.total, before, after)
    _write(target, target_name, history, count, source)
    return True


def _write(target: Path, name: str, history: _History, count: int, source: str) -> None:
    in_lines = min(count, len(history.lines) - history.skip)
    chosen = history.lines[history.skip : history.skip + in_lines]
    extra = history.tail[: count - in_lines]
    first = first_prompt(history.messages(0, min(count, AROUND), source))
    header = json.dumps(
        {
            "format": HISTORY_FORMAT,
            "version": HISTORY_VERSION,
            "session": name,
            "revision": 1,
            "updated_at": utc_now(),
            "message_count": count,
            "preview": first[:PREVIEW_CHARS],
        },
        ensure_ascii=False,
    )
    # The chosen lines are one run of the document: joined as they are, commas included.
    run = b"\n".join(chosen).rstrip(b",")
    added = b",\n".join(json.dumps(m.to_dict(), ensure_ascii=False).encode() for m in extra)
    body = b",\n".join(part for part in (run, added) if part)
    atomic.write_text(target, header[:-1].encode() + b', "messages": [\n' + body + b"\n]}\n")
