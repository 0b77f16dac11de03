"""How `koog mcp list|tools` and the REPL's /mcp show MCP servers and tools."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict

from koogcli.core.tool_ports import McpServerInfo, McpToolInfo
from koogcli.ui.render import one_line, table


def server_rows(servers: Sequence[McpServerInfo]) -> str:
    rows = [
        (
            s.name,
            s.state if len(s.state) <= 60 else s.state[:59] + "…",
            "" if s.tools is None else str(s.tools),
            "yes" if s.trusted else "no",
            s.transport,
        )
        for s in servers
    ]
    return table(rows, ("SERVER", "STATE", "TOOLS", "TRUSTED", "TRANSPORT"))


def hints(tool: McpToolInfo) -> str:
    """The server's annotations in words; `-` for none given."""
    said = [
        word
        for word, given in (
            ("read-only", tool.read_only),
            ("destructive", tool.destructive),
            ("idempotent", tool.idempotent),
            ("open-world", tool.open_world),
        )
        if given
    ]
    return ", ".join(said) or "-"


def tool_rows(tools: Sequence[McpToolInfo], described: bool = True) -> str:
    """One row a tool; UNDONE BY is `none` for a call rollback would leave in place.
    Without `described` (the REPL's narrower view), no description column."""
    rows = [
        (
            t.name,
            hints(t),
            "asks" if t.asks else "runs",
            t.compensation or ("-" if t.read_only else "none"),
            *((one_line(t.description, 50),) if described else ()),
        )
        for t in tools
    ]
    headers = ("TOOL", "HINTS", "APPROVAL", "UNDONE BY")
    return table(rows, (*headers, "DESCRIPTION") if described else headers)


def server_dicts(servers: Sequence[McpServerInfo]) -> list[dict[str, object]]:
    return [asdict(s) for s in servers]


def tool_dicts(tools: Sequence[McpToolInfo]) -> list[dict[str, object]]:
    return [asdict(t) for t in tools]
