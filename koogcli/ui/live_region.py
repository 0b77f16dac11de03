"""The rows of a streamed reply that are redrawn in place: the growing block, below what
is printed for good.

A terminal resized while the rows are on screen changes them behind the program's back:
most terminals (tmux, VTE, iTerm2, kitty, Alacritty, Windows Terminal, Konsole) reflow
their lines, so a row longer than the new width now takes two rows or more; xterm and the
Linux console clip it instead. Erasing the old rows by their old count then leaves the top
of them in the scrollback, and the block appears twice. So the region remembers the length
of every row it wrote and, before each redraw, erases as many rows as those lines take at
the present width on this kind of terminal (`reflows`, see render.terminal_reflows). It writes no trailing blanks, so a
row's length is exactly what it holds, and never writes into the last column (a cursor
waiting to wrap there is placed differently by different terminals).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from rich.control import Control
from rich.segment import ControlType, Segment, Segments

if TYPE_CHECKING:
    from rich.console import Console, RenderableType


class LiveRegion:
    def __init__(self, console: Console, reflows: bool) -> None:
        self.console = console
        self.reflows = reflows
        self._lengths: list[int] = []  # cells written on each row of the region
        self._width = 0  # the terminal's width when they were written

    def update(self, renderable: RenderableType | None) -> None:
        """Show `renderable` (None: nothing) in place of what the region showed."""
        self._write(self._erase(), renderable)

    def print_above(self, renderable: RenderableType, below: RenderableType | None) -> None:
        """Print `renderable` for good where the region was, then show `below` under it."""
        erase = self._erase()
        self.console.control(erase)
        self.console.print(renderable, end="")
        self._write(Control(), below)

    def clear(self) -> None:
        self.update(None)

    def rows(self, width: int) -> int:
        """How many rows of the screen the region's lines take at `width`."""
        if not self.reflows or width >= self._width:
            return len(self._lengths)
        return sum(max(1, -(-length // width)) for length in self._lengths)

    def _erase(self) -> Control:
        rows = self.rows(self.console.size.width)
        if not rows:
            return Control()
        up = ((ControlType.CURSOR_UP, 1), (ControlType.ERASE_IN_LINE, 2)) * (rows - 1)
        return Control(ControlType.CARRIAGE_RETURN, (ControlType.ERASE_IN_LINE, 2), *up)

    def _write(self, erase: Control, renderable: RenderableType | None) -> None:
        width = self.console.size.width
        lines: list[list[Segment]] = []
        if renderable is not None:
            options = self.console.options.update(width=max(1, width - 1), height=None)
            lines = [_trimmed(line) for line in self.console.render_lines(renderable, options)]
        self._lengths = [Segment.get_line_length(line) for line in lines]
        self._width = width
        self.console.print(erase, Segments(_joined(lines)), sep="", end="", soft_wrap=True)


def _trimmed(line: list[Segment]) -> list[Segment]:
    """A row without its trailing blanks (those with a background colour stay: they show)."""
    line = list(line)
    while line and not line[-1].control:
        last = line[-1]
        if last.style is not None and last.style.bgcolor is not None:
            break
        text = last.text.rstrip()
        if text:
            line[-1] = Segment(text, last.style)
            break
        line.pop()
    return line


def _joined(lines: Iterable[list[Segment]]) -> Iterable[Segment]:
    for index, line in enumerate(lines):
        if index:
            yield Segment.line()
        yield from line
