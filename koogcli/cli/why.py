"""`koog why`: what shaped a stored reply (SPEC §5.17)."""

from __future__ import annotations

import typer

from koogcli.cli.options import globals_of, session_option
from koogcli.ui import render, views


def why(
    ctx: typer.Context,
    session: str | None = session_option(),
    turn: int | None = typer.Option(
        None,
        "--turn",
        min=1,
        metavar="N",
        help="Turn N, as `history search` counts turns (default: the last answered).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Show what shaped a stored reply.

    The system prompt, preprocessors, summary, memory records and budget of its request,
    recorded with the reply, so it stays true after compression and rollback.
    """
    from koogcli.services import why as service

    app_ctx = globals_of(ctx).build()
    found = service.explain(app_ctx, app_ctx.session(session), turn)
    if as_json:
        render.json_out(views.why_dict(found))
    else:
        render.out("\n".join(views.why_lines(found)))
