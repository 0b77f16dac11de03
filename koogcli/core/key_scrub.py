"""The upstream's API key taken out of what the upstream says, before anyone sees it (SPEC §6:
the upstream key never leaves the server; §5.8).

An upstream may quote the key it was sent: whole (a 401 body, an error event quoting the
request) or masked as providers show keys (OpenAI's `sk-proj-****abcd`, first and last
characters around `...`, `…`, `***`). A pattern of key shapes misses keys of other shapes
(hex, `AIza…`, `gsk_…`); koog knows the key itself, so KeyScrub removes that string,
whatever its shape:

- `text()` is for what an upstream says about a failure (error bodies and events): the key,
  its JSON-escaped form, every masked form revealing four or more of its characters (a
  prefix of it, a mask, a suffix of it: the whole form goes, `sk-proj-****abcd` for a key
  ending in `abcd`), and any run of twelve or more of its characters.
- `reply()` is for a reply's own text: the exact key only, so an answer that writes
  `sk-...` keeps it.
- `Holdback` is for a reply streamed in pieces: the end of a piece that could begin the
  key waits for the next piece, so a key split across two pieces is still removed.

An empty or short key (under 8 characters: a local server's placeholder) removes nothing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TypeVar

T = TypeVar("T")
REMOVED = "[key removed]"
_SHORTEST = 8
_REVEALED = 4  # characters of the key a masked form must show to be taken out
_FRAGMENT = 12  # a run of the key's characters this long is a quote of it
_MASKED = re.compile(r"([A-Za-z0-9_\-]*)(\*{2,}|\.{2,}|…+|•+)([A-Za-z0-9_\-]*)")
_RUNS = re.compile(r"[A-Za-z0-9_\-+/~]{" + str(_FRAGMENT) + ",}")


class KeyScrub:
    def __init__(self, key: str) -> None:
        self.key = key if len(key) >= _SHORTEST else ""
        forms = {self.key, self.key.replace("/", "\\/")} if self.key else set()
        self.forms = sorted(forms, key=len, reverse=True)

    def __bool__(self) -> bool:
        return bool(self.key)

    def reply(self, text: str) -> str:
        """`text` without the exact key (a reply's words are otherwise left alone)."""
        for form in self.forms:
            if form in text:
                text = text.replace(form, REMOVED)
        return text

    def text(self, text: str) -> str:
        """`text` without the key, its masked forms or a long run of it (an error's words)."""
        if not self.key:
            return text
        text = self.reply(text)
        text = _MASKED.sub(self._masked, text)
        return _RUNS.sub(lambda m: REMOVED if m.group(0) in self.key else m.group(0), text)

    def value(self, value: T) -> T:
        """Every string in `value` (an error object: dicts and lists of strings) `text()`ed."""
        if isinstance(value, str):
            return self.text(value)  # type: ignore[return-value]
        if isinstance(value, Mapping):
            return {k: self.value(v) for k, v in value.items()}  # type: ignore[return-value]
        if isinstance(value, list):
            return [self.value(v) for v in value]  # type: ignore[return-value]
        return value

    def _masked(self, found: re.Match[str]) -> str:
        head, _, tail = found.groups()
        cut = next(i for i in range(len(head) + 1) if self.key.startswith(head[i:]))
        shown = next(j for j in range(len(tail), -1, -1) if self.key.endswith(tail[:j]))
        if len(head) - cut + shown < _REVEALED:
            return found.group(0)
        return REMOVED  # the whole masked form, as shown (`sk-proj-****abcd`)

    def open_end(self, text: str) -> int:
        """How many characters at the end of `text` could begin the key (0: none)."""
        if not self.key:
            return 0
        first = self.key[0]
        at = text.find(first, max(0, len(text) - len(self.key) + 1))
        while at >= 0:
            if self.key.startswith(text[at:]):
                return len(text) - at
            at = text.find(first, at + 1)
        return 0


class Holdback:
    """A streamed reply's pieces without the key, even one split across pieces."""

    def __init__(self, scrub: KeyScrub) -> None:
        self.scrub = scrub
        self.held = ""

    def feed(self, piece: str) -> str:
        """What of the reply so far can be shown: all of it but an end that may begin the key."""
        if not self.scrub:
            return piece
        text = self.scrub.reply(self.held + piece)
        keep = self.scrub.open_end(text)
        self.held = text[len(text) - keep :] if keep else ""
        return text[: len(text) - keep]

    def flush(self) -> str:
        """The rest, once the reply has ended."""
        held, self.held = self.held, ""
        return held
