"""`koog config path|show|init|validate`."""

from __future__ import annotations

from pathlib import Path

import typer

from koogcli.cli.options import globals_of
from koogcli.ui import render

app = typer.Typer(help="Find, show, create and check the configuration.", no_args_is_help=True)


@app.command()
def path(ctx: typer.Context) -> None:
    """Print the config file path in use."""
    from koogcli.services import config_info

    g = globals_of(ctx)
    render.out(str(config_info.config_file(g.config, g.env)[0]))


@app.command()
def show(ctx: typer.Context, as_json: bool = typer.Option(False, "--json")) -> None:
    """Print the effective settings and their sources.

    The API key itself is never shown.
    """
    from koogcli.services import config_info

    effective = config_info.effective(globals_of(ctx).build())
    if as_json:
        render.json_out(effective)
        return
    render.out(config_info.as_toml(effective))


@app.command()
def init(
    ctx: typer.Context, force: bool = typer.Option(False, "--force", help="Overwrite.")
) -> None:
    """Write a documented config file with every default."""
    from koogcli.services import config_info

    g = globals_of(ctx)
    written = config_info.init(g.config, g.env, force)
    render.note(f"wrote {written}")


@app.command()
def validate(
    ctx: typer.Context, file: Path | None = typer.Argument(None, help="Default: the file in use.")
) -> None:
    """Check a config file without running anything."""
    from koogcli.services import config_info

    g = globals_of(ctx)
    checked = config_info.validate(file, g.config, g.env)
    render.note(f"ok: {checked}")
