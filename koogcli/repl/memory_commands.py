"""/memory QUERY in the REPL."""

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
