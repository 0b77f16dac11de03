"""Keys typed while a reply streams: kept for the next prompt, never echoed into the reply.

The terminal echoes what is typed while no prompt reads it, at the cursor: in the middle
of a reply being redrawn in place, where a line typed ahead shifts the rows and leaves a
copy of the block above them (and on the spinner's line while it waits). So during a turn
the terminal stops echoing and hands keys over one by one as prompt-toolkit's own prompt
does; they wait unread and the next prompt receives them as typed. Signals stay on: Ctrl-C
still cancels the turn.
"""

from __future__ import annotations

import contextlib
import sys
import termios
from collections.abc import Iterator
from typing import TextIO

from koogcli.ui.keypress import unbuffered


@contextlib.contextmanager
def held(stream: TextIO | None = None) -> Iterator[None]:
    stream = stream or sys.stdin
    try:
        fd = stream.fileno()
        termios.tcgetattr(fd)  # raises for anything but a terminal
    except (AttributeError, ValueError, OSError, termios.error):
        yield  # not a terminal: nothing is echoed anyway
        return
    with unbuffered(fd):
        yield
