"""Live updates (SSE): the page a person is looking at is told when what it shows changed
(a turn stored by the CLI, by an agent through serve, by another worker; a rollback), and
fetches itself again. The store is asked once a second: every writer, in every process,
is seen the same way. A stream ends after a few minutes (the browser opens the next one)
and at once when serve stops."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from koogcli.core.names import SessionName
from koogcli.server.errors import Refused
from koogcli.server.page import access
from koogcli.server.state import ServerState

POLL_SECONDS = 1.0
STREAM_SECONDS = 300.0
KEEP_ALIVE_SECONDS = 15.0
TEXT = "text/plain; charset=utf-8"


async def events(request: Request) -> Response:
    """`/ui/events` (every session) or `/ui/events?session=NAME` (one)."""
    from koogcli.services import session_view

    state: ServerState = request.app.state.koog
    try:
        who = access.grant(state, request)
        raw = request.query_params.get("session")
        name = SessionName.parse(raw) if raw else None
        if name is not None and not who.allows(name.value):
            raise Refused(404, f"no session named {name.value!r}", "not_found_error")
    except Exception as exc:
        status = exc.status if isinstance(exc, Refused) else 400
        return Response(str(exc), status_code=status, headers=access.HEADERS, media_type=TEXT)
    ctx = state.ctx

    def mark() -> tuple[object, ...]:
        if name is None:
            return session_view.sessions_mark(ctx, who.allows)
        return session_view.change_mark(ctx, name)

    async def stream() -> AsyncIterator[str]:
        yield "retry: 1000\n\n"
        last = await state.run(mark)
        started = quiet = time.monotonic()
        while not state.stopping.is_set() and time.monotonic() - started < STREAM_SECONDS:
            await asyncio.sleep(POLL_SECONDS)
            now = await state.run(mark)
            if now != last:
                last, quiet = now, time.monotonic()
                yield "event: changed\ndata: {}\n\n"
            elif time.monotonic() - quiet > KEEP_ALIVE_SECONDS:
                quiet = time.monotonic()
                yield ": still here\n\n"

    headers = {**access.HEADERS, "x-accel-buffering": "no"}
    return StreamingResponse(stream(), media_type="text/event-stream", headers=headers)
