"""`koog storage`: which backend holds the sessions, its schema version, and migrations."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from koogcli.services.context import AppContext


def status(ctx: AppContext) -> dict[str, object]:
    """Backend, where it is (never a password), schema version and counts."""
    info = ctx.storage.describe()
    if info.get("backend") == "files":
        info["counts"] = {"sessions": len(ctx.history.names())}
    return info


def migrate(ctx: AppContext) -> list[int]:
    """The schema versions applied now; empty when the schema was current already."""
    return ctx.storage.migrate()
