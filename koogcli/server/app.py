"""The ASGI app of `koog serve` (SPEC §6): OpenAI's endpoints with koog's memory behind
them, koog's own `/koog/v1` namespace and the page (`/`, `/ui/...`). Routes parse, call a
service, answer."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from koogcli.server import bodies, errors, koog_api
from koogcli.server.answers import error_body
from koogcli.server.bodies import BadRequest
from koogcli.server.chat.route import chat_completions
from koogcli.server.messages import route as messages
from koogcli.server.page.routes import routes as page_routes
from koogcli.server.responses import route as responses
from koogcli.server.state import ServerState


async def models(request: Request) -> Response:
    state: ServerState = request.app.state.koog
    try:
        grant = state.grant(request.headers)
        found = await state.admitted(None, grant.name, lambda: state.ctx.model().list_models())
    except Exception as exc:
        return errors.response(exc)
    data = [{"id": m, "object": "model", "created": 0, "owned_by": "upstream"} for m in found]
    return JSONResponse({"object": "list", "data": data})


async def embeddings(request: Request) -> Response:
    """Passed through to the upstream's `/embeddings` (koog adds nothing, keeps nothing)."""
    state: ServerState = request.app.state.koog
    try:
        grant = state.grant(request.headers)
        model, texts, packed = _embedding_request(await request.body())
        vectors = await state.admitted(None, grant.name, lambda: _embed(state, model, texts))
    except Exception as exc:
        return errors.response(exc)
    data = [
        {"object": "embedding", "index": i, "embedding": _pack(v) if packed else v}
        for i, v in enumerate(vectors)
    ]
    usage = {"prompt_tokens": 0, "total_tokens": 0}
    return JSONResponse({"object": "list", "data": data, "model": model, "usage": usage})


def _pack(vector: list[float]) -> str:
    """`encoding_format: base64`: little-endian float32s, as OpenAI sends them."""
    import base64
    import struct

    return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")


def _embedding_request(raw: bytes) -> tuple[str, list[str], bool]:
    body = bodies.obj(raw)
    model, given = bodies.string(body, "model", required=True) or "", body.get("input")
    if body.get("encoding_format") not in (None, "float", "base64"):
        raise BadRequest("encoding_format must be 'float' or 'base64'", "encoding_format")
    texts = [given] if isinstance(given, str) else given
    if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
        raise BadRequest("'input' must be a string or an array of strings", "input")
    return model, texts, body.get("encoding_format") == "base64"


def _embed(state: ServerState, model: str, texts: list[str]) -> list[list[float]]:
    return state.ctx.with_memory(embeddings={"model": model}).embedder().embed(texts)


async def healthz(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


async def _http_error(request: Request, exc: Exception) -> Response:
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    text = f"no route {request.method} {request.url.path}" if status in (404, 405) else str(exc)
    kind = "not_found_error" if status == 404 else "invalid_request_error"
    return JSONResponse(error_body(text, kind), status_code=status)


def create_app(state: ServerState) -> Starlette:
    routes = [
        Route("/v1/chat/completions", chat_completions, methods=["POST"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/v1/embeddings", embeddings, methods=["POST"]),
        Route("/healthz", healthz, methods=["GET"]),
        *page_routes(),
        *responses.ROUTES,
        *messages.ROUTES,
        *koog_api.ROUTES,
    ]
    app = Starlette(routes=routes, exception_handlers={HTTPException: _http_error})
    app.state.koog = state
    return app
