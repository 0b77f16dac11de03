"""The content digest that names a message in the checkpoint objects file.

It is the sha256 of the message's JSON exactly as a session document stores it (one
message per line, `json.dumps(message.to_dict(), ensure_ascii=False)`), so the history
store can hand over the digests of everything it read by hashing the document's lines
(`remember_lines`) instead of serialising 50,000 messages again. A line is used only when
it starts with its message's id, so a document of another shape gives no digests (they
are computed when needed) and never the digest of a neighbour.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

from koogcli.core.messages import Message

# id(message) -> (message, digest); the message is kept so its id() is not reused.
_KNOWN: dict[int, tuple[Message, str]] = {}
_LIMIT = 500_000


def _key(line: bytes) -> str:
    return hashlib.sha256(line).hexdigest()[:24]


def digest(message: Message) -> str:
    known = _KNOWN.get(id(message))
    if known is not None and known[0] is message:
        return known[1]
    key = _key(json.dumps(message.to_dict(), ensure_ascii=False).encode())
    _remember(message, key)
    return key


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
    if len(_KNOWN) + len(keys) >= _LIMIT:
        _KNOWN.clear()
    _KNOWN.update((id(m), (m, k)) for m, k in zip(messages, keys, strict=False))
    return True


def _id_prefix(message_id: str) -> bytes:
    if message_id.isascii() and message_id.isalnum():  # koog's own ids: nothing to escape
        return b'{"id": "' + message_id.encode() + b'",'
    return b'{"id": ' + json.dumps(message_id, ensure_ascii=False).encode() + b","


def _remember(message: Message, key: str) -> None:
    if len(_KNOWN) >= _LIMIT:
        _KNOWN.clear()
    _KNOWN[id(message)] = (message, key)
