"""Slash commands for restore points: /checkpoint [LABEL], /checkpoints, /rollback [ID]."""

from __future__ import annotations

from typing import TYPE_CHECKING

from koogcli.cli import views
from koogcli.repl.slash import REGISTRY

if TYPE_CHECKING:
    from koogcli.repl.loop import ReplState


@REGISTRY.add("checkpoint", "/checkpoint [LABEL]", "take a restore point of this session now")
def _checkpoint(state: ReplState, args: str) -> None:
    from koogcli.services import checkpoints

    made = checkpoints.create(state.ctx, state.session, args or None)
    state.ui.info(f"checkpoint {made.id}" + (f" ({made.label})" if made.label else ""))


@REGISTRY.add("checkpoints", "/checkpoints", "list this session's restore points, newest first")
def _checkpoints(state: ReplState, args: str) -> None:
    from koogcli.services import checkpoints

    found = checkpoints.list_(state.ctx, state.session)
    if found:
        state.ui.show(views.checkpoint_rows(found))
    else:
        state.ui.info("no checkpoints yet")


@REGISTRY.add(
    "rollback",
    "/rollback [ID]",
    "restore a checkpoint and undo later tool calls (no ID: the latest, no undo)",
)
def _rollback(state: ReplState, args: str) -> None:
    from koogcli.services import checkpoints

    target = checkpoints.choose(state.ctx, state.session, args or None, latest=not args)
    undoing = checkpoints.describe(target)
    if not state.ask(
        f"roll {state.session.value} back to checkpoint {target.id}, undoing {undoing}?"
    ):
        state.ui.info("nothing changed")
        return
    result = checkpoints.rollback(
        state.ctx, state.session, target, compensate=bool(args), approve=state.approve
    )
    for line in views.rollback_lines(result):
        state.ui.info(line)
    for failed in result.failed:
        state.ui.info(f"compensating {failed.call.name} failed")
