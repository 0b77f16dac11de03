"""`koog models` and `koog roles`: what can be chosen with -m and -r."""

from __future__ import annotations

import typer

from koogcli.cli.options import globals_of
from koogcli.ui import render

JSON = typer.Option(False, "--json", help="Print JSON.")


def models(ctx: typer.Context, as_json: bool = JSON) -> None:
    """List the endpoint's models; * marks the configured one."""
    app_ctx = globals_of(ctx).build()
    app_ctx, using = app_ctx.with_endpoint()
    if using is not None:
        render.note(using)
    configured = app_ctx.settings.llm.model
    found = app_ctx.model().list_models()
    if as_json:
        render.json_out([{"id": m, "configured": m == configured} for m in found])
        return
    for m in found:  # an upstream's ids: shown, never executed, to a terminal or not
        render.out(f"{'*' if m == configured else ' '} {render.visible(m)}")
    if configured not in found:
        render.note(f"the configured model {configured!r} is not among them")


def roles(ctx: typer.Context, as_json: bool = JSON) -> None:
    """List the roles for `koog chat -r NAME`.

    Roles are [roles.NAME] tables in the config file.
    """
    settings = globals_of(ctx).build().settings
    if as_json:
        render.json_out(
            [
                {"name": n, "system": r.system, "model": r.model, "temperature": r.temperature}
                for n, r in sorted(settings.roles.items())
            ]
        )
        return
    if not settings.roles:
        render.note('no roles yet; add [roles.NAME] with system = "..." to the config file')
        return
    rows = [
        (n, r.model or settings.llm.model, render.one_line(r.system, 60))
        for n, r in sorted(settings.roles.items())
    ]
    render.out(render.table(rows, ("ROLE", "MODEL", "SYSTEM PROMPT")))


def templates(ctx: typer.Context, as_json: bool = JSON) -> None:
    """List the saved prompts for `koog chat -t NAME`.

    `koog chat --save NAME ...` writes them as [templates.NAME] in the config file.
    """
    from koogcli.services import config_info

    found = config_info.templates(globals_of(ctx).build())
    if as_json:
        render.json_out([{"name": n, **spec} for n, spec in found.items()])
        return
    if not found:
        render.note('no templates yet; `koog chat --save NAME "a prompt with $input"` saves one')
        return
    rows = [
        (
            n,
            str(spec.get("model", "")),
            render.one_line(str(spec.get("system", "")), 30),
            render.one_line(str(spec.get("prompt", "")), 50),
        )
        for n, spec in found.items()
    ]
    render.out(render.table(rows, ("TEMPLATE", "MODEL", "SYSTEM PROMPT", "PROMPT")))
