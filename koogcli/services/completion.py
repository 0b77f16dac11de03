"""Values for shell completion (`koog --install-completion`): session names, checkpoint ids,
strategies, roles and namespaces, read from the data dir and config. Completion must
never fail loudly, so any problem completes nothing."""

from __future__ import annotations

from collections.abc import Callable

from koogcli.core.errors import KoogError
from koogcli.services.context import AppContext

STRATEGIES = ("whole", "last-n", "since", "chunked", "facts", "per-system")


def _safe(values: Callable[[], list[str]], incomplete: str) -> list[str]:
    try:
        return sorted(v for v in values() if v.startswith(incomplete))
    except (KoogError, OSError):
        return []


def sessions(ctx: AppContext, incomplete: str) -> list[str]:
    return _safe(ctx.history.names, incomplete)


def checkpoints(ctx: AppContext, incomplete: str, session: str | None = None) -> list[str]:
    """Restore-point ids: of `session` when the command line names one, else of all."""
    from koogcli.core.names import SessionName

    def ids() -> list[str]:
        names = [session] if session else ctx.checkpoints.sessions()
        return [
            c.id
            for name in names
            for c in ctx.checkpoints.headers(SessionName.parse(name))
            if c.kind == "restore"
        ]

    return _safe(ids, incomplete)


def strategies(incomplete: str) -> list[str]:
    return [s for s in STRATEGIES if s.startswith(incomplete)]


def roles(ctx: AppContext, incomplete: str) -> list[str]:
    return _safe(lambda: list(ctx.settings.roles), incomplete)


def namespaces(ctx: AppContext, incomplete: str) -> list[str]:
    return _safe(ctx.long_term_memory.namespaces, incomplete)
