"""The page's routes (SPEC §6 "The page"): each reads or acts through the services the
command line uses, on a worker thread, and renders a template; actions are POSTs checked
by access.py and admitted as /koog/v1's are (one at a time on a session's family)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Route

from koogcli.server import bodies, koog_api
from koogcli.server.auth import Grant
from koogcli.server.errors import Refused, described
from koogcli.server.page import access
from koogcli.server.state import ServerState
from koogcli.services.context import AppContext

HERE = Path(__file__).parent
Build = Callable[[AppContext, Grant, Request], tuple[str, dict[str, Any]]]
Act = Callable[[AppContext, Grant, Request, dict[str, Any]], dict[str, Any]]
_STATIC = {
    "page.css": "text/css; charset=utf-8",
    "page.js": "text/javascript; charset=utf-8",
    "icon.svg": "image/svg+xml",
}


@lru_cache(maxsize=1)
def _templates() -> Any:
    from jinja2 import Environment, FileSystemLoader, select_autoescape

    return Environment(
        loader=FileSystemLoader(HERE / "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )


def render(
    state: ServerState, who: Grant, template: str, status: int = 200, **values: Any
) -> Response:
    from markupsafe import Markup

    values.setdefault("markup", Markup)
    token = access.page_token(state.page_secret, who)
    body = _templates().get_template(template).render(page_token=token, **values)
    headers = {**access.HEADERS, "content-type": "text/html; charset=utf-8"}
    return Response(body, status_code=status, headers=headers)


def page(build: Build) -> Callable[[Request], Awaitable[Response]]:
    """A GET of the page: who it is for (or the token form), then the service's answer."""

    async def endpoint(request: Request) -> Response:
        state: ServerState = request.app.state.koog
        try:
            who = access.grant(state, request)
        except Refused as exc:
            return _refused(state, exc)
        try:
            template, values = await state.run(lambda: build(state.ctx, who, request))
        except Exception as exc:
            status, said = _described(exc)
            return render(state, who, "problem.html", status, problem=said, title="Not shown")
        return render(state, who, template, **values)

    return endpoint


def action(act: Act, session_bound: bool = True) -> Callable[[Request], Awaitable[Response]]:
    """A POST the page sent (its origin, its token), run as the command line runs it."""

    async def endpoint(request: Request) -> Response:
        state: ServerState = request.app.state.koog
        try:
            who = access.grant(state, request)
            access.check_action(request, state.page_secret, who)
            body = bodies.obj(await request.body())
            named = request.path_params.get("name")
            family = koog_api.family(who, named) if session_bound else None
            data = await state.admitted(
                family, who.name, lambda: act(state.ctx, who, request, body)
            )
        except Exception as exc:
            status, answer = described(exc)
            return JSONResponse(answer, status_code=status, headers=access.HEADERS)
        return JSONResponse(data, headers=access.HEADERS)

    return endpoint


def _described(exc: BaseException) -> tuple[int, str]:
    status, body = described(exc)
    error = body.get("error")
    said = error.get("message") if isinstance(error, dict) else None
    return status, str(said or exc)


def _refused(state: ServerState, exc: Refused) -> Response:
    """No token yet (or a wrong one): the form that asks for it; anything else said."""
    from koogcli.server.auth import Grant as Anyone

    nobody = Anyone((), (), "-")
    if exc.status == 401:
        return render(state, nobody, "login.html", 401, problem=None, title="Token")
    return render(state, nobody, "problem.html", exc.status, problem=exc.message, title="Refused")


async def login(request: Request) -> Response:
    """The token a person gave: checked as the API checks it, then kept in the cookie."""
    state: ServerState = request.app.state.koog
    try:
        access.check_action(request, state.page_secret, Grant((), (), "-"))
        token = bodies.string(bodies.obj(await request.body()), "token", required=True) or ""
        state.grant({"authorization": f"Bearer {token.strip()}"})
    except Exception as exc:
        status, body = described(exc)
        return JSONResponse(body, status_code=status, headers=access.HEADERS)
    kept = JSONResponse({"ok": True}, headers=access.HEADERS)
    kept.set_cookie(
        access.COOKIE, token.strip(), httponly=True, samesite="strict", path="/", secure=False
    )
    return kept


async def static(request: Request) -> Response:
    name = request.path_params["name"]
    if name not in _STATIC:
        return Response("not found", status_code=404, headers=access.HEADERS)
    headers = {**access.HEADERS, "cache-control": "no-cache"}
    return FileResponse(HERE / "static" / name, media_type=_STATIC[name], headers=headers)


async def front(request: Request) -> Response:
    """`/`: the page for a browser; what agents' probes get (Claude Code's `HEAD /`), as
    it was, for anyone else."""
    if request.method == "GET" and "text/html" in request.headers.get("accept", ""):
        from koogcli.server.page import screens

        return await screens.SESSIONS(request)
    from koogcli.server.messages.route import root

    return await root(request)


def routes() -> list[Route]:
    from koogcli.server.page import screens

    return [
        Route("/", front, methods=["GET", "HEAD"]),
        Route("/ui/static/{name}", static, methods=["GET"]),
        Route("/ui/login", login, methods=["POST"]),
        *screens.ROUTES,
    ]
