"""An upstream's answer read within bounds: server-sent events and whole JSON bodies.

The HTTP package's own line reader keeps a line until its end comes, however long (one
40 MiB `data:` line took `koog chat` to 607 MB), and a read timeout bounds only the wait for
each piece, so an upstream that trickles a few bytes at a time holds a turn forever. Here:

- one event (its lines together) is at most MAX_EVENT_BYTES, and a body at most
  MAX_BODY_BYTES: past that the answer is refused, having held no more than that;
- every piece read is checked against the reply's deadline (`[llm] turn_timeout_seconds`
  from the start of the request): the first read after it ends the reply, and a read waits
  at most `timeout_seconds`, so a reply never runs past both together;
- JSON is parsed within core/bounded_json.py's depth bound.

Each refusal is a ModelError naming the endpoint and what to check; the turn fails and
nothing of it is stored (SPEC §5.2, §5.10). Events are split as the SSE spec reads a stream:
a line ends at LF or CRLF, an event at a blank line.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from koogcli.core.errors import ModelError

# One event: a Responses `response.completed` carries the whole reply (and any image it
# made, as base64) in one line, so this is generous; a line past it is no reply.
MAX_EVENT_BYTES = 16 << 20
MAX_BODY_BYTES = 64 << 20


@dataclass(frozen=True, slots=True)
class Bounds:
    """How long and how large one reply may be, and the endpoint to name when it is not."""

    url: str
    deadline: float | None = None  # time.monotonic() by which the reply is whole
    turn_timeout: float | None = None
    max_event: int = MAX_EVENT_BYTES
    max_body: int = MAX_BODY_BYTES

    @classmethod
    def starting(cls, url: str, turn_timeout: float | None) -> Bounds:
        """Bounds for a reply whose request starts now."""
        deadline = time.monotonic() + turn_timeout if turn_timeout else None
        return cls(url, deadline, turn_timeout)

    def check(self) -> None:
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise ModelError(
                f"{self.url} did not finish the reply within {self.turn_timeout:g}s",
                hint="nothing of this turn was stored; raise llm.turn_timeout_seconds for "
                "longer replies, or check the server",
            )

    def too_large(self, what: str, limit: int) -> ModelError:
        return ModelError(
            f"{self.url} sent {what} larger than {_size(limit)}; koog stopped reading it",
            hint="nothing of this turn was stored; the server's reply is broken",
        )


def lines(response: Any, bounds: Bounds) -> Iterator[str]:
    """The response's lines (without their ends), each event at most `bounds.max_event`
    bytes; the deadline checked at every piece read."""
    pending = bytearray()
    event = 0  # bytes of the event's lines so far
    bounds.check()
    for chunk in response.iter_bytes():
        bounds.check()
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            if pending:
                pending += chunk[start:end]
                line = bytes(pending)
                pending.clear()
            else:
                line = chunk[start:end]
            start = end + 1
            if line.endswith(b"\r"):
                line = line[:-1]
            event = event + len(line) if line else 0
            if event > bounds.max_event:
                raise bounds.too_large("an event", bounds.max_event)
            yield line.decode("utf-8", "replace")
        pending += memoryview(chunk)[start:]
        if event + len(pending) > bounds.max_event:
            raise bounds.too_large("an event", bounds.max_event)
    if pending:
        yield bytes(pending).decode("utf-8", "replace")


def events(response: Any, bounds: Bounds) -> Iterator[tuple[list[str], str]]:
    """Each server-sent event: its lines as the upstream wrote them, and its data (its
    `data:` lines joined). Comments and other fields are kept in the lines only."""
    kept: list[str] = []
    data: list[str] = []
    for line in lines(response, bounds):
        if line:
            kept.append(line)
            if line.startswith("data:"):
                value = line[5:]
                data.append(value[1:] if value.startswith(" ") else value)
            continue
        if kept:
            yield kept, "\n".join(data)
            kept, data = [], []
    if kept:
        yield kept, "\n".join(data)


def body(response: Any, bounds: Bounds) -> bytes:
    """The whole body, at most `bounds.max_body` bytes, read by the deadline."""
    got = bytearray()
    bounds.check()
    for chunk in response.iter_bytes():
        bounds.check()
        got += chunk
        if len(got) > bounds.max_body:
            raise bounds.too_large("a reply", bounds.max_body)
    return bytes(got)


def _size(limit: int) -> str:
    return f"{limit >> 20} MiB" if limit >= 1 << 20 else f"{limit:,} bytes"
