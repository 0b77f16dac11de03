"""A process on a real pseudo-terminal, read back as a person would see it.

The raw bytes a program writes to a terminal hold every redraw of a live region; what a
person sees is the screen and the scrollback after the terminal has applied the cursor
moves and erasures. pyte (a VT100 emulator) applies them, so tests can ask "how many
times does this paragraph appear on screen and above it?".
"""

from __future__ import annotations

import fcntl
import os
import select
import struct
import subprocess
import termios
from dataclasses import dataclass

import pyte


@dataclass
class Captured:
    lines: list[str]  # scrollback, then the screen, right-stripped
    raw: bytes
    returncode: int
    stderr: str

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


def run_on_terminal(
    argv: list[str],
    env: dict[str, str] | None = None,
    columns: int = 120,
    rows: int = 40,
    timeout: float = 60,
) -> Captured:
    """Run argv with stdout (and stdin) on a pseudo-terminal of columns x rows; stderr is a
    pipe. Returns what the terminal shows once the process has exited."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    child = subprocess.Popen(
        argv, stdin=slave, stdout=slave, stderr=subprocess.PIPE, env=env, close_fds=True
    )
    os.close(slave)
    raw = bytearray()
    try:
        while True:
            ready, _, _ = select.select([master], [], [], timeout)
            if not ready:
                child.kill()
                raise TimeoutError(f"{argv} wrote nothing for {timeout} s")
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: every writer has closed the terminal
                break
            if not chunk:
                break
            raw += chunk
    finally:
        os.close(master)
    stderr = child.stderr.read().decode() if child.stderr else ""
    returncode = child.wait(timeout)
    return Captured(screen_lines(bytes(raw), columns, rows), bytes(raw), returncode, stderr)


def screen_lines(raw: bytes, columns: int = 120, rows: int = 40) -> list[str]:
    """The scrollback and screen a terminal shows after receiving `raw`."""
    screen = pyte.HistoryScreen(columns, rows, history=100_000, ratio=0.5)
    screen.set_mode(pyte.modes.LNM)  # a bare \n also returns the carriage, as the tty does
    stream = pyte.ByteStream(screen)
    stream.feed(raw)
    above = ["".join(line[x].data for x in range(columns)).rstrip() for line in screen.history.top]
    lines = above + [line.rstrip() for line in screen.display]
    while lines and not lines[-1]:
        lines.pop()
    return lines
