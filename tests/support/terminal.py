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
from typing import Any

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


class ReflowingScreen(pyte.HistoryScreen):
    """A terminal that reflows its lines when its width changes, as tmux, VTE (GNOME
    Terminal), iTerm2, kitty, Alacritty and Windows Terminal do: a line the terminal wrapped
    is joined again, and every line is wrapped anew at the new width, the cursor staying on
    its character. pyte alone clips lines at the right edge (as xterm does)."""

    def draw(self, data: str) -> None:
        for char in data:
            if self.cursor.x >= self.columns and pyte.modes.DECAWM in self.mode:
                self.buffer[self.cursor.y].wrapped = True  # type: ignore[attr-defined]
            super().draw(char)

    def erase_in_line(self, how: int = 0, private: bool = False) -> None:
        super().erase_in_line(how, private)
        if how in (0, 2):
            self.buffer[self.cursor.y].wrapped = False  # type: ignore[attr-defined]

    def resize(self, lines: int | None = None, columns: int | None = None) -> None:
        lines, columns = lines or self.lines, columns or self.columns
        if columns == self.columns:
            super().resize(lines, columns)
            return
        rows = [*self.history.top, *(self.buffer[y] for y in range(self.lines))]
        at = len(self.history.top) + self.cursor.y
        logical: list[list[Any]] = []
        current: list[Any] = []
        cursor = (0, 0)
        for index, row in enumerate(rows):
            wrapped = getattr(row, "wrapped", False)
            cells = [row[x] for x in range(self.columns)]
            if not wrapped:
                while cells and cells[-1].data in (" ", "") and index != at:
                    cells.pop()
            if index == at:
                cursor = (len(logical), len(current) + self.cursor.x)
                cells = cells[: max(self.cursor.x, _used(cells))]
            current += cells
            if not wrapped:
                logical.append(current)
                current = []
        if current:
            logical.append(current)
        new_rows: list[Any] = []
        where = (0, 0)
        for number, cells in enumerate(logical):
            pieces = [cells[i : i + columns] for i in range(0, len(cells), columns)] or [[]]
            if number == cursor[0]:
                row, x = divmod(cursor[1], columns)
                if x == 0 and row and row == len(pieces):  # just after a full row
                    row, x = row - 1, columns
                where = (len(new_rows) + row, x)
            for i, piece in enumerate(pieces):
                line = pyte.screens.StaticDefaultDict(self.default_char)
                line.update(enumerate(piece))
                line.wrapped = i < len(pieces) - 1  # type: ignore[attr-defined]
                new_rows.append(line)
        end = max(
            [
                where[0],
                *(i for i, r in enumerate(new_rows) if any(c.data.strip() for c in r.values())),
            ]
        )
        kept = new_rows[: end + 1]
        above = max(0, len(kept) - lines)
        self.history.top.clear()
        self.history.top.extend(kept[:above])
        self.buffer.clear()
        for y, line in enumerate(kept[above:]):
            self.buffer[y] = line
        self.lines, self.columns = lines, columns
        self.cursor.y, self.cursor.x = where[0] - above, where[1]
        self.set_margins()
        self.dirty.update(range(lines))


def _used(cells: list[Any]) -> int:
    return max((i + 1 for i, c in enumerate(cells) if c.data not in (" ", "")), default=0)


class Terminal:
    """An interactive program on a pseudo-terminal, read back as a screen: keys can be
    typed and the window resized while it runs (the program gets SIGWINCH, as from a
    terminal emulator). `reflow` chooses a terminal that reflows lines on resize."""

    def __init__(
        self,
        argv: list[str],
        env: dict[str, str],
        columns: int = 120,
        rows: int = 40,
        reflow: bool = True,
    ) -> None:
        import threading

        self.master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))

        def controlling_terminal() -> None:  # so the kernel sends SIGWINCH on a resize
            os.setsid()
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        self.child = subprocess.Popen(
            argv,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env,
            close_fds=True,
            preexec_fn=controlling_terminal,
        )
        os.close(slave)
        kind = ReflowingScreen if reflow else pyte.HistoryScreen
        self.screen = kind(columns, rows, history=100_000, ratio=0.5)
        self.screen.set_mode(pyte.modes.LNM)
        self.stream = pyte.ByteStream(self.screen)
        self.raw = bytearray()
        self.lock = threading.Lock()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:
                return
            if not chunk:
                return
            with self.lock:
                self.raw += chunk
                self.stream.feed(chunk)

    def send(self, text: str) -> None:
        os.write(self.master, text.encode())

    def resize(self, columns: int, rows: int) -> None:
        """The emulator resizes its grid first, then tells the program."""
        with self.lock:
            self.screen.resize(rows, columns)
            fcntl.ioctl(self.master, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))

    @property
    def lines(self) -> list[str]:
        """Scrollback, then the screen, right-stripped."""
        with self.lock:
            width = self.screen.columns
            above = [
                "".join(line[x].data for x in range(width)).rstrip()
                for line in self.screen.history.top
            ]
            shown = [line.rstrip() for line in self.screen.display]
        lines = above + shown
        while lines and not lines[-1]:
            lines.pop()
        return lines

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    def wait_for(self, wanted: str, timeout: float = 20) -> None:
        import time

        deadline = time.monotonic() + timeout
        while wanted not in self.text:
            if self.child.poll() is not None:
                # It ended: what it wrote last may still be on its way through the reader.
                self.reader.join(timeout=5)
                if wanted in self.text:
                    return
            if time.monotonic() > deadline or self.child.poll() is not None:
                raise AssertionError(f"{wanted!r} never showed; the screen:\n{self.text}")
            time.sleep(0.02)

    def close(self) -> int:
        try:
            return self.child.wait(timeout=20)
        finally:
            self.reader.join(timeout=5)
            os.close(self.master)
