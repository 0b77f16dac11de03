"""`koog mcp list|tools` and /mcp: the configured MCP servers and their tools (§5.20)."""

from __future__ import annotations

from koogcli.core.tool_ports import McpServerInfo, McpToolInfo
from koogcli.services import compose
from koogcli.services.context import AppContext


def servers(ctx: AppContext) -> list[McpServerInfo]:
    """Every configured server, each enabled one started to count its tools."""
    catalog = compose.mcp_catalog(ctx)
    if catalog is None:
        return []
    try:
        return catalog.servers_info()
    finally:
        catalog.close()


def tools(ctx: AppContext, server: str | None = None) -> list[McpToolInfo]:
    """The tools offered to the model (one server's, when named), with their hints, whether
    a call asks first, and what undoes it."""
    catalog = compose.mcp_catalog(ctx)
    if catalog is None:
        from koogcli.core.errors import UsageError

        if server is not None:
            raise UsageError(f"no MCP server named {server!r}: none is configured")
        return []
    try:
        return catalog.tools_info(server)
    finally:
        catalog.close()
