"""The content digest that names a message in the checkpoint objects file.

It is the sha256 of the message's JSON exactly as a session document stores it (one
message per line, `json.dumps(message.to_dict(), ensure_ascii=False)`), so the history
store can hand over the digests of everything it read by hashing the document's lines
(`remember_lines`) instead of serialising 50,000 messages again. A line is used only when
it starts with its message's id, so a document of another shape gives no digests (they
are computed when needed) and never the digest of a neighbour.

Hashing 50,000 lines one by one costs a quarter of a second per turn, so a fold of the
history (the only time its document is written) also writes the digests of its messages to
`sessions/NAME.digests`: `koog-message-digests 1 DOC COUNT CHECK`, then one digest per line,
where DOC is the sha256 of the document's bytes and CHECK of the digest lines. A reader
takes them only for the very document it read (one sha256 over its bytes, about 11 ms for
17 MB), and otherwise hashes the lines; such a document is also not validated again (its
bytes are exactly what koog wrote). The file is a cache, never the truth: written without
fsync, replaced whole, ignored when anything in it does not match.
"""

from __future__ import annotations

import hashlib
import json
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from koogcli.adapters import atomic
from koogcli.core.errors import StorageError
from koogcli.core.messages import Message

# id(message) -> (message, digest); the message is kept so its id() is not reused.
_KNOWN: dict[int, tuple[Message, str]] = {}
_LIMIT = 200_000  # about four readings of a 50,000-message session


@dataclass
class _Reading:
    """A document read by this process: its messages and their digests. Spread into
    _KNOWN only when a digest is asked for one message at a time (50,000 dict entries
    cost more than the lookups a turn makes)."""

    messages: tuple[Message, ...]
    keys: list[str]
    spread: bool = False


_DOCUMENTS: list[_Reading] = []  # newest last
_DOCUMENTS_KEPT = 4
_FEW = 64
CACHE_HEADER = "koog-message-digests 1"
# Below this many messages hashing the lines costs less than a file.
CACHE_MIN_MESSAGES = 1000


def _key(line: bytes) -> str:
    return hashlib.sha256(line).hexdigest()[:24]


def digest(message: Message) -> str:
    known = _KNOWN.get(id(message))
    if known is None and _spread():
        known = _KNOWN.get(id(message))
    return known[1] if known is not None and known[0] is message else _computed(message)


def _computed(message: Message) -> str:
    known = _KNOWN.get(id(message))
    if known is not None and known[0] is message:
        return known[1]
    key = _key(json.dumps(message.to_dict(), ensure_ascii=False).encode())
    _remember(message, key)
    return key


def digests(messages: Sequence[Message]) -> list[str]:
    """The digests of `messages` in order. A history that begins with the very messages of
    a document this process read (a turn's history: the document, then what the log and the
    turn added) takes that document's digests as one list."""
    for reading in reversed(_DOCUMENTS):
        known = reading.messages
        if len(known) <= len(messages) and all(map(operator.is_, known, messages)):
            # What follows was added since the document: looked up, not spread for.
            return [*reading.keys, *map(_computed, messages[len(known) :])]
    # A few messages (what a turn's step adds) cost less to hash than spreading a document.
    return list(map(digest if len(messages) > _FEW else _computed, messages))


def forget() -> None:
    """Drop every digest this process knows, as a new process starts (tests)."""
    _KNOWN.clear()
    _DOCUMENTS.clear()


def remember_lines(data: bytes, messages: Sequence[Message]) -> bool:
    """Take the digests of `messages` from the document `data` they were parsed from, when
    it has one message per line after its header line; False when it does not."""
    lines = data.split(b"\n", len(messages) + 1)
    if len(lines) < len(messages) + 2 or not lines[-1].startswith(b"]}"):
        return False
    sha256 = hashlib.sha256
    keys = []
    for message, line in zip(messages, lines[1:], strict=False):
        if line[-1:] == b",":
            line = line[:-1]
        if not line.startswith(_id_prefix(message.id)):
            return False
        keys.append(sha256(line).hexdigest()[:24])
    _remember_all(messages, keys)
    return True


