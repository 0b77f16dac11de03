"""Global options shared by every subcommand (kept apart from the app, so subcommand
modules never import the app that imports them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:
    from koogcli.services.context import AppContext, ModelFactory


@dataclass
class Globals:
    """Global options, plus a model factory tests may set through CliRunner's `obj`."""

    config: str | None = None
    data_dir: str | None = None
    model_factory: ModelFactory | None = None
    env: dict[str, str] | None = field(default=None)

    def build(self, flags: dict[str, object] | None = None) -> AppContext:
        from koogcli.services import compose
        from koogcli.ui import render

        return compose.build(
            self.config, self.data_dir, self.env, flags, self.model_factory, warn=render.warning
        )


def globals_of(ctx: typer.Context) -> Globals:
    found = ctx.find_object(Globals)
    return found if found is not None else Globals()


def _app_ctx(ctx: typer.Context) -> AppContext:
    """The context a completion runs in: global options may not have been processed."""
    from koogcli.services import compose

    root = ctx.find_root().params
    return compose.build(root.get("config"), root.get("data_dir"))


def complete_sessions(ctx: typer.Context, incomplete: str) -> list[str]:
    from koogcli.services import completion

    return completion.sessions(_app_ctx(ctx), incomplete)


def complete_checkpoints(ctx: typer.Context, incomplete: str) -> list[str]:
    from koogcli.services import completion

    session = ctx.params.get("session")  # -s given before the id: that session's only
    return completion.checkpoints(
        _app_ctx(ctx), incomplete, session if isinstance(session, str) else None
    )


def complete_strategies(incomplete: str) -> list[str]:
    from koogcli.services import completion

    return completion.strategies(incomplete)


def complete_roles(ctx: typer.Context, incomplete: str) -> list[str]:
    from koogcli.services import completion

    return completion.roles(_app_ctx(ctx), incomplete)


def complete_namespaces(ctx: typer.Context, incomplete: str) -> list[str]:
    from koogcli.services import completion

    return completion.namespaces(_app_ctx(ctx), incomplete)


def session_option(help: str = "Session name (default: the most recently used).") -> Any:
    return typer.Option(
        None, "-s", "--session", metavar="NAME", help=help, autocompletion=complete_sessions
    )


def with_endpoint(app_ctx: AppContext, always: bool = False) -> AppContext:
    """The context that talks to the model chat would use (a local server's first model
    when none is configured), saying which: every time when `always` (the REPL), else the
    first time for that endpoint and model (a pipeline's stderr stays quiet after)."""
    import time

    from koogcli.ui import render

    app_ctx, found = app_ctx.with_endpoint()
    if found is not None:
        learned, endpoint, model = (
            app_ctx.learned_limits,
            app_ctx.endpoint_key,
            app_ctx.settings.llm.model,
        )
        if always or not learned.told(endpoint, model):
            render.note(found)
            if not always:
                learned.note_told(endpoint, model, int(time.time()))
    return app_ctx
