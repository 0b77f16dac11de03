"""Slash commands for restore points: /checkpoint [LABEL], /checkpoints, /rollback [ID]."""

from __future__ import annotations

from typing import TYPE_CHECKING

from koogcli.repl import completers
from koogcli.repl.slash import REGISTRY
from koogcli.ui import views

if TYPE_CHECKING:
    from koogcli.repl.state import ReplState


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
    "/rollback [ID] [--force]",
    "restore a checkpoint and undo later tool calls (no ID: the last change, no undo)",
    complete=completers.checkpoints,
)
def _rollback(state: ReplState, args: str) -> None:
    from koogcli.services import checkpoints

    words = args.split()
    force = "--force" in words
    wanted = next((w for w in words if w != "--force"), None)
    target = checkpoints.choose(state.ctx, state.session, wanted, latest=wanted is None)
    undoing = checkpoints.preview(state.ctx, state.session, target, force)
    question = f"roll {state.session.value} back to checkpoint {target.id}, undoing {undoing}?"
    if not state.ask(question):
        state.ui.info("nothing changed")
        return
    result = checkpoints.rollback(
        state.ctx,
        state.session,
        target,
        compensate=wanted is not None,
        force=force,
        approve=state.approve_undo,
    )
    for line in views.rollback_lines(result, repl=True):
        state.ui.info(line)
    for failed in result.failed:
        state.ui.info(f"compensating {failed.call.name} failed")
