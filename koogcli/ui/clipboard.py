"""Copying to the clipboard with the OSC 52 escape: the terminal itself sets the
clipboard, so it works over SSH and inside tmux, with nothing to install."""

from __future__ import annotations

import base64
from collections.abc import Mapping

# Many terminals drop OSC 52 payloads beyond about this size (xterm's default limit).
LARGEST = 100_000


def osc52(text: str, env: Mapping[str, str]) -> str:
    """The escape sequence that puts `text` on the clipboard. Inside GNU screen it is
    wrapped for passing through; tmux passes OSC 52 on when `set-clipboard` is on."""
    payload = base64.b64encode(text.encode("utf-8")).decode("ascii")
    sequence = f"\x1b]52;c;{payload}\x07"
    if env.get("STY") and not env.get("TMUX"):
        return f"\x1bP{sequence}\x1b\\"
    return sequence


def cannot_copy(env: Mapping[str, str], is_terminal: bool, size: int) -> str | None:
    """Why the terminal cannot take the text, or None when it can (as far as koog can
    tell: terminals that ignore OSC 52 do so silently)."""
    if not is_terminal:
        return "the output is not a terminal"
    term = env.get("TERM", "")
    if term in ("dumb", "linux", ""):
        return f"this terminal (TERM={term or 'unset'}) has no clipboard escape"
    if size > LARGEST:
        return f"the reply is {size:,} bytes; terminals take about {LARGEST:,} at most"
    return None
