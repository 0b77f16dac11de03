"""`POST /v1/chat/completions`: one turn of services/exchange.py, as JSON or as SSE.

The turn runs on a worker thread; its text deltas cross to the event loop through a
queue. The reply ends once the turn is stored, so a client that reads the session right
after (`koog history show`, /koog/v1) finds it there. A streamed answer waits for the first delta (or the end) up to `keepalive_seconds`
before it starts, so an upstream refusal keeps its own status (a 429 stays a 429); after
that, SSE comments keep the connection alive while the upstream thinks, and a failure is
sent as an `error` event. A client that goes away mid-stream fails the turn: the next
delta raises in the worker and nothing is stored as complete.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from koogcli.server import errors
from koogcli.server.guard import LogEntry, log_entry
from koogcli.server.state import ServerState
from koogcli.server.wire import Reply, chunk, closing_chunks, completion, parse_chat
from koogcli.services.context import AppContext
from koogcli.services.exchange import Exchange, Exchanged, Placement, exchange, family_of
from koogcli.services.turn_state import RequestInfo, TurnAbandonedError, TurnEvents

T = TypeVar("T")


class ClientGoneError(TurnAbandonedError):
    """The client closed the connection before the reply was complete."""


async def _or_gone(
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


async def chat_completions(request: Request) -> Response:
    state: ServerState = request.app.state.koog
    entry = log_entry(request.scope)
    try:
        grant = state.grant(request.headers)
        entry.token = grant.name
        body = parse_chat(await request.body())
        session = state.session(grant, request.headers.get("x-koog-session") or body.session)
        entry.session, entry.placement = (session.value, "-") if session else ("-", "stateless")
        ctx = state.context(grant, request.headers, body.user)
        family = family_of(session, grant.allows).value if session is not None else None
        release = await _or_gone(
            request, state.admission.enter(family, grant.name), lambda done: done()
        )
    except Exception as exc:
        return errors.response(exc)
    asked = Exchange(session, body.conversation, body.client, body.model, body.stream, grant.allows)
    turn = _Turn(state, asked, entry)
    turn.start(ctx, release)
    ident = f"chatcmpl-{secrets.token_hex(12)}"
    if not body.stream:
        while True:
            try:
                kind, value = await _or_gone(request, turn.queue.get())
            except ClientGoneError as exc:
                turn.gone.set()  # the turn fails before it is stored
                return errors.response(exc)
            if kind == "error":
                return errors.response(value)
            if kind == "done":
                return JSONResponse(completion(_reply(ident, value)), headers=turn.headers())
    return await _stream(request, turn, ident, body.include_usage)


class _Turn:
    """One exchange on a worker thread, telling the event loop what happens as it happens:
    `delta`s, then `done` (stored) or `error`."""

    def __init__(self, state: ServerState, asked: Exchange, entry: LogEntry) -> None:
        self.state = state
        self.asked = asked
        self.entry = entry
        self.loop = asyncio.get_running_loop()
        self.queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self.info: RequestInfo | None = None
        self.placed: Placement | None = None
        self.gone = threading.Event()

    def _put(self, kind: str, value: Any) -> None:
        self.loop.call_soon_threadsafe(self.queue.put_nowait, (kind, value))

    def _delta(self, text: str) -> None:
        if self.gone.is_set():
            raise ClientGoneError("the client closed the connection; the turn is not stored")
        self._put("delta", text)

    def _request(self, info: RequestInfo) -> None:
        self.info = info

    def _placed(self, placed: Placement) -> None:
        self.placed = placed
        self.entry.placement = placed.action

    def start(self, ctx: AppContext, release: Callable[[], None]) -> None:
        events = TurnEvents(
            on_delta=self._delta, on_request=self._request, abandoned=self.gone.is_set
        )

        def work() -> None:
            try:
                done = exchange(ctx, self.state.gate, self.asked, events, self._placed)
                self._put("done", done)
            except BaseException as exc:
                self._put("error", exc)
            finally:
                release()

        self.loop.run_in_executor(self.state.pool, work)

    def headers(self) -> dict[str, str]:
        info, asked, placed = self.info, self.asked, self.placed
        headers: dict[str, str] = {}
        if asked.session is not None:
            name = placed.session.value if placed is not None else asked.session.value
            headers["X-Koog-Session"] = name
            if placed is not None and placed.forked_from is not None:
                headers["X-Koog-Forked-From"] = placed.forked_from
        if info is not None:
            headers["X-Koog-Memory-Used"] = ",".join(info.memory_used)
            headers["X-Koog-Context-Tokens"] = info.context
            headers["X-Koog-Compressed"] = "true" if info.compressed else "false"
        return headers


async def _stream(request: Request, turn: _Turn, ident: str, include_usage: bool) -> Response:
    wait = turn.state.settings.keepalive_seconds
    first: tuple[str, Any] | None
    try:
        first = await _or_gone(request, asyncio.wait_for(turn.queue.get(), wait))
    except TimeoutError:
        first = None
    except ClientGoneError as exc:
        turn.gone.set()
        return errors.response(exc)
    if first is not None and first[0] == "error":
        return errors.response(first[1])
    created = int(time.time())
    model = turn.asked.model or turn.state.ctx.settings.llm.model

    async def events_out() -> AsyncIterator[str]:
        item = first
        try:
            yield _sse(chunk(ident, model, created, {"role": "assistant", "content": ""}))
            while True:
                if item is None:
                    try:
                        item = await asyncio.wait_for(turn.queue.get(), wait)
                    except TimeoutError:
                        yield ": keep-alive\n\n"
                        continue
                kind, value = item
                item = None
                if kind == "delta":
                    yield _sse(chunk(ident, model, created, {"content": value}))
                elif kind == "error":
                    yield _sse(errors.described(value)[1])
                    return
                else:
                    for closing in closing_chunks(_reply(ident, value, created), include_usage):
                        yield _sse(closing)
                    yield "data: [DONE]\n\n"
                    return
        finally:
            turn.gone.set()  # a no-op once the answer is complete

    return StreamingResponse(
        events_out(),
        media_type="text/event-stream",
        headers={**turn.headers(), "Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


def _sse(data: object) -> str:
    return f"data: {json.dumps(data, ensure_ascii=False)}\n\n"


def _reply(ident: str, done: Exchanged, created: int = 0) -> Reply:
    result = done.result
    return Reply(ident, result.model, result.message, result.finish_reason, result.usage, created)
