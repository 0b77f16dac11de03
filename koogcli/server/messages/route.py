"""Anthropic Messages (`/v1/messages`, `/v1/messages/count_tokens`, `HEAD /`; SPEC §6): a
turn of services/turn/placement.py asked in the Messages wire format
(server/messages/wire.py), answered as a `message` or its events, errors in Anthropic's
shape with its statuses."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from koogcli.core.model_port import PassThrough
from koogcli.server import errors
from koogcli.server.messages import wire
from koogcli.server.turns import (
    Relayed,
    answered,
    begin,
    granted,
    session_of,
    sse,
    sse_event,
    streamed,
)
from koogcli.services.turn.placement import Exchange, Exchanged

# Headers of a client's Messages request the upstream receives unchanged (Anthropic's
# gateway contract).
FORWARDED = ("anthropic-beta", "anthropic-version")


def _said(exc: BaseException) -> tuple[int, dict[str, Any]]:
    """The status koog would answer, and the body in Anthropic's error shape."""
    status, body = errors.described(exc)
    given = body.get("error")
    text = str(given.get("message")) if isinstance(given, dict) else str(exc)
    if status == 503:
        status = 529  # Anthropic's "overloaded"
    return status, wire.error(status, text)


def failed(exc: BaseException) -> Response:
    status, body = _said(exc)
    return JSONResponse(body, status_code=status, headers=errors.headers_of(exc))


async def create(request: Request) -> Response:
    try:
        state, entry, grant = granted(request)
        body = wire.parse_messages(await request.body())
        session, own = session_of(state, grant, request, body.session)
        model = state.model(body.model, known_names=False)
        client = body.client
        relay = state.wire_of(model) == "messages"
        if relay:  # the upstream speaks Messages: the request goes as it came
            forwarded = {h: v for h in FORWARDED if (v := request.headers.get(h)) is not None}
            client = replace(client, passthrough=PassThrough("messages", body.raw, forwarded))
        elif body.left_out:  # server tools a translated upstream cannot run
            entry.left_out = ",".join(body.left_out)
        asked = Exchange(
            session, body.conversation, client, model, body.stream, grant.allows, own,
            body.compacts,
        )  # fmt: skip
        ident = wire.new_id()

        def answer(done: Exchanged) -> wire.Answer:
            result = done.result
            return wire.Answer(
                ident, body.model, result.message, result.finish_reason, result.usage
            )

        turn = await begin(request, state, grant, entry, asked, None, after=answer)
    except Exception as exc:
        return failed(exc)
    if not body.stream:
        return await answered(request, turn, wire.message, failed)
    if relay:
        return await streamed(request, turn, _relayed, failed)
    return await streamed(request, turn, lambda: _Events(ident, body.model), failed)


def _relayed() -> Relayed:
    def holds_from(text: str) -> bool:
        if "tool_use" not in text and "message_stop" not in text:
            return False  # most events (deltas): not read further
        kind, data = sse_event(text)
        if kind == "content_block_start":
            block = data.get("content_block")
            return isinstance(block, dict) and block.get("type") == "tool_use"
        return kind == "message_stop"

    def failure(exc: BaseException) -> list[str]:
        return [_event(_said(exc)[1])]

    return Relayed(holds_from, failure, _event({"type": "ping"}))


class _Events:
    """`message_start`, a thinking block while the upstream reasons, the text block as it
    streams, then the tool-use blocks and the stop (server/messages/wire.py)."""

    def __init__(self, ident: str, model: str) -> None:
        self.ident, self.model = ident, model
        self.blocks = 0  # content blocks opened so far
        self.open: str | None = None  # the kind of the block open now

    def opening(self) -> Iterator[str]:
        yield _event(wire.started(self.ident, self.model))

    def _switch(self, kind: str) -> Iterator[str]:
        if self.open == kind:
            return
        if self.open is not None:
            yield _event({"type": "content_block_stop", "index": self.blocks - 1})
        block = {"type": "text", "text": ""}
        if kind == "thinking":
            block = {"type": "thinking", "thinking": "", "signature": ""}
        yield _event({"type": "content_block_start", "index": self.blocks, "content_block": block})
        self.blocks += 1
        self.open = kind

    def reasoning(self, text: str) -> Iterator[str]:
        if self.open == "text":
            return  # reasoning after the answer began: kept with the reply, not streamed
        yield from self._switch("thinking")
        delta = {"type": "thinking_delta", "thinking": text}
        yield _event({"type": "content_block_delta", "index": self.blocks - 1, "delta": delta})

    def delta(self, text: str) -> Iterator[str]:
        yield from self._switch("text")
        delta = {"type": "text_delta", "text": text}
        yield _event({"type": "content_block_delta", "index": self.blocks - 1, "delta": delta})

    def closing(self, done: wire.Answer) -> Iterator[str]:
        if self.open is not None:
            yield _event({"type": "content_block_stop", "index": self.blocks - 1})
        for event in wire.closing(done, self.blocks):
            yield _event(event)

    def failure(self, exc: BaseException) -> Iterator[str]:
        yield _event(_said(exc)[1])

    def keepalive(self) -> str:
        return _event({"type": "ping"})


def _event(data: dict[str, Any]) -> str:
    return sse(data, str(data["type"]))


async def count_tokens(request: Request) -> Response:
    """koog's own estimate of the request (core/tokens.py), tools included."""
    from koogcli.core.tokens import request_tokens

    try:
        granted(request)  # the token is checked; count_tokens stores nothing
        body = wire.parse_messages(await request.body())
    except Exception as exc:
        return failed(exc)
    tools = len(json.dumps(list(body.client.tools))) // 4 if body.client.tools else 0
    return JSONResponse({"input_tokens": request_tokens(body.conversation) + tools})


async def root(request: Request) -> Response:
    """Claude Code checks the base URL with `HEAD /` before its first request."""
    return Response(status_code=200)


ROUTES = [
    Route("/v1/messages", create, methods=["POST"]),
    Route("/v1/messages/count_tokens", count_tokens, methods=["POST"]),
]
