"""Shows a streamed reply: a spinner while waiting, then the text as it arrives.

On a terminal with Markdown on, finished blocks are printed once (rendered as in the whole
reply) and only the growing block is redrawn (ui/live_region.py), at most ten times a
second and never taller than half the screen, so a terminal resized to half its width or
height can still be redrawn in place: rendering costs about what rendering the finished
reply once does, and the scrollback holds one copy of it, resized or not. Plain text streams as it comes; a pipe never gets a
spinner or an escape code. On a terminal the reply's own control characters and the
spinner's label (a model's or a tool's name) are shown, never executed (SPEC §6); a pipe
gets the reply byte for byte. When the reader of a pipe goes away, the reply is still
received and stored; the rest is not written (SPEC §2).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TextIO, TypedDict

from koogcli.ui.environment import current
from koogcli.ui.markdown_blocks import BlockSplitter
from koogcli.ui.render import is_tty, silence_stdout, tool_call_line, tool_result_line, visible

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderResult

    from koogcli.core.messages import ToolCall
    from koogcli.core.tool_ports import ToolOutcome
    from koogcli.ui.live_region import LiveRegion

REDRAW_EVERY = 0.1  # seconds between redraws of the growing block


class ReplyWriter:
    def __init__(
        self, stream: TextIO | None = None, markdown: bool = False, reflows: bool = True
    ) -> None:
        self.stream = stream or current().stdout
        self.terminal = is_tty(self.stream)
        self.markdown = markdown and self.terminal
        self.reflows = reflows  # the terminal reflows its lines when resized
        self.closed = False
        self._console: Console | None = None
        self._spinner: Any = None  # rich Live showing Waiting
        self._live: LiveRegion | None = None  # the growing block
        self._blocks: Any = None  # BlockRenderer
        self._splitter = BlockSplitter()
        self._finished: list[str] = []  # blocks finished since the last redraw
        self._shown = False  # text of the current reply was shown
        self._any_text = False
        self._redrawn = 0.0
        self._cr = False  # the last delta ended with a CR (it may begin a CRLF)

    # -- waiting -----------------------------------------------------------------------
    def waiting(self, label: str = "waiting") -> None:
        """A request went out (or a tool runs): spin until text comes. Terminal only."""
        if not self.terminal or self.closed or self._spinner is not None:
            return
        if self.markdown:
            self._flush_blocks()
        from rich.live import Live

        self._spinner = Live(
            Waiting(label), console=self._rich(), refresh_per_second=10, transient=True
        )
        self._spinner.start()

    def _stop_spinner(self) -> None:
        # Forgotten only once stopped: a Ctrl-C inside stop() leaves it for abort() to stop.
        if self._spinner is not None:
            self._spinner.stop()  # transient: erased, nothing of it stays in the scrollback
            self._spinner = None

    # -- text --------------------------------------------------------------------------
    def delta(self, text: str) -> None:
        if not text:
            return
        self._stop_spinner()
        self._any_text = True
        self._shown = True
        if self.terminal:
            text = self._visible(text)
        if not self.markdown:
            self._write(text)
            return
        self._finished += self._splitter.feed(text)
        now = time.monotonic()
        if now - self._redrawn >= REDRAW_EVERY:
            self._redraw()
            self._redrawn = now

    def pause(self) -> None:
        """Something is about to be printed or asked below: what was shown stays, in full,
        and later text starts a new reply."""
        self._stop_spinner()
        if self.markdown:
            self._flush_blocks()
        elif self._shown and self.terminal:
            self._write("\n")
        self._shown = False

    def finish(self, text: str | None = None) -> None:
        """End the reply; `text` covers non-streamed replies that had no deltas."""
        if text and not self._any_text:
            self.delta(text)
        self._stop_spinner()
        if self.markdown:
            self._flush_blocks()
        elif self._shown or not self.terminal:
            self._write("\n")
        self._shown = False

    def abort(self) -> None:
        """The turn stopped (Ctrl-C, an error): keep what was shown, end its line."""
        self._stop_spinner()
        if self.markdown:
            self._flush_blocks()
        elif self._shown:
            self._write("\n")
        self._shown = False

    def _visible(self, text: str) -> str:
        """SPEC §6: a reply's control characters are shown, never executed; a line ending
        in CRLF is a line (a lone CR, which would overwrite the line, is shown as ^M)."""
        if self._cr:
            text, self._cr = "\r" + text, False
        if text.endswith("\r"):
            text, self._cr = text[:-1], True
        return visible(text.replace("\r\n", "\n"))

    # -- rendering ---------------------------------------------------------------------
    def _rich(self) -> Console:
        if self._console is None:
            from rich.console import Console

            self._console = Console(file=self.stream, no_color=current().no_color)
        return self._console

    def _redraw(self) -> None:
        """Print the blocks finished since the last redraw (rendered together: blocks
        joined by a blank line render as they do in the whole reply) and show the growing
        block below them."""
        live = self._ensure_live()
        if self._finished:
            if self._blocks is None:
                from koogcli.ui.markdown_stream import BlockRenderer

                self._blocks = BlockRenderer(self._rich())
            text, self._finished = "\n\n".join(self._finished), []
            live.print_above(self._blocks.render(text), self._tail())
        else:
            live.update(self._tail())

    def _tail(self) -> Any:
        from koogcli.ui.markdown_stream import Tail

        growing = self._splitter.growing
        if not growing.strip():
            return None
        return Tail(growing, max(3, (self._rich().size.height - 2) // 2))

    def _ensure_live(self) -> LiveRegion:
        if self._live is None:
            from koogcli.ui.live_region import LiveRegion

            self._live = LiveRegion(self._rich(), self.reflows)
        return self._live

    def _flush_blocks(self) -> None:
        try:
            last = self._splitter.close()
            if last:
                self._finished.append(last)
            if self._finished:
                self._redraw()
        finally:
            self._stop_live()
            if self._blocks is not None:
                self._blocks.restart()

    def _stop_live(self) -> None:
        if self._live is not None:
            self._live.clear()
            self._live = None

    def _write(self, text: str) -> None:
        if self.closed:
            return
        try:
            self.stream.write(text)
            self.stream.flush()
        except BrokenPipeError:
            self.closed = True
            if self.stream is current().stdout:
                silence_stdout()


class Silent:
    """A display for `--json`: stdout carries one JSON object, so the reply is not shown."""

    def delta(self, text: str) -> None: ...

    def waiting(self, label: str = "waiting") -> None: ...

    def pause(self) -> None: ...

    def finish(self, text: str | None = None) -> None: ...

    def abort(self) -> None: ...


class Waiting:
    """A spinner and the seconds since it started, redrawn by rich's refresh thread."""

    def __init__(self, label: str) -> None:
        from rich.spinner import Spinner

        self.started = time.monotonic()
        self.label = visible(label)  # `waiting for MODEL`, `running TOOL`: names from outside
        self.spinner = Spinner("dots", style="dim")

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        self.spinner.text = f"{self.label} {time.monotonic() - self.started:.1f}s"
        yield self.spinner


