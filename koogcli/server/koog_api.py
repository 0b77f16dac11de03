"""`/koog/v1/...`: sessions, checkpoints, rollback and memory over HTTP, in the shapes the
CLI's `--json` prints (ui/views.py), through the same services. Deleting and rolling back
need no confirmation here: the request is the confirmation."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from koogcli.core.names import SessionName
from koogcli.server import errors
from koogcli.server.auth import Grant
from koogcli.server.state import ServerState
from koogcli.server.wire import BadRequest
from koogcli.services.context import AppContext

Handler = Callable[[AppContext, Grant, Request, Any], Any]


def _endpoint(handler: Handler, status: int = 200) -> Callable[[Request], Any]:
    async def endpoint(request: Request) -> Response:
        state: ServerState = request.app.state.koog
        try:
            grant = state.grant(request.headers)
            body = await _json(request) if request.method == "POST" else None
            data = await state.run(lambda: handler(state.ctx, grant, request, body))
        except Exception as exc:
            return errors.response(exc)
        return JSONResponse(data, status_code=status)

    return endpoint


async def _json(request: Request) -> dict[str, Any]:
    raw = await request.body()
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw)
    except ValueError as exc:
        raise BadRequest(f"the body is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    return body


def _session(grant: Grant, request: Request) -> SessionName:
    name = SessionName.parse(request.path_params["name"])
    grant.session(name.value)
    return name


def _sessions(ctx: AppContext, grant: Grant, request: Request, body: Any) -> Any:
    from koogcli.services import history
    from koogcli.ui import views

    found = history.list_sessions(ctx)
    allowed = grant.sessions
    return [
        views.session_dict(s)
        for s in found
        if allowed is None or any(s.name.startswith(p) for p in allowed)
    ]


def _show_session(ctx: AppContext, grant: Grant, request: Request, body: Any) -> Any:
    from koogcli.services import history

    name = _session(grant, request)
    return {"session": name.value, "messages": [m.to_dict() for m in history.show(ctx, name)]}


def _delete_session(ctx: AppContext, grant: Grant, request: Request, body: Any) -> Any:
    from koogcli.services import history

    name = _session(grant, request)
    ctx.require_session(name)
    history.delete(ctx, name)
    return {"session": name.value, "deleted": True}


def _checkpoints(ctx: AppContext, grant: Grant, request: Request, body: Any) -> Any:
    from koogcli.services import checkpoints
    from koogcli.ui import views

    name = _session(grant, request)
    ctx.require_session(name)
    every = request.query_params.get("all") in ("1", "true")
    return [views.checkpoint_dict(c) for c in checkpoints.list_(ctx, name, every)]


def _rollback(ctx: AppContext, grant: Grant, request: Request, body: Any) -> Any:
    from koogcli.services import rollback
    from koogcli.ui import views

    name = _session(grant, request)
    ctx.require_session(name)
    wanted = body.get("checkpoint")
    if wanted is not None and not isinstance(wanted, str):
        raise BadRequest("'checkpoint' must be a checkpoint id", "checkpoint")
    options = rollback.Options(
        bool(body.get("compensate", True)),
        bool(body.get("force", False)),
        bool(body.get("compensate_imported", False)),
    )
    # Tools that ask before each call have no one to ask here: they are refused.
    plan = rollback.prepare(ctx, name, wanted, wanted is None, options)
    return views.rollback_dict(rollback.execute(ctx, plan))


def _memory_list(ctx: AppContext, grant: Grant, request: Request, body: Any) -> Any:
    from koogcli.services import memory
    from koogcli.ui import views

    state: ServerState = request.app.state.koog
    namespace = state.namespace(grant, request.query_params.get("namespace"))
    return [views.record_dict(r) for r in memory.list_(ctx, namespace)]


def _memory_add(ctx: AppContext, grant: Grant, request: Request, body: Any) -> Any:
    from koogcli.services import memory
    from koogcli.ui import views

    state: ServerState = request.app.state.koog
    text = body.get("text")
    if not isinstance(text, str) or not text.strip():
        raise BadRequest("'text' must be a non-empty string", "text")
    meta = body.get("metadata") or {}
    if not isinstance(meta, dict):
        raise BadRequest("'metadata' must be an object of strings", "metadata")
    namespace = state.namespace(grant, body.get("namespace"))
    record = memory.add(ctx, text, namespace, {str(k): str(v) for k, v in meta.items()})
    return views.record_dict(record)


def _memory_search(ctx: AppContext, grant: Grant, request: Request, body: Any) -> Any:
    from koogcli.services import memory
    from koogcli.ui import views

    state: ServerState = request.app.state.koog
    query = body.get("query")
    if not isinstance(query, str):
        raise BadRequest("'query' must be a string", "query")
    top_k = body.get("top_k", 10)
    threshold = body.get("threshold", 0.0)
    if not isinstance(top_k, int) or not 1 <= top_k <= 100:
        raise BadRequest("'top_k' must be a whole number from 1 to 100", "top_k")
    if not isinstance(threshold, (int, float)) or not 0.0 <= threshold <= 1.0:
        raise BadRequest("'threshold' must be a number from 0 to 1", "threshold")
    namespace = state.namespace(grant, body.get("namespace"))
    mode = body.get("mode")
    hits = memory.search(
        ctx, query, namespace, top_k, float(threshold), mode if isinstance(mode, str) else None
    )
    return [views.record_dict(h.record, h) for h in hits]


def _memory_delete(ctx: AppContext, grant: Grant, request: Request, body: Any) -> Any:
    from koogcli.services import memory

    record = memory.show(ctx, request.path_params["id"])
    grant.namespace(record.namespace)
    memory.delete(ctx, record.id)
    return {"id": record.id, "deleted": True}


ROUTES = [
    Route("/koog/v1/sessions", _endpoint(_sessions), methods=["GET"]),
    Route("/koog/v1/sessions/{name}", _endpoint(_show_session), methods=["GET"]),
    Route("/koog/v1/sessions/{name}", _endpoint(_delete_session), methods=["DELETE"]),
    Route("/koog/v1/sessions/{name}/checkpoints", _endpoint(_checkpoints), methods=["GET"]),
    Route("/koog/v1/sessions/{name}/rollback", _endpoint(_rollback), methods=["POST"]),
    Route("/koog/v1/memory", _endpoint(_memory_list), methods=["GET"]),
    Route("/koog/v1/memory", _endpoint(_memory_add, 201), methods=["POST"]),
    Route("/koog/v1/memory/search", _endpoint(_memory_search), methods=["POST"]),
    Route("/koog/v1/memory/{id}", _endpoint(_memory_delete), methods=["DELETE"]),
]
