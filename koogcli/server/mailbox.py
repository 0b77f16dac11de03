"""What a turn's worker thread tells the event loop, as cheaply as it can be told: items
in order, one wake-up of the loop per batch (a burst of deltas crosses as one), and a
keep-alive item after `every` seconds without any, from one timer per stream (not one per
delta)."""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from typing import Any

Item = tuple[str, Any]
KEEPALIVE: Item = ("keepalive", None)


class Mailbox:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._items: deque[Item] = deque()
        self._lock = threading.Lock()
        self._woken = False  # a wake-up is on its way to the loop
        self._waiter: asyncio.Future[None] | None = None
        self._last = loop.time()
        self._timer: asyncio.TimerHandle | None = None

    def put(self, item: Item) -> None:
        """From any thread."""
        with self._lock:
            self._items.append(item)
            if self._woken:
                return
            self._woken = True
        self._loop.call_soon_threadsafe(self._wake)

    def _wake(self) -> None:
        with self._lock:
            self._woken = False
        self._last = self._loop.time()
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def take(self) -> list[Item]:
        """Every item waiting, at least one (on the loop)."""
        while True:
            with self._lock:
                if self._items:
                    batch = list(self._items)
                    self._items.clear()
                    return batch
            self._waiter = self._loop.create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None

    def keep_alive(self, every: float) -> None:
        """A KEEPALIVE item whenever `every` seconds pass without an item."""
        self._last = self._loop.time()

        def check() -> None:
            now = self._loop.time()
            due = self._last + every
            if now < due:
                self._timer = self._loop.call_later(due - now, check)
                return
            with self._lock:
                self._items.append(KEEPALIVE)
            self._wake()
            self._timer = self._loop.call_later(every, check)

        self._timer = self._loop.call_later(every, check)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
