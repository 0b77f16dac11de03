"""What Tab offers after a slash command: sessions, models, strategies, restore points,
roles. Completion must never break typing, so any failure offers nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from koogcli.core.errors import KoogError
from koogcli.core.messages import local_time
from koogcli.ui.views import checkpoint_kind

if TYPE_CHECKING:
    from koogcli.repl.state import ReplState

Values = list[tuple[str, str]]


def _safe(values: Callable[[], Values], typed: str) -> Values:
    try:
        return [(value, meta) for value, meta in values() if value.startswith(typed)]
    except (KoogError, OSError):
        return []


def sessions(state: ReplState, typed: str) -> Values:
    def names() -> Values:
        return [
            (n, "this one" if n == state.session.value else "") for n in state.ctx.history.names()
        ]

    return _safe(names, typed)


def models(state: ReplState, typed: str) -> Values:
    """The endpoint's models, asked for once per REPL (completion runs in a thread)."""

    def listed() -> Values:
        if state.models is None:
            state.models = sorted(state.ctx.model().list_models())
        chosen = state.model or state.ctx.settings.llm.model
        return [(m, "in use" if m == chosen else "") for m in state.models]

    try:
        return _safe(listed, typed)
    except Exception:
        return []


def strategies(state: ReplState, typed: str) -> Values:
    from koogcli.services.completion import STRATEGIES

    return [(s, "") for s in STRATEGIES if s.startswith(typed)]


def checkpoints(state: ReplState, typed: str) -> Values:
    """This session's restore points, newest first, described by kind and label."""
    from koogcli.services import checkpoints as service

    def restore_points() -> Values:
        found = service.list_(state.ctx, state.session)
        return [
            (c.id, " ".join(filter(None, (local_time(c.created_at), checkpoint_kind(c), c.label))))
            for c in found
            if c.kind == "restore"
        ]

    return _safe(restore_points, typed)


def roles(state: ReplState, typed: str) -> Values:
    return _safe(
        lambda: [(n, r.model or "") for n, r in sorted(state.ctx.settings.roles.items())], typed
    )
