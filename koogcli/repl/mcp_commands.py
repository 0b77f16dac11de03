"""/mcp: the MCP servers this session's turns may call, and their tools."""

from __future__ import annotations

from typing import TYPE_CHECKING

from koogcli.repl.slash import REGISTRY

if TYPE_CHECKING:
    from koogcli.repl.state import ReplState


@REGISTRY.add("mcp", "/mcp", "the MCP servers, their state and their tools")
def _mcp(state: ReplState, args: str) -> None:
    from koogcli.services import compose
    from koogcli.ui import mcp_views

    catalog = compose.mcp_catalog(state.ctx)  # the session's own: servers stay running
    if catalog is None:
        state.ui.info("no MCP servers configured ([[mcp.servers]] in the config file)")
        return
    state.ui.show(mcp_views.server_rows(catalog.servers_info()))
    tools = catalog.tools_info()
    if tools:
        state.ui.show(mcp_views.tool_rows(tools, described=False))
