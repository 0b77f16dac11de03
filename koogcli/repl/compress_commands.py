"""/compress [STRATEGY] in the REPL."""

from __future__ import annotations

from typing import TYPE_CHECKING

from koogcli.repl import completers
from koogcli.repl.slash import REGISTRY
from koogcli.ui import render, views

if TYPE_CHECKING:
    from koogcli.repl.state import ReplState


@REGISTRY.add(
    "compress",
    "/compress [STRATEGY]",
    "summarise this session's history with the model in use (undo: /rollback)",
    complete=completers.strategies,
)
def _compress(state: ReplState, args: str) -> None:
    from koogcli.services.compression import CompressRequest, StrategyChoice, compress

    with render.ProgressBar("summarising") as bar:
        result = compress(
            state.ctx,
            CompressRequest(state.session, StrategyChoice(args or None), chat_model=state.model),
            bar.update,
        )
    for problem in result.problems:
        state.ui.warning(problem)
    state.ui.info(views.compress_line(result, repl=True))