def cached(data: bytes, cache: Path) -> list[str] | None:
    """The digests in the digests file when it was written for this very document (its
    bytes are then exactly what a fold of koog's wrote); None otherwise."""
    try:
        header, _, lines = atomic.read_bytes(cache).partition(b"\n")
    except (FileNotFoundError, StorageError):
        return None
    words = header.decode("ascii", "replace").split(" ")
    if len(words) != 5 or " ".join(words[:2]) != CACHE_HEADER or not words[3].isdigit():
        return None
    if words[2] != hashlib.sha256(data).hexdigest():
        return None
    if hashlib.sha256(lines).hexdigest()[:16] != words[4]:
        return None
    if lines.translate(None, b"0123456789abcdef\n"):
        return None  # digests are lower-case hex
    keys = lines.decode("ascii").split("\n")
    return keys if len(keys) == int(words[3]) else None


SPOT_CHECKS = 16


def spot_checked(messages: Sequence[Message], keys: list[str]) -> bool:
    """Whether `keys` (a digests file) holds the digests of these messages, checked at a
    few places chosen at random: a file whose own checks were recomputed by whoever
    edited it (every digest the first message's, say) is not taken, so restore points
    never name other messages than the history's."""
    import random

    if len(keys) != len(messages):
        return False
    picks = {
        0,
        len(messages) - 1,
        *random.sample(range(len(messages)), min(SPOT_CHECKS, len(messages))),
    }
    for index in picks:
        line = json.dumps(messages[index].to_dict(), ensure_ascii=False).encode()
        if _key(line) != keys[index]:
            return False
    return True


def remember_document(
    data: bytes, messages: Sequence[Message], keys: list[str] | None = None
) -> None:
    """The digests of the messages parsed from the document `data`: `keys` (what `cached`
    found) when they are as many, else from the document's lines."""
    if keys is not None and len(keys) == len(messages):
        _remember_all(messages, keys)
    else:
        remember_lines(data, messages)


def write_cache(cache: Path, document: str, messages: Sequence[Message]) -> None:
    """Digests of the messages of the document just written (a fold), or no file for a
    short history. A failure only costs the next reader the hashing: it is ignored."""
    try:
        if len(messages) < CACHE_MIN_MESSAGES:
            atomic.remove(cache)
            return
        lines = "\n".join(digests(messages))
        source = hashlib.sha256(document.encode()).hexdigest()
        check = hashlib.sha256(lines.encode()).hexdigest()[:16]
        header = f"{CACHE_HEADER} {source} {len(messages)} {check}"
        atomic.write_text(cache, header + "\n" + lines, sync=False)
    except StorageError:
        return


def _remember_all(messages: Sequence[Message], keys: list[str]) -> None:
    # The same document read again (a REPL reads its session every turn) replaces its
    # earlier reading, whose messages would otherwise be kept alive here.
    _DOCUMENTS[:] = [d for d in _DOCUMENTS if d.keys != keys][-(_DOCUMENTS_KEPT - 1) :]
    _DOCUMENTS.append(_Reading(tuple(messages), keys))


def _spread() -> bool:
    """Whether any document's digests were newly put into _KNOWN."""
    pending = [reading for reading in _DOCUMENTS if not reading.spread]
    for reading in pending:
        reading.spread = True
        if len(_KNOWN) + len(reading.keys) >= _LIMIT:
            _KNOWN.clear()
        _KNOWN.update((id(m), (m, k)) for m, k in zip(reading.messages, reading.keys, strict=False))
    return bool(pending)


def _id_prefix(message_id: str) -> bytes:
    if message_id.isascii() and message_id.isalnum():  # koog's own ids: nothing to escape
        return b'{"id": "' + message_id.encode() + b'",'
    return b'{"id": ' + json.dumps(message_id, ensure_ascii=False).encode() + b","


def _remember(message: Message, key: str) -> None:
    if len(_KNOWN) >= _LIMIT:
        _KNOWN.clear()
    _KNOWN[id(message)] = (message, key)
