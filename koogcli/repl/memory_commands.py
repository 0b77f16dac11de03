"""/memory QUERY, /search QUERY and /why [N] in the REPL."""

from __future__ import annotations

from typing import TYPE_CHECKING

from koogcli.core.errors import UsageError
from koogcli.repl.slash import REGISTRY
from koogcli.ui import views

if TYPE_CHECKING:
    from koogcli.repl.state import ReplState


@REGISTRY.add("memory", "/memory QUERY", "search long-term memory")
def _memory(state: ReplState, args: str) -> None:
    from koogcli.services import memory

    if not args:
        raise UsageError("usage: /memory QUERY")
    settings = state.ctx.settings.long_term_memory.retrieval
    hits = memory.search(state.ctx, args, settings.namespace, 10, 0.0, None, settings.where)
    if hits:
        state.ui.show(views.hits_table(hits))
    else:
        state.ui.info("no memory matched")


@REGISTRY.add("search", "/search QUERY", "find a message in every session's transcript")
def _search(state: ReplState, args: str) -> None:
    from koogcli.services import search
    from koogcli.ui import found_views

    if not args.strip():
        raise UsageError("usage: /search QUERY")
    found = search.search(state.ctx, args, None, 20)
    if found:
        state.ui.show("\n".join(found_views.found_lines(found, lambda word: word)))
    else:
        state.ui.info(f"nothing in the transcripts holds {args.strip()!r}")


@REGISTRY.add("why", "/why [N]", "what shaped the last reply (or turn N's)")
def _why(state: ReplState, args: str) -> None:
    from koogcli.services import why

    number = args.strip()
    if number and not number.isdigit():
        raise UsageError("usage: /why [N]", hint="N is a turn number, 1 for the first")
    found = why.explain(state.ctx, state.session, int(number) if number else None)
    state.ui.show("\n".join(views.why_lines(found)))
