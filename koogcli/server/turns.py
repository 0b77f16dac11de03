"""One client turn of `koog serve`, whatever the protocol (SPEC §6): admitted, run on a
worker thread, answered as JSON or as a stream of the protocol's events.

The turn runs on a worker thread; its text deltas cross to the event loop through a
mailbox (server/mailbox.py: one wake-up per batch, one keep-alive timer per stream). The reply ends once the turn is stored, so a client that reads the session right
after (`koog history show`, /koog/v1) finds it there. A streamed answer waits for the
first delta (or the end) up to `keepalive_seconds` before it starts, so an upstream
refusal keeps its own status (a 429 stays a 429); after that, the protocol's keep-alive
keeps the connection open while the upstream thinks, and a failure is sent as the
protocol's error event. A client that goes away mid-stream fails the turn: the next
delta raises in the worker and nothing is stored as complete.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any, Protocol, TypeVar

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from koogcli.core.names import SessionName
from koogcli.server.auth import Grant
from koogcli.server.guard import LogEntry, is_servers_user, log_entry
from koogcli.server.mailbox import Item, Mailbox
from koogcli.server.state import ServerState
from koogcli.services.context import AppContext
from koogcli.services.turn.placement import Exchange, Exchanged, Placement, exchange, family_of
from koogcli.services.turn.request import RequestInfo, TurnAbandonedError, TurnEvents

T = TypeVar("T")
ErrorAnswer = Callable[[BaseException], Response]


class ClientGoneError(TurnAbandonedError):
    """The client closed the connection before the reply was complete."""


async def or_gone(
    request: Request, waiting: Awaitable[T], late: Callable[[T], None] | None = None
) -> T:
    """`waiting`, unless the client closes the connection first: then ClientGoneError, and
    a result that came anyway is handed to `late` (a place in a queue given back)."""
    task: asyncio.Future[T] = asyncio.ensure_future(waiting)
    gone = asyncio.ensure_future(_disconnected(request))
    try:
        both: set[asyncio.Future[Any]] = {task, gone}
        await asyncio.wait(both, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
    if task.done() and not task.cancelled():
        return task.result()
    task.cancel()
    with contextlib.suppress(BaseException):
        result = await task
        if late is not None:
            late(result)
    raise ClientGoneError("the client closed the connection; the turn is not stored")


async def _disconnected(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


class Turn:
    """One exchange on a worker thread, telling the event loop what happens as it happens:
    `delta`s, then `done` (stored) or `error`."""

    def __init__(self, state: ServerState, asked: Exchange, entry: LogEntry) -> None:
        self.state = state
        self.asked = asked
        self.entry = entry
        self.loop = asyncio.get_running_loop()
        self.mailbox = Mailbox(self.loop)
        self.info: RequestInfo | None = None
        self.placed: Placement | None = None
        self.gone = threading.Event()

    def _put(self, kind: str, value: Any) -> None:
        self.mailbox.put((kind, value))

    def _delta(self, text: str) -> None:
        if self.gone.is_set():
            raise ClientGoneError("the client closed the connection; the turn is not stored")
        self._put("delta", text)

    def _reasoning(self, text: str) -> None:
        if self.gone.is_set():
            raise ClientGoneError("the client closed the connection; the turn is not stored")
        self._put("reasoning", text)

    def _raw(self, text: str) -> None:
        if self.gone.is_set():
            raise ClientGoneError("the client closed the connection; the turn is not stored")
        self._put("raw", text)

    def _request(self, info: RequestInfo) -> None:
        self.info = info

    def _placed(self, placed: Placement) -> None:
        self.placed = placed
        self.entry.placement = placed.action

    def start(
        self,
        ctx: AppContext,
        release: Callable[[], None],
        after: Callable[[Exchanged], object] | None = None,
    ) -> None:
        """Run the exchange; `after` (on the worker, once it is stored) adds what the
        protocol keeps beside the turn, and its result is what `done` carries."""
        events = TurnEvents(
            on_delta=self._delta,
            on_reasoning=self._reasoning,
            on_raw=self._raw,
            on_request=self._request,
            abandoned=self.gone.is_set,
        )

        def work() -> None:
            try:
                done = exchange(ctx, self.state.gate, self.asked, events, self._placed)
                self._put("done", after(done) if after is not None else done)
            except BaseException as exc:
                self._put("error", exc)
            finally:
                release()

        self.loop.run_in_executor(self.state.pool, work)

    @property
    def session(self) -> str | None:
        if self.placed is not None:
            return self.placed.session.value
        asked = self.asked
        return asked.session.value if asked.session is not None and asked.stored else None

    def headers(self) -> dict[str, str]:
        info, placed = self.info, self.placed
        headers: dict[str, str] = {}
        if self.session is not None:
            headers["X-Koog-Session"] = self.session
            if placed is not None and placed.forked_from is not None:
                headers["X-Koog-Forked-From"] = placed.forked_from
        if info is not None:
            headers["X-Koog-Memory-Used"] = ",".join(info.memory_used)
            headers["X-Koog-Context-Tokens"] = info.context
            headers["X-Koog-Compressed"] = "true" if info.compressed else "false"
        return headers


async def begin(
    request: Request,
    state: ServerState,
    grant: Grant,
    entry: LogEntry,
    asked: Exchange,
    user: str | None,
    after: Callable[[Exchanged], object] | None = None,
) -> Turn:
    """Admit the request (one at a time per family, a fair share per token) and start it."""
    ctx = state.context(grant, request.headers, user)
    if asked.agent_session and not state.agent_recovers(request.headers):
        asked = replace(asked, client=replace(asked.client, recover_overflow=False))
    if asked.agent_session and asked.session is not None:
        # The files are journalled where they are: on this machine, for a client on it.
        watch = state.file_watch(request.headers) if _local(request) else None
        if watch is not None and not is_servers_user(request.scope, state.settings):
            # Another local user's agent (a token holder): koog writes as the server's user,
            # so it never reads or restores that user's files for them.
            watch = replace(watch, refused=_ANOTHER_USER)
        asked = replace(asked, client=replace(asked.client, files=watch, agent=True))
    session = asked.session
    entry.session = session.value if session is not None else "-"
    entry.placement = "-" if asked.stored else "stateless"
    family = family_of(session, grant.allows).value if session is not None else None
    release = await or_gone(request, state.admission.enter(family, grant.name), lambda d: d())
    turn = Turn(state, asked, entry)
    turn.start(ctx, release, after)
    return turn


_ANOTHER_USER = (
    "the agent runs as another local user; koog journals only the files of the user who "
    "runs koog serve"
)


def _local(request: Request) -> bool:
    """A client on this machine (loopback): the files its agent names are these."""
    import ipaddress

    host = request.client.host if request.client else ""
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return bool((mapped or address).is_loopback)


def granted(request: Request) -> tuple[ServerState, LogEntry, Grant]:
    """The server's state, the request's access-log entry and the grant of its token
    (errors.Refused when it has none it may use)."""
    state: ServerState = request.app.state.koog
    entry = log_entry(request.scope)
    grant = state.grant(request.headers)
    entry.token = grant.name
    return state, entry, grant


async def answered(
    request: Request, turn: Turn, render: Callable[[Any], object], failed: ErrorAnswer
) -> Response:
    """The whole reply as one JSON body, once the turn is stored: the upstream's own, when
    the request was passed through."""
    relayed: list[str] = []
    while True:
        try:
            batch = await or_gone(request, turn.mailbox.take())
        except ClientGoneError as exc:
            turn.gone.set()  # the turn fails before it is stored
            return failed(exc)
        for kind, value in batch:
            if kind == "error":
                return failed(value)
            if kind == "raw":
                relayed.append(value)
            if kind == "done":
                if relayed:
                    body = "".join(relayed)
                    return Response(body, media_type="application/json", headers=turn.headers())
                return JSONResponse(render(value), headers=turn.headers())


class Events(Protocol):
    """A protocol's stream: what it writes first, per reasoning and text delta, at the
    end, on failure and to keep the connection open."""

    def opening(self) -> Iterable[str]: ...

    def reasoning(self, text: str) -> Iterable[str]: ...

    def delta(self, text: str) -> Iterable[str]: ...

    def closing(self, done: Any) -> Iterable[str]: ...

    def failure(self, exc: BaseException) -> Iterable[str]: ...

    def keepalive(self) -> str: ...


class Relayed:
    """A passed-through request's stream: the upstream's events as it sent them, koog's own
    deltas not written again. From the event `holds_from` tells (the one that ends the
    answer, or the first of a tool call) everything is held until the turn is stored: a client that
    reads the session right after finds it there, and an agent runs no call koog has not
    journalled (services/agent_files.py)."""

    def __init__(
        self,
        holds_from: Callable[[str], bool],
        failure: Callable[[BaseException], Iterable[str]],
        keepalive: str,
    ) -> None:
        self.holds_from = holds_from
        self.failed = failure
        self.ping = keepalive
        self.held: list[str] = []

    def opening(self) -> Iterable[str]:
        return ()

    def raw(self, text: str) -> Iterable[str]:
        if self.held or self.holds_from(text):
            self.held.append(text)
            return ()
        return (text,)

    def reasoning(self, text: str) -> Iterable[str]:
        return ()

    def delta(self, text: str) -> Iterable[str]:
        return ()

    def closing(self, done: Any) -> Iterable[str]:
        return tuple(self.held)

    def failure(self, exc: BaseException) -> Iterable[str]:
        return self.failed(exc)

    def keepalive(self) -> str:
        return self.ping


async def streamed(
    request: Request,
    turn: Turn,
    make: Callable[[], Events],
    failed: ErrorAnswer,
    headers: Mapping[str, str] | None = None,
) -> Response:
    wait = turn.state.settings.keepalive_seconds
    first: list[Item] | None
    try:
        first = await or_gone(request, asyncio.wait_for(turn.mailbox.take(), wait))
    except TimeoutError:
        first = None
    except ClientGoneError as exc:
        turn.gone.set()
        return failed(exc)
    if first is not None and first[0][0] == "error":
        return failed(first[0][1])
    events = make()

    async def out() -> AsyncIterator[str]:
        """Each batch of items written as one piece: the deltas that crossed together
        leave together."""
        batch = first
        parts = list(events.opening())
        try:
            turn.mailbox.keep_alive(wait)
            if batch is None:  # nothing yet: the opening goes now, keep-alives follow
                yield "".join(parts)
                parts = []
            while True:
                if batch is None:
                    batch = await turn.mailbox.take()
                for kind, value in batch:
                    if kind == "raw" and isinstance(events, Relayed):
                        parts.extend(events.raw(value))
                    elif kind == "delta":
                        parts.extend(events.delta(value))
                    elif kind == "reasoning":
                        parts.extend(events.reasoning(value))
                    elif kind == "keepalive":
                        parts.append(events.keepalive())
                    else:
                        ended = events.failure(value) if kind == "error" else events.closing(value)
                        parts.extend(ended)
                        yield "".join(parts)
                        return
                batch = None
                yield "".join(parts)
                parts = []
        finally:
            turn.mailbox.close()
            turn.gone.set()  # a no-op once the answer is complete

    return StreamingResponse(
        out(),
        media_type="text/event-stream",
        headers={
            **turn.headers(),
            **(headers or {}),
            "Cache-Control": "no-cache",
            "X-Accel-Buffering": "no",
        },
    )


def sse_event(text: str) -> tuple[str, dict[str, Any]]:
    """An SSE event's type and data: the `event:` line's name, else the data's own `type`
    (a server may send data lines only, and a relay's hold must key on the type either
    way)."""
    name, data = "", ""
    for line in text.splitlines():
        if line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            data += line[5:].strip()
    try:
        parsed = json.loads(data) if data else {}
    except (ValueError, RecursionError):
        parsed = {}
    found = parsed if isinstance(parsed, dict) else {}
    kind = name or found.get("type")
    return (kind if isinstance(kind, str) else ""), found


def sse(data: object, event: str | None = None) -> str:
    """One server-sent event (named, when the protocol names its events)."""
    body = json.dumps(data, ensure_ascii=False)
    return f"event: {event}\ndata: {body}\n\n" if event else f"data: {body}\n\n"


def session_of(
    state: ServerState, grant: Grant, request: Request, from_body: str | None
) -> tuple[SessionName | None, bool]:
    """`X-Koog-Session`, else the body's session, else the client's own session header; and
    whether it came from the client's own header (a coding agent's side requests, such
    as opencode's title request, are then answered statelessly)."""
    named = request.headers.get("x-koog-session") or from_body
    if named:
        return state.session(grant, named), False
    own = state.client_session(request.headers)
    return state.session(grant, own), own is not None
