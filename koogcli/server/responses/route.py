"""The Responses API (`/v1/responses`, SPEC §6): a turn of services/turn/placement.py asked in
the Responses wire format (server/responses/wire.py), answered as a `response` object
or its `response.*` events; stored responses found, listed and forgotten by id."""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from koogcli.core import wire_marks
from koogcli.core.errors import KoogError
from koogcli.core.model_port import PassThrough
from koogcli.core.names import SessionName, generated
from koogcli.core.ports import Usage
from koogcli.server import errors
from koogcli.server.answers import named_results
from koogcli.server.auth import Grant
from koogcli.server.responses import wire
from koogcli.server.responses.request import parse_responses
from koogcli.server.state import ServerState
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
from koogcli.services import remote_compaction, stored_responses
from koogcli.services.turn.placement import FAMILY_MAX, Exchange, Exchanged, family_of
from koogcli.services.turn.request import ClientOptions


async def create(request: Request) -> Response:
    try:
        state, entry, grant = granted(request)
        body = parse_responses(await request.body())
        conversation: tuple[Any, ...] = body.conversation
        session: SessionName | None
        if body.previous is not None:
            session, earlier = await _previous(state, grant, body.previous)
            system = tuple(m for m in body.conversation if m.role == "system")
            # The results name their tools, whose calls came in an earlier response.
            conversation = named_results((*system, *earlier, *body.input))
            own = False
        else:
            session, own = session_of(state, grant, request, body.session)
            if session is None and body.store:
                session = own_session(grant)
        key = secrets.token_hex(12)
        family = family_of(session, grant.allows).value if session is not None else None
        model = state.model(body.model, known_names=False)
        # A stateless request to a Responses upstream goes as it came (Codex: `store` false,
        # its reasoning replayed); a stored one is answered with koog's own response ids.
        relay = (
            state.wire_of(model) == "responses"
            and not body.store
            and body.previous is None
            and "conversation" not in body.raw
        )
        if body.left_out and not relay:  # a Responses upstream runs them: passed on
            entry.left_out = ",".join(body.left_out)
        if body.compaction and not relay:  # Codex's remote compaction: no turn
            shown = body.model or state.ctx.settings.llm.model
            entry.session = session.value if session is not None else "-"
            entry.placement = "compaction summary"
            return await _compacted(request, state, grant, body.conversation, model, shown, body)
        client = ClientOptions(
            tools=body.client.tools,
            temperature=body.client.temperature,
            response_format=body.client.response_format,
            extra=body.client.extra,
            reply_meta={stored_responses.KEY: key},
            passthrough=PassThrough("responses", body.raw) if relay else None,
        )
        asked = Exchange(
            session, conversation, client, model, body.stream, grant.allows, own, body.compacts
        )
        ident = wire.response_id(family if asked.stored else None, key)
        created = int(time.time())
        echo = {**body.echo, "store": body.store}
        shown = body.model or state.ctx.settings.llm.model

        def answer(done: Exchanged) -> wire.Answer:
            result = done.result
            return wire.Answer(
                ident, shown, result.message, result.finish_reason, result.usage, created, echo
            )

        turn = await begin(request, state, grant, entry, asked, body.user, after=answer)
    except Exception as exc:
        return _failed(exc)
    if not body.stream:
        return await answered(request, turn, wire.response, _failed)
    pending = wire.Answer(ident, shown, None, None, None, created, echo)
    if relay:
        return await streamed(request, turn, lambda: _relayed(pending), _failed)
    return await streamed(request, turn, lambda: _Events(pending), _failed)


# Output items an agent runs: held until the turn (and the files they edit) is stored.
_CALL_ITEMS = ("function_call", "custom_tool_call", "local_shell_call")


def _relayed(pending: wire.Answer) -> Relayed:
    def holds_from(text: str) -> bool:
        if "_call" not in text and "response.completed" not in text and "incomplete" not in text:
            return False  # most events (deltas): not read further
        kind, data = sse_event(text)
        if kind == "response.output_item.added":
            item = data.get("item")
            return isinstance(item, dict) and item.get("type") in _CALL_ITEMS
        return kind in ("response.completed", "response.incomplete")

    return Relayed(holds_from, _Events(pending).failure, ": keep-alive\n\n")


