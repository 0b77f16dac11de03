"""Rich rendering of streamed Markdown: finished blocks once, the growing block live.

Rendering a block on its own differs from rendering it inside the whole reply in one way:
the blank line rich puts between two top-level elements depends on the element before. So
each block is rendered after a one-line stand-in for the previous block's last element
(a paragraph, or a rule for the elements that bring their own spacing), and the stand-in's
lines are dropped. The blocks printed one after another are then the rendering of the
whole reply (tests compare them), at the cost of one parse and render per block.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

from rich.console import Console, ConsoleOptions, RenderResult
from rich.markdown import Markdown, UnknownElement
from rich.segment import Segment, Segments

if TYPE_CHECKING:
    from rich.console import RenderableType

_STAND_INS = {True: "x", False: "---"}  # keyed by "was followed by a blank line"


class BlockRenderer:
    """Renders finished blocks in order, each as it would appear inside the whole text."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._spaced: bool | None = None  # None: no block rendered yet

    def render(self, block: str) -> RenderableType:
        options = self.console.options
        if self._spaced is None:
            markdown = Markdown(block)
            lines = _lines(self.console, markdown, options)
        else:
            stand_in = _STAND_INS[self._spaced]
            markdown = Markdown(f"{stand_in}\n\n{block}")
            skip = _stand_in_height(self.console, stand_in, options.max_width)
            lines = _lines(self.console, markdown, options)[skip:]
        self._spaced = _ends_spaced(markdown)
        return Segments(segment for line in lines for segment in (*line, Segment.line()))

    def restart(self) -> None:
        """Something else was printed below: the next block starts a new text."""
        self._spaced = None


class Tail:
    """The growing block as Markdown, cut to its last `height` lines, so a live region
    never grows past the screen (a region taller than the screen cannot be redrawn in
    place and leaves copies of itself in the scrollback)."""

    def __init__(self, text: str, height: int) -> None:
        self.text = text
        self.height = max(1, height)
        self._cache: tuple[int, list[list[Segment]]] | None = None

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        # Printing above a live region redraws it too: render the text once per width.
        if self._cache is None or self._cache[0] != options.max_width:
            lines = _lines(console, Markdown(self.text), options)
            while lines and not any(segment.text.strip() for segment in lines[-1]):
                lines.pop()  # trailing blank lines would only push the text up
            self._cache = (options.max_width, lines[-self.height :])
        for index, line in enumerate(self._cache[1]):
            if index:
                yield Segment.line()
            yield from line


def _lines(console: Console, markdown: Markdown, options: ConsoleOptions) -> list[list[Segment]]:
    segments = console.render(markdown, options.update(height=None))
    return list(Segment.split_lines(segments))


@cache
def _stand_in_height(console: Console, stand_in: str, width: int) -> int:
    return len(_lines(console, Markdown(stand_in), console.options.update_width(width)))


def _ends_spaced(markdown: Markdown) -> bool:
    """Whether rich puts a blank line after the last top-level element."""
    last = None
    for token in markdown.parsed:
        if token.level == 0 and token.nesting <= 0:
            last = token
    if last is None:
        return True
    element = markdown.elements.get(last.type) or UnknownElement
    return bool(element.new_line)
