"""What a broken or hostile upstream sends, shared by the fake server's three protocols.

A script asks for it (tests/fakes/openai_server.py documents the keys):
  {"deep": 3000}            the answer's JSON (its body, or its first event) holds a value
                            nested 3,000 levels deep; also in an error answer's body
  {"huge_line": 41943040}   one server-sent event whose `data:` line is that many bytes
  {"error_event": "text"}   the stream breaks off with the protocol's own error event
                            saying `text` (an upstream quoting the key it was sent, say)

A nested value cannot be made with `json.dumps` (its encoder recurses as the decoder
does): a payload holds `deep(n)`, a marker string, and `spliced` writes the nesting in its
place.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

_MARK = re.compile(r'"<<deep:(\d+)>>"')


def deep(levels: int) -> str:
    """A marker for a value nested `levels` deep (a JSON array in an array ...)."""
    return f"<<deep:{int(levels)}>>"


def spliced(text: str) -> str:
    """`text` (JSON) with each marker replaced by its nesting."""
    if "<<deep:" not in text:
        return text
    return _MARK.sub(lambda m: "[" * int(m.group(1)) + "]" * int(m.group(1)), text)


def huge_data(head: str, size: int, tail: str, piece: int = 1 << 20) -> Iterator[bytes]:
    """One `data:` line `size` bytes long: `head` (the JSON up to a string), that many
    `a`s, `tail`, in pieces of `piece` bytes, never held whole."""
    yield f"data: {head}".encode()
    left = size
    chunk = b"a" * piece
    while left > 0:
        yield chunk[: min(piece, left)]
        left -= piece
    yield f"{tail}\n\n".encode()
