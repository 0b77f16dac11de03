"""`/koog/v1/...`: sessions, checkpoints, rollback and memory over HTTP, in the shapes the
CLI's `--json` prints (ui/views.py), through the same services. Deleting and rolling back
need no confirmation here: the request is the confirmation."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from koogcli.core.names import SessionName
from koogcli.server import bodies, errors
from koogcli.server.auth import Grant
from koogcli.server.bodies import BadRequest
from koogcli.server.guard import log_entry
from koogcli.server.state import ServerState
from koogcli.services.context import AppContext

Handler = Callable[[AppContext, Grant, Request, Any], Any]


def _endpoint(handler: Handler, status: int = 200) -> Callable[[Request], Any]:
    async def endpoint(request: Request) -> Response:
        state: ServerState = request.app.state.koog
        entry = log_entry(request.scope)
        entry.session = request.path_params.get("name", "-")
        try:
            grant = state.grant(request.headers)
            entry.token = grant.name
            body = await _json(request) if request.method == "POST" else None
            # A session's family one request at a time, as its turns (a rollback never
            # runs beside a turn of it); memory's embeddings within the shared bound.
            family_name = family(grant, request.path_params.get("name"))
            data = await state.admitted(
                family_name, grant.name, lambda: handler(state.ctx, grant, request, body)
            )
        except Exception as exc:
            return errors.response(exc)
        return JSONResponse(data, status_code=status)

    return endpoint


def family(grant: Grant, name: object) -> str | None:
    """The family of the session a route names (None: none, or a name the route refuses)."""
    from koogcli.core.errors import KoogError
    from koogcli.services.turn.placement import family_of

    try:
        return family_of(SessionName.parse(str(name)), grant.allows).value if name else None
    except KoogError:
        return None


async def _json(request: Request) -> dict[str, Any]:
    return bodies.obj(await request.body())


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
    wanted = bodies.string(body, "checkpoint")
    options = rollback.Options(
        bodies.boolean(body, "compensate", True),
        bodies.boolean(body, "force", False),
        bodies.boolean(body, "compensate_imported", False),
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
    for key, value in meta.items():
        if not isinstance(value, str):  # never stored as Python's repr of it
            raise BadRequest(f"'metadata.{key}' must be a string", f"metadata.{key}")
    namespace = state.namespace(grant, bodies.string(body, "namespace"))
    record = memory.add(ctx, text, namespace, {str(k): str(v) for k, v in meta.items()})
    return views.record_dict(record)


def _memory_search(ctx: AppContext, grant: Grant, request: Request, body: Any) -> Any:
    from koogcli.services import memory
    from koogcli.ui import views

    state: ServerState = request.app.state.koog
    query = bodies.string(body, "query", required=True) or ""
    top_k = bodies.whole(body, "top_k", 10, 1, 100)
    threshold = bodies.number(body, "threshold") or 0.0
    if not 0.0 <= threshold <= 1.0:
        raise BadRequest("'threshold' must be a number from 0 to 1", "threshold")
    namespace = state.namespace(grant, bodies.string(body, "namespace"))
    hits = memory.search(ctx, query, namespace, top_k, threshold, bodies.string(body, "mode"))
    return [views.record_dict(h.record, h) for h in hits]


def _memory_delete(ctx: AppContext, grant: Grant, request: Request, body: Any) -> Any:
    from koogcli.core.errors import UsageError
    from koogcli.services import memory

    wanted = request.path_params["id"]
    try:
        record = memory.show(ctx, wanted)
        grant.namespace(record.namespace)
    except (UsageError, errors.Refused):  # a damaged database stays a storage error
        # "Not yours" and "no such record" are one answer: a token learns nothing of
        # records outside its namespaces.
        raise errors.Refused(
            404,
            f"no memory record {wanted!r} this token may use",
            "not_found_error",
            "record_not_found",
        ) from None
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
