"""Who runs next in `koog serve` (SPEC §6 "Bounds"), decided on the event loop so that a
waiting request holds no worker thread:

- one request at a time per session family (`NAME`, `NAME~2`, ... are placed together),
  with at most `[serve] session_queue` waiting behind it (409 past that, and after
  `session_wait_seconds` of waiting);
- with tokens, one token's requests hold at most `[serve] token_share` of the workers, so
  one client's burst never starves another's sessions; without tokens, the requests that
  name no session (stateless, Codex's compactions) are one such client, so a burst of them
  leaves workers for the sessions. The workers are as many as the connections that can
  carry a request (server/state.py): requests on distinct sessions never wait for one.

Everything here runs on the event loop's thread; `release` may be called from any thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from koogcli.server.errors import Refused


@dataclass
class _Line:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    waiting: int = 0


STATELESS = "(stateless)"


class Admission:
    def __init__(self, queue: int, wait_seconds: float, share: int, by_token: bool) -> None:
        self.queue = queue
        self.wait_seconds = wait_seconds
        self.share = share
        self.by_token = by_token
        self._lines: dict[str, _Line] = {}
        self._tokens: dict[str, asyncio.Semaphore] = {}

    async def enter(self, family: str | None, token: str) -> Callable[[], None]:
        """Wait for the request's turn; returns the release, to call exactly once."""
        loop = asyncio.get_running_loop()
        line = await self._line(family) if family is not None else None
        semaphore = None
        client = token if self.by_token else (STATELESS if family is None else None)
        if client is not None:
            semaphore = self._tokens.setdefault(client, asyncio.Semaphore(self.share))
            try:
                await asyncio.wait_for(semaphore.acquire(), self.wait_seconds)
            except TimeoutError:
                self._leave(family, line)
                whose = "this token's" if self.by_token else "stateless"
                raise _busy(f"{whose} requests hold their share of the workers") from None
        done = False

        def release() -> None:
            nonlocal done
            if done:
                return
            done = True
            if semaphore is not None:
                semaphore.release()
            self._leave(family, line)

        def from_any_thread() -> None:
            loop.call_soon_threadsafe(release)

        return from_any_thread

    async def _line(self, family: str) -> _Line:
        line = self._lines.setdefault(family, _Line())
        if line.lock.locked() and line.waiting >= self.queue:
            raise _busy(f"{line.waiting} requests already wait on session {family!r}")
        line.waiting += 1
        try:
            await asyncio.wait_for(line.lock.acquire(), self.wait_seconds)
        except TimeoutError:
            raise _busy(
                f"session {family!r} stayed busy with another request for {self.wait_seconds:g}s"
            ) from None
        finally:
            line.waiting -= 1
        return line

    def _leave(self, family: str | None, line: _Line | None) -> None:
        if family is None or line is None:
            return
        line.lock.release()
        if not line.waiting and not line.lock.locked():
            self._lines.pop(family, None)


def _busy(why: str) -> Refused:
    return Refused(
        409,
        f"{why}; send one request per session at a time, or try again shortly",
        "conflict_error",
        "session_busy",
    )
