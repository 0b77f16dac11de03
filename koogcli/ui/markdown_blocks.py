"""Splits streamed Markdown into blocks that are finished and the one still growing.

A streamed reply is shown by rendering each finished block once; only the growing block is
redrawn. A block is finished when nothing that follows can change how it renders:

- a closed code fence that opened at the margin;
- an ATX heading line;
- anything followed by a blank line and then a line at the margin that does not continue
  it (an indented line continues a list item or code; a list marker continues a list).

Everything else waits, so splitting never changes the rendering (see tests). Work is
linear: each line is looked at once, when its newline arrives.
"""

from __future__ import annotations

import re

_FENCE = re.compile(r"^( *)(`{3,}|~{3,})")
_LIST_MARKER = re.compile(r"^([-+*]|\d{1,9}[.)])(\s|$)")
_HEADING = re.compile(r"^#{1,6}(\s|$)")


class BlockSplitter:
    def __init__(self) -> None:
        self._lines: list[str] = []  # complete lines of the growing block
        self._partial = ""  # the line still being received
        self._fence: str | None = None  # the marker of an open fence
        self._fence_indented = False
        self._after_blank = False
        self._in_list = False

    def feed(self, text: str) -> list[str]:
        """Add streamed text; returns the blocks it finished, in order."""
        if "\n" not in text:
            self._partial += text
            return []
        *lines, self._partial = (self._partial + text).split("\n")
        finished: list[str] = []
        for line in lines:
            finished += self._line(line)
        return finished

    @property
    def growing(self) -> str:
        """The text of the block not finished yet (shown live)."""
        if not self._lines:
            return self._partial
        return "\n".join([*self._lines, self._partial]).rstrip("\n")

    def close(self) -> str:
        """The stream ended: whatever is left is the last block ('' when nothing is)."""
        if self._partial:
            self._lines.append(self._partial)
            self._partial = ""
        return self._take()

    def _line(self, line: str) -> list[str]:
        if self._fence is not None:
            self._lines.append(line)
            if _closes(line, self._fence):
                self._fence = None
                if not self._fence_indented:
                    return self._finished()
            return []
        if not line.strip():
            if self._lines:
                self._after_blank = True
                self._lines.append(line)
            return []
        indented = line[0] in " \t"
        marker = _LIST_MARKER.match(line) is not None
        finished = []
        if self._after_blank and not indented and not (self._in_list and marker):
            finished = self._finished()
        self._after_blank = False
        self._lines.append(line)
        self._in_list = self._in_list or (marker and not indented)
        if fence := _FENCE.match(line):
            self._fence = fence.group(2)
            self._fence_indented = bool(fence.group(1))
        elif not indented and _HEADING.match(line):
            finished += self._finished()
        return finished

    def _finished(self) -> list[str]:
        block = self._take()
        return [block] if block else []

    def _take(self) -> str:
        block = "\n".join(self._lines).strip("\n")
        self._lines = []
        self._after_blank = False
        self._in_list = False
        return block


def _closes(line: str, marker: str) -> bool:
    stripped = line.strip()
    return (
        len(line) - len(line.lstrip(" ")) < 4
        and stripped.startswith(marker)
        and set(stripped) == {marker[0]}
    )
