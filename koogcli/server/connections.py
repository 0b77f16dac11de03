"""uvicorn's HTTP/1.1 protocol with two bounds it lacks (SPEC §6 "Bounds"):

- **a header timeout**: uvicorn waits for a request head forever, so a thousand clients
  that send half a request line hold a thousand connections. Here a connection that has
  not sent a whole head `header_timeout` seconds after it opened, or after its last answer
  while it starts the next request, is closed;
- **a connection cap**: at `max_connections` open connections, a new one takes the place
  of the one that has waited longest for a request head (half-open or idle), so sockets
  that never send a request cannot lock anyone out; when every connection is in the middle
  of a request, the new one is closed at once (uvicorn's `limit_concurrency` answers 503
  only once a whole request came).

Idle kept-alive connections are uvicorn's own `timeout_keep_alive`.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol


def protocol(header_timeout: float, max_connections: int) -> type[H11Protocol]:
    class BoundedProtocol(H11Protocol):
        _head_timer: asyncio.TimerHandle | None = None
        _waiting_since = 0.0  # when it began to wait for a request head

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            if len(self.connections) >= max_connections and not self._evict_one():
                transport.abort()
                return
            super().connection_made(transport)
            self._arm()

        def _evict_one(self) -> bool:
            """Close the connection that has waited longest for a request head."""
            waiting = [
                c
                for c in self.connections
                if isinstance(c, BoundedProtocol) and c._head_timer is not None
            ]
            if not waiting:
                return False
            oldest = min(waiting, key=lambda c: c._waiting_since)
            oldest._disarm()
            oldest.transport.abort()
            self.connections.discard(oldest)
            return True

        def _arm(self) -> None:
            if self._head_timer is None:
                self._waiting_since = self.loop.time()
                self._head_timer = self.loop.call_later(header_timeout, self._head_late)

        def _disarm(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _between_requests(self) -> bool:
            cycle: Any = self.cycle
            return cycle is None or bool(cycle.response_complete)

        def _head_late(self) -> None:
            self._head_timer = None
            if self._between_requests() and not self.transport.is_closing():
                self.transport.close()

        def data_received(self, data: bytes) -> None:
            before = self.cycle
            if self._between_requests():
                self._arm()
            super().data_received(data)
            if self.cycle is not before:
                self._disarm()  # a whole head came: the request is under way

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            if getattr(self, "transport", None) is None:
                return  # refused in connection_made: never set up
            super().connection_lost(exc)

    return BoundedProtocol
