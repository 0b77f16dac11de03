"""Global options shared by every subcommand (kept apart from the app, so subcommand
modules never import the app that imports them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import typer


@dataclass
class Globals:
    """Global options, plus a model factory tests may set through CliRunner's `obj`."""

    config: str | None = None
    data_dir: str | None = None
    model_factory: Any = None
    env: dict[str, str] | None = field(default=None)

    def build(self, flags: dict[str, object] | None = None) -> Any:
        from koogcli.services import context

        return context.build(self.config, self.data_dir, self.env, flags, self.model_factory)


def globals_of(ctx: typer.Context) -> Globals:
    found = ctx.find_object(Globals)
    return found if found is not None else Globals()
