"""Ctrl-C held back while a turn is being stored.

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


@contextmanager
def deferred() -> Iterator[Deferred]:
    state = Deferred()
    if threading.current_thread() is not threading.main_thread():
        yield state
        return
    previous = signal.signal(signal.SIGINT, state.handler)
    try:
        yield state
    finally:
        signal.signal(signal.SIGINT, previous)