async def _compacted(
    request: Request,
    state: ServerState,
    grant: Grant,
    conversation: tuple[Any, ...],
    model: str | None,
    shown: str,
    body: Any,
) -> Response:
    """One `compaction` item holding koog's summary of the conversation (SPEC §6)."""
    ctx = state.context(grant, request.headers, body.user)
    summary = await state.admitted(
        None, grant.name, lambda: remote_compaction.summarise(ctx, conversation, model)
    )
    item = remote_compaction.item(summary)
    created = int(time.time())
    answer: dict[str, Any] = {
        "id": f"resp_{secrets.token_hex(16)}",
        "object": "response",
        "created_at": created,
        "status": "completed",
        "model": shown,
        "output": [item],
        "usage": {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0},
    }
    if not body.stream:
        return JSONResponse(answer)
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": {**answer, "status": "in_progress", "output": []}},
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        {"type": "response.completed", "response": answer},
    ]
    text = "".join(sse({**e, "sequence_number": n}, str(e["type"])) for n, e in enumerate(events))
    return Response(text, media_type="text/event-stream", headers={"Cache-Control": "no-cache"})


async def compact(request: Request) -> Response:
    """`POST /v1/responses/compact` (Codex's compaction endpoint): the input's summary as
    one `compaction` item."""
    try:
        state, _, grant = granted(request)
        body = parse_responses(await request.body())
        model = state.model(body.model, known_names=False)
        ctx = state.context(grant, request.headers, body.user)
        summary = await state.admitted(
            None, grant.name, lambda: remote_compaction.summarise(ctx, body.conversation, model)
        )
    except Exception as exc:
        return _failed(exc)
    return JSONResponse(
        {"object": "response.compaction", "output": [remote_compaction.item(summary)]}
    )


async def websocket_probe(request: Request) -> Response:
    """Codex tries the Responses API over a WebSocket first; 426 sends it to HTTP at once
    (any other answer costs it seconds of retries)."""
    said = "koog serve speaks the Responses API over HTTP: POST /v1/responses"
    return JSONResponse(
        {"error": {"message": said, "type": "invalid_request_error", "code": "upgrade_required"}},
        status_code=426,
        headers={"Connection": "close"},
    )


def own_session(grant: Grant) -> SessionName | None:
    """SPEC §6: a Responses request with `store` (the default) and no session names a session
    of its own (`resp-` and a sortable stamp, under the token's first session prefix), so
    the `previous_response_id` of its reply works for a client that sets nothing. None
    (stateless, as before) when the name would not fit or the token may not use it."""
    prefix = "" if grant.sessions is None or not grant.sessions else grant.sessions[0]
    stamp = generated(datetime.now(UTC), secrets.token_hex(2)).value
    raw = f"{prefix}resp-{stamp}"
    if len(raw) > FAMILY_MAX or not grant.allows(raw):
        return None
    try:
        return SessionName.parse(raw)
    except KoogError:
        return None


async def _previous(
    state: ServerState, grant: Grant, ident: str
) -> tuple[SessionName, tuple[Any, ...]]:
    """The session a `previous_response_id` names, and the conversation through it."""
    found = await _found(state, grant, ident)
    earlier = (*found.before, found.reply)
    return found.session, tuple(m for m in earlier if wire_marks.conversational(m))


async def _found(state: ServerState, grant: Grant, ident: str) -> stored_responses.StoredResponse:
    parsed = wire.parse_response_id(ident)
    if parsed is None:
        raise stored_responses.ResponseNotFoundError(
            f"no stored response has the id {ident[:80]!r} (a response without a session "
            "is not stored: name one with X-Koog-Session or 'conversation')"
        )
    family, key = parsed
    return await state.run(lambda: stored_responses.find(state.ctx, family, key, grant.allows))