class ReplyDisplay(Protocol):
    """Where a streamed reply goes: ReplyWriter, Silent, or the REPL's display."""

    def delta(self, text: str) -> None: ...

    def finish(self, text: str | None = None) -> None: ...

    def abort(self) -> None: ...

    def pause(self) -> None: ...

    def waiting(self, label: str = "waiting") -> None: ...


class TurnHandlers(TypedDict):
    on_delta: Callable[[str], None]
    on_waiting: Callable[[str], None]
    on_tool_call: Callable[[ToolCall], None]
    on_tool_result: Callable[[ToolCall, ToolOutcome], None]
    on_note: Callable[[str], None]
    on_warning: Callable[[str], None]


def turn_handlers(
    display: ReplyDisplay, info: Callable[[str], None], warning: Callable[[str], None]
) -> TurnHandlers:
    """TurnEvents callbacks that keep diagnostics out of the reply's live region: the
    display is paused before any line is printed below it."""

    def paused(show: Callable[[str], None]) -> Callable[[str], None]:
        def show_below(text: str) -> None:
            display.pause()
            show(text)

        return show_below

    def tool_call(call: ToolCall) -> None:
        paused(info)(tool_call_line(call))

    def tool_result(call: ToolCall, outcome: ToolOutcome) -> None:
        paused(info)(tool_result_line(outcome))

    return TurnHandlers(
        on_delta=display.delta,
        on_waiting=display.waiting,
        on_tool_call=tool_call,
        on_tool_result=tool_result,
        on_note=paused(info),
        on_warning=paused(warning),
    )
