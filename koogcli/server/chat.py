"""`POST /v1/chat/completions`: one turn of services/exchange.py, as JSON or as SSE.

The turn runs on a worker thread; its text deltas cross to the event loop through a
queue. A streamed answer waits for the first delta (or the end) up to `keepalive_seconds`
before it starts, so an upstream refusal keeps its own status (a 429 stays a 429); after
that, SSE comments keep the connection alive while the upstream thinks, and a failure is
sent as an `error` event. A client that goes away mid-stream fails the turn: the next
delta raises in the worker and nothing is stored as complete.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from koogcli.core.errors import KoogError
from koogcli.server import errors
from koogcli.server.state import ServerState
from koogcli.server.wire import Reply, chunk, closing_chunks, completion, parse_chat
from koogcli.services.exchange import Exchange, Exchanged, exchange
from koogcli.services.turn_state import RequestInfo, TurnEvents


class ClientGoneError(KoogError):
    """The client closed the connection before the reply was complete."""


@dataclass
class _Progress:
    """What the worker has told the event loop so far."""

    info: RequestInfo | None = None
    gone: threading.Event = field(default_factory=threading.Event)


async def chat_completions(request: Request) -> Response:
    state: ServerState = request.app.state.koog
    try:
        grant = state.grant(request.headers)
        body = parse_chat(await request.body())
        session = state.session(grant, request.headers.get("x-koog-session") or body.session)
        ctx = state.context(grant, request.headers, body.user)
    except Exception as exc:
        return errors.response(exc)
    asked = Exchange(session, body.conversation, body.client, body.model, body.stream)
    ident = f"chatcmpl-{secrets.token_hex(12)}"
    if not body.stream:
        try:
            done = await state.run(lambda: exchange(ctx, state.gate, asked))
        except Exception as exc:
            return errors.response(exc)
        reply = _reply(ident, done)
        return JSONResponse(completion(reply), headers=_headers_after(done))
    return await _stream(state, ctx, asked, ident, body.include_usage)


async def _stream(
    state: ServerState, ctx: Any, asked: Exchange, ident: str, include_usage: bool
) -> Response:
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
    progress = _Progress()

    def put(kind: str, value: Any) -> None:
        loop.call_soon_threadsafe(queue.put_nowait, (kind, value))

    def on_delta(text: str) -> None:
        if progress.gone.is_set():
            raise ClientGoneError("the client closed the connection; the turn is not stored")
        put("delta", text)

    def on_request(info: RequestInfo) -> None:
        progress.info = info

    events = TurnEvents(on_delta=on_delta, on_request=on_request)

    def work() -> None:
        try:
            put("done", exchange(ctx, state.gate, asked, events))
        except BaseException as exc:
            put("error", exc)

    loop.run_in_executor(state.pool, work)
    first: tuple[str, Any] | None
    try:
        first = await asyncio.wait_for(queue.get(), state.settings.keepalive_seconds)
    except TimeoutError:
        first = None
    if first is not None and first[0] == "error":
        return errors.response(first[1])
    headers = _headers_during(progress.info, asked)
    if first is not None and first[0] == "done":
        headers = _headers_after(first[1])
    created = int(time.time())
    model = asked.model or state.ctx.settings.llm.model

    async def events_out() -> AsyncIterator[str]:
        item = first
        try:
            yield _sse(chunk(ident, model, created, {"role": "assistant", "content": ""}))
            while True:
                if item is None:
                    try:
                        item = await asyncio.wait_for(queue.get(), state.settings.keepalive_seconds)
                    except TimeoutError:
                        yield ": keep-alive\n\n"
                        continue
                kind, value = item
                item = None
                if kind == "delta":
                    yield _sse(chunk(ident, model, created, {"content": value}))
                elif kind == "error":
                    _, body = errors.described(value)
                    yield _sse(body)
                    return
                else:
                    for closing in closing_chunks(_reply(ident, value, created), include_usage):
                        yield _sse(closing)
                    yield "data: [DONE]\n\n"
                    return
        finally:
            progress.gone.set()  # a no-op once the turn is over

    return StreamingResponse(
        events_out(),
        media_type="text/event-stream",
        headers={**headers, "Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


def _sse(data: object) -> str:
    return f"data: {json.dumps(data, ensure_ascii=False)}\n\n"


def _reply(ident: str, done: Exchanged, created: int = 0) -> Reply:
    result = done.result
    return Reply(ident, result.model, result.message, result.finish_reason, result.usage, created)


def _headers_after(done: Exchanged) -> dict[str, str]:
    result = done.result
    headers = {
        "X-Koog-Memory-Used": ",".join(result.memory_used),
        "X-Koog-Context-Tokens": result.context,
        "X-Koog-Compressed": "true" if result.compressed else "false",
    }
    if done.session is not None:
        headers["X-Koog-Session"] = done.session
    if done.forked_from is not None:
        headers["X-Koog-Forked-From"] = done.forked_from
    return headers


def _headers_during(info: RequestInfo | None, asked: Exchange) -> dict[str, str]:
    if info is None:
        session = asked.session.value if asked.session is not None else None
        return {"X-Koog-Session": session} if session else {}
    headers = {
        "X-Koog-Memory-Used": ",".join(info.memory_used),
        "X-Koog-Context-Tokens": info.context,
        "X-Koog-Compressed": "true" if info.compressed else "false",
    }
    if asked.session is not None:
        headers["X-Koog-Session"] = info.session
    return headers
