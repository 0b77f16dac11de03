"""`POST /v1/chat/completions`: one turn of services/turn/placement.py, as a `chat.completion`
or as `chat.completion.chunk` events (server/turns.py runs it)."""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator

from starlette.requests import Request
from starlette.responses import Response

from koogcli.server import errors
from koogcli.server.answers import Reply
from koogcli.server.chat.wire import chunk, closing_chunks, completion, parse_chat
from koogcli.server.turns import answered, begin, granted, session_of, sse, streamed
from koogcli.services.turn.placement import Exchange, Exchanged


async def chat_completions(request: Request) -> Response:
    try:
        state, entry, grant = granted(request)
        body = parse_chat(await request.body())
        session, own = session_of(state, grant, request, body.session)
        asked = Exchange(
            session, body.conversation, body.client, body.model, body.stream, grant.allows, own,
            body.compacts,
        )  # fmt: skip
        turn = await begin(request, state, grant, entry, asked, body.user)
    except Exception as exc:
        return errors.response(exc)
    ident = f"chatcmpl-{secrets.token_hex(12)}"
    if not body.stream:
        return await answered(
            request, turn, lambda done: completion(_reply(ident, done)), errors.response
        )
    model = body.model or state.ctx.settings.llm.model
    return await streamed(
        request, turn, lambda: _ChatEvents(ident, model, body.include_usage), errors.response
    )


class _ChatEvents:
    def __init__(self, ident: str, model: str, include_usage: bool) -> None:
        self.ident, self.model, self.include_usage = ident, model, include_usage
        self.created = int(time.time())

    def opening(self) -> Iterator[str]:
        yield sse(chunk(self.ident, self.model, self.created, {"role": "assistant", "content": ""}))

    def reasoning(self, text: str) -> Iterator[str]:
        yield sse(chunk(self.ident, self.model, self.created, {"reasoning_content": text}))

    def delta(self, text: str) -> Iterator[str]:
        yield sse(chunk(self.ident, self.model, self.created, {"content": text}))

    def closing(self, done: Exchanged) -> Iterator[str]:
        reply = _reply(self.ident, done, self.created)
        for closing in closing_chunks(reply, self.include_usage):
            yield sse(closing)
        yield "data: [DONE]\n\n"

    def failure(self, exc: BaseException) -> Iterator[str]:
        yield sse(errors.described(exc)[1])

    def keepalive(self) -> str:
        return ": keep-alive\n\n"


def _reply(ident: str, done: Exchanged, created: int = 0) -> Reply:
    result = done.result
    return Reply(ident, result.model, result.message, result.finish_reason, result.usage, created)
