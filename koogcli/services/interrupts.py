"""Ctrl-C during a turn: never lost, and held back while the turn is being stored.

Python runs a SIGINT handler at the next bytecode of the main thread; when that happens
inside a `__del__`, a weakref callback or a generator being closed, the KeyboardInterrupt
it raises is printed as "ignored" and dropped, and the reply streams on as if nothing had
been pressed. Within `watched()` a SIGINT is therefore also remembered, and `check()` (run
for every streamed delta and between steps) raises it again if it was swallowed.

A SIGINT landing inside the store would leave the turn stored yet reported as interrupted
(exit 130), and a retrying script would send it twice. Within `deferred()` a SIGINT is only
noted; the store finishes, and the caller decides (a stored turn completes and exits 0).
Only the main thread can own signal handlers; elsewhere nothing changes.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


class Deferred:
    def __init__(self) -> None:
        self.interrupted = False

    def handler(self, signum: int, frame: FrameType | None) -> None:
        self.interrupted = True


class _Pending:
    """A SIGINT seen during a watched turn and not yet acted on."""

    seen = False


def _on_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _remember_and_raise(signum: int, frame: FrameType | None) -> None:
    _Pending.seen = True
    raise KeyboardInterrupt


@contextmanager
def watched() -> Iterator[None]:
    """Around a turn: every SIGINT raises KeyboardInterrupt and stays pending until
    `handled()`, so a swallowed one is raised again by the next `check()`."""
    if not _on_main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, _remember_and_raise)
    _Pending.seen = False
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        _Pending.seen = False


def check() -> None:
    """Raise the KeyboardInterrupt of a SIGINT that was swallowed somewhere."""
    if _Pending.seen:
        raise KeyboardInterrupt


def handled() -> None:
    """The KeyboardInterrupt reached the code that cancels the turn."""
    _Pending.seen = False


@contextmanager
def deferred(check_first: bool = False) -> Iterator[Deferred]:
    """`check_first`: a SIGINT that came before (and was swallowed) still cancels."""
    state = Deferred()
    if not _on_main_thread():
        yield state
        return
    if check_first:
        check()
    previous = signal.signal(signal.SIGINT, state.handler)
    try:
        yield state
    finally:
        signal.signal(signal.SIGINT, previous)
