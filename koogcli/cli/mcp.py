"""`koog mcp list|tools`: the configured MCP servers and their tools (SPEC §5.20)."""

from __future__ import annotations

import typer

from koogcli.cli.options import globals_of
from koogcli.ui import render

app = typer.Typer(
    help="MCP tool servers: what is configured and what it offers.", no_args_is_help=True
)
JSON = typer.Option(False, "--json", help="Print JSON.")


@app.command("list")
def list_(ctx: typer.Context, as_json: bool = JSON) -> None:
    """Servers, their state and how many tools each offers (each is started to ask)."""
    from koogcli.services import mcp_info
    from koogcli.ui import mcp_views

    found = mcp_info.servers(globals_of(ctx).build())
    if as_json:
        render.json_out(mcp_views.server_dicts(found))
    elif not found:
        render.note("no MCP servers configured ([[mcp.servers]] in the config file)")
    else:
        render.out(mcp_views.server_rows(found))


@app.command()
def tools(
    ctx: typer.Context,
    server: str | None = typer.Argument(None, metavar="[SERVER]", help="Only this server's."),
    as_json: bool = JSON,
) -> None:
    """Tools as offered to the model (SERVER__TOOL): hints, approval, what undoes a call."""
    from koogcli.services import mcp_info
    from koogcli.ui import mcp_views

    found = mcp_info.tools(globals_of(ctx).build(), server)
    if as_json:
        render.json_out(mcp_views.tool_dicts(found))
    elif not found:
        render.note("no MCP tools offered")
    else:
        render.out(mcp_views.tool_rows(found))
