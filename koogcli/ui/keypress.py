"""A question answered by one key on a terminal, without Enter (the tool approval).

The terminal stops echoing and hands keys over one by one while the question waits; its
modes are put back before the answer is returned. Signals stay on: Ctrl-C still
interrupts. Ctrl-D, which a line-reading terminal turns into end of input, arrives as a
key of its own and is answered as the caller says (a "no" the user can see).
"""

from __future__ import annotations

import contextlib
import os
import termios
from collections.abc import Iterator, Mapping
from typing import TextIO

CTRL_D = "\x04"


@contextlib.contextmanager
def unbuffered(fd: int) -> Iterator[None]:
    """Keys arrive one at a time and are not echoed (Ctrl-C still interrupts); the
    terminal's modes are put back after."""
    saved = termios.tcgetattr(fd)
    quiet = list(saved)
    quiet[3] &= ~(termios.ECHO | termios.ICANON)  # local modes; ISIG stays
    quiet[6] = list(saved[6])
    quiet[6][termios.VMIN], quiet[6][termios.VTIME] = 1, 0
    # TCSANOW, not TCSAFLUSH: keys typed ahead are kept (answers, or the next prompt's).
    termios.tcsetattr(fd, termios.TCSANOW, quiet)
    try:
        yield
    finally:
        with contextlib.suppress(OSError, termios.error):
            termios.tcsetattr(fd, termios.TCSANOW, saved)


def read_key(stream: TextIO) -> str:
    """The next key typed on the terminal `stream`; "" when the terminal has gone. An
    escape sequence (an arrow key) is read whole, so its letters answer nothing."""
    fd = stream.fileno()
    with unbuffered(fd):
        return os.read(fd, 64).decode(errors="replace")


def read_char(stream: TextIO) -> str:
    """One byte typed on the terminal `stream` (what follows stays unread, for whoever
    reads next); "" when the terminal has gone."""
    fd = stream.fileno()
    with unbuffered(fd):
        return os.read(fd, 1).decode(errors="replace")


def choose(stream: TextIO, answers: Mapping[str, str]) -> str | None:
    """The answer of the first key in `answers` (either case); None for Ctrl-D or a
    terminal that has gone. Other keys (Enter among them) are passed over."""
    while True:
        key = read_key(stream)
        if key in ("", CTRL_D):
            return None
        found = answers.get(key.lower()) if len(key) == 1 else None
        if found is not None:
            return found
