"""The page's screens (sessions, one session, memory) and its actions (roll back, fork,
forget), each a call of the service the command line calls. Run on a worker thread."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from koogcli.core.errors import UsageError
from koogcli.core.names import SessionName
from koogcli.server import bodies
from koogcli.server.auth import Grant
from koogcli.server.errors import Refused
from koogcli.server.page import access, live, views
from koogcli.server.page.routes import action, page
from koogcli.services.context import AppContext

SOURCES = {"koog": "koog", "agent": "agents through serve"}
TEXT = "text/plain; charset=utf-8"
SHOWN_AT_FIRST = 400  # messages of a long session shown until all are asked for
_SEARCH_LIMIT = 50


def _prefixes(ctx: AppContext) -> dict[str, str]:
    return {name: client.prefix for name, client in ctx.settings.serve.clients.items()}


def _session(who: Grant, raw: str) -> SessionName:
    """A session the grant may see; "not yours" reads as "no such session"."""
    name = SessionName.parse(raw)
    if not who.allows(name.value):
        raise Refused(404, f"no session named {name.value!r}", "not_found_error")
    return name


def sessions(ctx: AppContext, who: Grant, request: Request) -> tuple[str, dict[str, Any]]:
    from koogcli.core.archive import TITLES
    from koogcli.services import history

    query = request.query_params
    rows = views.session_rows(
        (s for s in history.list_sessions(ctx) if who.allows(s.name)), _prefixes(ctx)
    )
    folders = sorted({r["folder"] for r in rows if r["folder"]})
    source, folder = query.get("source", ""), query.get("folder", "")
    shown = [
        r
        for r in rows
        if (not source or r["source"] == source) and (not folder or r["folder"] == folder)
    ]
    words = query.get("q", "").strip()
    return "sessions.html", {
        "title": "Sessions",
        "rows": shown,
        "total": len(rows),
        "sources": {**SOURCES, **{k: f"{v} · imported" for k, v in TITLES.items()}},
        "source": source,
        "folders": folders,
        "folder": folder,
        "q": words,
        **_found(ctx, who, words),
        "events": "/ui/events",
    }


def search(ctx: AppContext, who: Grant, request: Request) -> tuple[str, dict[str, Any]]:
    return "found.html", _found(ctx, who, request.query_params.get("q", "").strip())


def _found(ctx: AppContext, who: Grant, words: str) -> dict[str, Any]:
    """`history search`'s hits for the sessions the grant may see."""
    from koogcli.services.search import search as search_transcripts

    if not words:
        return {"found": None, "q": words}
    hits = [h for h in search_transcripts(ctx, words, None, 500) if who.allows(h.session)]
    return {"found": views.found_rows(hits[:_SEARCH_LIMIT]), "q": words, "more": len(hits) > 50}


def session(ctx: AppContext, who: Grant, request: Request) -> tuple[str, dict[str, Any]]:
    from koogcli.services import session_view

    name = _session(who, request.path_params["name"])
    view = session_view.read(ctx, name)
    tool = view.source.tool if view.source else None
    key, words = views.source_of(name.value, tool, _prefixes(ctx))
    every = request.query_params.get("all") == "1"
    start = 0 if every else max(0, len(view.messages) - SHOWN_AT_FIRST)
    return "session.html", {
        "title": name.value,
        "name": name.value,
        "source": key,
        "source_words": words,
        "origin": view.source,
        "forked_from": view.forked_from,
        "turns": views.turns(view, start),
        "earlier": start,
        "total": len(view.messages),
        "points": views.points(view),
        "checkpoints_on": view.checkpoints_on,
        "events": f"/ui/events?session={name.value}",
    }


def memory(ctx: AppContext, who: Grant, request: Request) -> tuple[str, dict[str, Any]]:
    from koogcli.services import memory as records

    query = request.query_params
    default = records.default_namespace(ctx)
    namespace = query.get("namespace", "") or None
    if namespace is not None:
        who.namespace(namespace)
    words, problem, scores = query.get("q", "").strip(), None, None
    listed = records.list_(ctx, namespace, all_namespaces=namespace is None)
    allowed = [r for r in listed if who.namespaces is None or r.namespace in who.namespaces]
    if words:
        try:
            hits = records.search(ctx, words, namespace or default, 50, 0.0, None)
            scores = {h.record.id: h.score for h in hits}
            allowed = [
                h.record
                for h in hits
                if who.namespaces is None or h.record.namespace in who.namespaces
            ]
        except UsageError as exc:  # e.g. embeddings that cannot be made now
            problem = exc.message
    every = sorted({r.namespace for r in listed} | {default})
    return "memory.html", {
        "title": "Memory",
        "records": views.records(allowed, scores),
        "namespaces": [n for n in every if who.namespaces is None or n in who.namespaces],
        "namespace": namespace or "",
        "q": words,
        "problem": problem,
        "searched_in": namespace or default,
    }


