"""Slash commands for restore points: /checkpoint [LABEL], /checkpoints, /rollback [ID]."""

from __future__ import annotations

from typing import TYPE_CHECKING

from koogcli.core.errors import UsageError
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
    "/rollback [ID] [--force] [--no-compensate]",
    "restore a checkpoint (no ID: undo the last change), undoing later tool calls",
    complete=completers.checkpoints,
)
def _rollback(state: ReplState, args: str) -> None:
    from koogcli.services import rollback

    words = args.split()
    flags = {w for w in words if w.startswith("--")}
    unknown = flags - {"--force", "--no-compensate"}
    if unknown:
        raise UsageError(f"/rollback does not take {', '.join(sorted(unknown))}")
    wanted = next((w for w in words if not w.startswith("--")), None)
    options = rollback.Options(compensate="--no-compensate" not in flags, force="--force" in flags)
    plan = rollback.prepare(
        state.ctx, state.session, wanted, wanted is None, options, state.approve_undo
    )
    for line in views.finished_lines(state.session.value, plan.finished):
        state.ui.info(line)
    if not plan.retried and not state.ask(plan.question() + "?"):
        state.ui.info("nothing changed")
        return
    result = rollback.execute(state.ctx, plan, state.approve_undo, confirmed=True)
    for line in views.rollback_lines(result, repl=True):
        state.ui.info(line)
