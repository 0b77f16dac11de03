"""`koog checkpoint create|list|show|delete` and `koog rollback`."""

from __future__ import annotations

import sys

import typer

from koogcli.cli.confirm import confirm_destructive
from koogcli.cli.options import complete_checkpoints, globals_of, session_option
from koogcli.core.errors import CompensationError
from koogcli.ui import render, views

app = typer.Typer(help="Restore points and step checkpoints of a session.", no_args_is_help=True)

SESSION = session_option()
JSON = typer.Option(False, "--json", help="Print JSON.")


@app.command()
def create(
    ctx: typer.Context,
    session: str | None = SESSION,
    label: str | None = typer.Option(None, "--label", metavar="TEXT", help="A name to find it by."),
    as_json: bool = JSON,
) -> None:
    """Take a restore point of the session's history now."""
    from koogcli.services import checkpoints

    app_ctx = globals_of(ctx).build()
    made = checkpoints.create(app_ctx, app_ctx.session(session), label)
    if as_json:
        render.json_out(views.checkpoint_dict(made))
    else:
        render.out(made.id)


@app.command("list")
def list_(
    ctx: typer.Context,
    session: str | None = SESSION,
    all_: bool = typer.Option(False, "--all", help="Include step checkpoints and tombstones."),
    as_json: bool = JSON,
) -> None:
    """List restore points, newest first.

    For an agent's session, the files its edits changed that rolling back to each would
    set back.
    """
    from koogcli.services import agent_files, checkpoints

    app_ctx = globals_of(ctx).build()
    name = app_ctx.session(session)
    found = checkpoints.list_(app_ctx, name, all_)
    files = agent_files.point_files(app_ctx, name, found)
    if as_json:
        render.json_out([views.checkpoint_dict(c, files=files.get(c.id)) for c in found])
    elif found:
        render.out(views.checkpoint_rows(found, files))
    else:
        render.note("no checkpoints yet")


@app.command()
def show(
    ctx: typer.Context,
    checkpoint_id: str = typer.Argument(..., metavar="ID", autocompletion=complete_checkpoints),
    session: str | None = SESSION,
    as_json: bool = JSON,
) -> None:
    """Show one checkpoint with its messages."""
    from koogcli.services import checkpoints

    app_ctx = globals_of(ctx).build()
    found = checkpoints.show(app_ctx, checkpoint_id, app_ctx.session(session) if session else None)
    if as_json:
        render.json_out(views.checkpoint_dict(found, with_messages=found.readable))
        return
    render.out(views.checkpoint_rows([found]))
    if found.messages:
        render.out("\n" + render.format_messages(found.messages, "text"))


@app.command()
def delete(
    ctx: typer.Context,
    checkpoint_id: str = typer.Argument(..., metavar="ID", autocompletion=complete_checkpoints),
    session: str | None = SESSION,
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask."),
) -> None:
    """Delete one checkpoint."""
    from koogcli.services import checkpoints

    app_ctx = globals_of(ctx).build()
    target = checkpoints.find(app_ctx, checkpoint_id, app_ctx.session(session) if session else None)
    confirm_destructive(f"delete checkpoint {target.id} of session {target.session!r}", yes)
    checkpoints.delete(app_ctx, target.id, app_ctx.session(target.session))
    render.note(f"deleted checkpoint {target.id}")


def rollback(
    ctx: typer.Context,
    checkpoint_id: str | None = typer.Argument(
        None, metavar="[ID]", autocompletion=complete_checkpoints
    ),
    session: str | None = SESSION,
    latest: bool = typer.Option(False, "--latest", help="Undo the last change."),
    compensate: bool = typer.Option(
        True,
        "--compensate/--no-compensate",
        help="Undo the removed tool calls' effects with their compensating tools (default), "
        "or leave them.",
    ),
    force: bool = typer.Option(
        False, "--force", help="Restore even a history whose tool effects a rollback undid."
    ),
    compensate_imported: bool = typer.Option(
        False, "--compensate-imported", help="Undo tool calls that came by history import too."
    ),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask."),
    as_json: bool = JSON,
) -> None:
    """Restore a session's history to a restore point.

    With --latest, the newest restore point that differs: undo the last change. Tool calls the rollback takes out are undone by their compensating tools, newest
    first, unless --no-compensate; each is reported as undone or left in place.
    """
    from koogcli.services import rollback as service

    app_ctx = globals_of(ctx).build()
    name = app_ctx.session(session)
    approve = render.tool_approver(undo=True)
    options = service.Options(compensate, force, compensate_imported)
    plan = service.prepare(app_ctx, name, checkpoint_id, latest, options, approve)
    for line in views.finished_lines(name.value, plan.finished):
        render.note(line)
    asked = not yes and render.is_tty(sys.stdin)  # the question names any call koog cannot undo
    if not plan.retried:  # finishing a stopped rollback changes nothing more: not asked
        confirm_destructive(plan.question(), yes)
    result = service.execute(app_ctx, plan, approve, confirmed=asked)
    if as_json:
        render.json_out(views.rollback_dict(result))
    else:
        for line in views.rollback_lines(result):
            render.note(line)
    if result.failed:
        raise CompensationError(
            f"{len(result.failed)} compensating tool call(s) failed or were declined; "
            "the history was restored"
        )