def rollback(ctx: AppContext, who: Grant, request: Request, body: dict[str, Any]) -> dict[str, Any]:
    """First the question (what would be undone, which files set back), then, confirmed,
    the rollback itself: `koog rollback` (`--latest` when no restore point is named)."""
    from koogcli.services import rollback as rolling
    from koogcli.ui.views import rollback_lines

    name = _session(who, request.path_params["name"])
    ctx.require_session(name)
    wanted = bodies.string(body, "checkpoint")
    plan = rolling.prepare(ctx, name, wanted, wanted is None, rolling.Options())
    if not bodies.boolean(body, "confirmed", False):
        return {"question": plan.question()}
    return {"done": rollback_lines(rolling.execute(ctx, plan))}


def fork(ctx: AppContext, who: Grant, request: Request, body: dict[str, Any]) -> dict[str, Any]:
    """`koog history fork NEW -s NAME --checkpoint ID` (all of it without a point)."""
    from koogcli.services import history

    name = _session(who, request.path_params["name"])
    new = SessionName.parse(bodies.string(body, "name", required=True) or "")
    who.session(new.value)
    done = history.fork(ctx, name, new, None, bodies.string(body, "checkpoint"))
    return {
        "session": done.session,
        "done": [f"forked {done.source} at message {done.at} into {done.session}"],
    }


def forget(ctx: AppContext, who: Grant, request: Request, body: dict[str, Any]) -> dict[str, Any]:
    """`koog memory forget ID`: gone for good, and never ingested again."""
    from koogcli.services import memory as records

    wanted = request.path_params["id"]
    try:
        record = records.show(ctx, wanted)
        who.namespace(record.namespace)
    except (UsageError, Refused):  # "not yours" and "no such record" are one answer
        raise Refused(404, f"no memory record {wanted!r}", "not_found_error") from None
    done = records.forget(ctx, [record])
    return {"forgotten": [r.id for r in done], "done": [f"forgot memory record {record.id[:8]}"]}


async def part(request: Request) -> Response:
    """An image a message holds, served by the page itself (the page loads nothing from
    anywhere else, and a data: URL is not its own origin)."""
    from koogcli.server.page.routes import render

    state = request.app.state.koog
    try:
        who = access.grant(state, request)
        name = _session(who, request.path_params["name"])
        wanted, number = request.path_params["message"], int(request.path_params["number"])
        found = await state.run(lambda: _image(state.ctx, name, wanted, number))
    except Refused as exc:
        return Response(
            exc.message, status_code=exc.status, headers=access.HEADERS, media_type=TEXT
        )
    except (UsageError, ValueError):  # a name that is no session's
        return Response("no such image", status_code=404, headers=access.HEADERS, media_type=TEXT)
    if found is None:
        return render(state, Grant((), (), "-"), "problem.html", 404, problem="no such image")
    mime, data = found
    headers = {**access.HEADERS, "content-security-policy": "default-src 'none'; sandbox"}
    return Response(data, media_type=mime, headers=headers)


def _image(
    ctx: AppContext, name: SessionName, wanted: str, number: int
) -> tuple[str, bytes] | None:
    from koogcli.services import history

    message = next((m for m in history.show(ctx, name) if m.id == wanted), None)
    return None if message is None else views.image_of(message, number)


async def export(request: Request) -> Response:
    """`koog history export` as a file to save: Markdown, the self-contained page, or JSON."""
    state = request.app.state.koog
    fmt = request.path_params["format"]
    try:
        who = access.grant(state, request)
        name = _session(who, request.path_params["name"])
        text, media = await state.run(lambda: _exported(state.ctx, name, fmt))
    except Refused as exc:
        return Response(
            exc.message, status_code=exc.status, headers=access.HEADERS, media_type=TEXT
        )
    except UsageError as exc:
        return Response(exc.message, status_code=404, headers=access.HEADERS, media_type=TEXT)
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name.value)
    headers = {
        **access.HEADERS,
        "content-disposition": f'attachment; filename="{safe}.{fmt}"',
    }
    return Response(text, media_type=media, headers=headers)


def _exported(ctx: AppContext, name: SessionName, fmt: str) -> tuple[str, str]:
    import json

    from koogcli.services import history
    from koogcli.ui import export as shared

    if fmt == "md":
        return shared.to_markdown(history.shareable(ctx, name)), "text/markdown; charset=utf-8"
    if fmt == "html":
        return shared.to_html(history.shareable(ctx, name)), "text/html; charset=utf-8"
    if fmt == "json":
        text = json.dumps(history.export(ctx, name), ensure_ascii=False, indent=2)
        return text, "application/json"
    raise UsageError(f"no export format {fmt!r}")


ROUTES = [
    Route("/ui/search", page(search), methods=["GET"]),
    Route("/ui/session/{name}", page(session), methods=["GET"]),
    Route("/ui/session/{name}/part/{message}/{number:int}", part, methods=["GET"]),
    Route("/ui/session/{name}/export.{format}", export, methods=["GET"]),
    Route("/ui/session/{name}/rollback", action(rollback), methods=["POST"]),
    Route("/ui/session/{name}/fork", action(fork), methods=["POST"]),
    Route("/ui/memory", page(memory), methods=["GET"]),
    Route("/ui/memory/{id}/forget", action(forget, session_bound=False), methods=["POST"]),
    Route("/ui/events", live.events, methods=["GET"]),
]
SESSIONS = page(sessions)