class _Events:
    """`response.created`, `response.in_progress`, the reasoning item and the text item
    as they stream, then the closing events of server/responses/wire.py."""

    def __init__(self, pending: wire.Answer) -> None:
        self.pending = pending
        self.number = 0
        self.text: list[str] = []
        self.thinking: list[str] = []
        self.done: list[dict[str, Any]] = []  # items complete before the text (reasoning)
        self.item_id = f"msg_{secrets.token_hex(16)}"
        self.reasoning_id = f"rs_{secrets.token_hex(16)}"

    def _event(self, event: dict[str, Any]) -> str:
        event["sequence_number"] = self.number
        self.number += 1
        return sse(event, event["type"])

    def opening(self) -> Iterator[str]:
        started = wire.response(self.pending, status="in_progress", items=[])
        yield self._event({"type": "response.created", "response": started})
        yield self._event({"type": "response.in_progress", "response": started})

    def reasoning(self, text: str) -> Iterator[str]:
        if self.text:
            return  # reasoning after the answer began: kept with the reply, not streamed
        if not self.thinking:
            item = wire.reasoning_item(self.reasoning_id, "", done=False)
            yield self._event(
                {"type": "response.output_item.added", "output_index": 0, "item": item}
            )
        self.thinking.append(text)
        yield self._event(
            {
                "type": "response.reasoning_text.delta",
                "item_id": self.reasoning_id,
                "output_index": 0,
                "content_index": 0,
                "delta": text,
            }
        )

    def _close_reasoning(self) -> Iterator[str]:
        if not self.thinking or self.done:
            return
        text = "".join(self.thinking)
        at = {"item_id": self.reasoning_id, "output_index": 0, "content_index": 0}
        yield self._event({"type": "response.reasoning_text.done", **at, "text": text})
        item = wire.reasoning_item(self.reasoning_id, text)
        yield self._event({"type": "response.output_item.done", "output_index": 0, "item": item})
        self.done.append(item)

    def delta(self, text: str) -> Iterator[str]:
        if not self.text:
            yield from self._close_reasoning()
            index = len(self.done)
            item = {
                "type": "message",
                "id": self.item_id,
                "status": "in_progress",
                "role": "assistant",
                "content": [],
            }
            yield self._event(
                {"type": "response.output_item.added", "output_index": index, "item": item}
            )
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            yield self._event(
                {
                    "type": "response.content_part.added",
                    "item_id": self.item_id,
                    "output_index": index,
                    "content_index": 0,
                    "part": part,
                }
            )
        self.text.append(text)
        yield self._event(
            {
                "type": "response.output_text.delta",
                "item_id": self.item_id,
                "output_index": len(self.done),
                "content_index": 0,
                "delta": text,
                "logprobs": [],
            }
        )

    def closing(self, done: wire.Answer) -> Iterator[str]:
        yield from self._close_reasoning()
        text = "".join(self.text) if self.text else None
        for event in wire.events(done, self.done, text, self.number, self.item_id):
            self.number += 1
            yield sse(event, event["type"])

    def failure(self, exc: BaseException) -> Iterator[str]:
        status, body = errors.described(exc)
        given = body.get("error")
        error: dict[str, Any] = given if isinstance(given, dict) else {}
        failed = wire.response(self.pending, status="failed", items=[])
        failed["error"] = {
            "code": error.get("code")
            or ("rate_limit_exceeded" if status == 429 else "server_error"),
            "message": error.get("message") or str(exc),
        }
        yield self._event({"type": "response.failed", "response": failed})

    def keepalive(self) -> str:
        return ": keep-alive\n\n"


def _failed(exc: BaseException) -> Response:
    return errors.response(exc)


async def _looked_up(request: Request) -> tuple[ServerState, stored_responses.StoredResponse]:
    """The stored response the path's id names (ResponseNotFoundError: none it may see)."""
    state, _, grant = granted(request)
    return state, await _found(state, grant, request.path_params["id"])


async def retrieve(request: Request) -> Response:
    try:
        _, found = await _looked_up(request)
    except Exception as exc:
        return _failed(exc)
    return JSONResponse(wire.response(_stored_answer(request.path_params["id"], found)))


async def input_items(request: Request) -> Response:
    try:
        _, found = await _looked_up(request)
    except Exception as exc:
        return _failed(exc)
    items = wire.input_items([m for m in found.input if wire_marks.conversational(m)])
    if request.query_params.get("order", "desc") == "desc":
        items.reverse()
    return JSONResponse(
        {
            "object": "list",
            "data": items,
            "first_id": items[0]["id"] if items else None,
            "last_id": items[-1]["id"] if items else None,
            "has_more": False,
        }
    )


async def delete(request: Request) -> Response:
    ident = request.path_params["id"]
    try:
        state, found = await _looked_up(request)
        await state.run(lambda: stored_responses.forget(state.ctx, found))
    except Exception as exc:
        return _failed(exc)
    return JSONResponse({"id": ident, "object": "response", "deleted": True})


def _stored_answer(ident: str, found: stored_responses.StoredResponse) -> wire.Answer:
    from koogcli.core.messages import FINISH_KEY

    reply = found.reply
    usage = reply.meta.get("usage")
    return wire.Answer(
        ident,
        str(reply.meta.get("model") or ""),
        reply,
        str(reply.meta.get(FINISH_KEY) or "stop"),
        Usage.from_dict(usage),  # its cached tokens too, when the upstream reported them
        _epoch(reply.created_at),
        {"store": True},
    )


def _epoch(stamp: str) -> int:
    from datetime import datetime

    try:
        return int(datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp())
    except ValueError:
        return 0


ROUTES = [
    Route("/v1/responses", create, methods=["POST"]),
    Route("/v1/responses", websocket_probe, methods=["GET"]),
    Route("/v1/responses/compact", compact, methods=["POST"]),
    Route("/v1/responses/{id}", retrieve, methods=["GET"]),
    Route("/v1/responses/{id}", delete, methods=["DELETE"]),
    Route("/v1/responses/{id}/input_items", input_items, methods=["GET"]),
]
