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


@contextlib.contextmanager
def held(stream: TextIO | None = None) -> Iterator[None]:
    stream = stream or sys.stdin
    try:
        fd = stream.fileno()
        saved = termios.tcgetattr(fd)
    except (AttributeError, ValueError, OSError, termios.error):
        yield  # not a terminal: nothing is echoed anyway
        return
    quiet = list(saved)
    quiet[3] &= ~(termios.ECHO | termios.ICANON)  # local modes; ISIG stays
    quiet[6] = list(saved[6])
    quiet[6][termios.VMIN], quiet[6][termios.VTIME] = 1, 0
    # TCSANOW, not TCSAFLUSH: flushing would throw away what was typed ahead.
    termios.tcsetattr(fd, termios.TCSANOW, quiet)
    try:
        yield
    finally:
        with contextlib.suppress(OSError, termios.error):
            termios.tcsetattr(fd, termios.TCSANOW, saved)
