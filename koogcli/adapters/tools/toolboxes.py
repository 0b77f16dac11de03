"""koog's Python tools and its MCP servers' tools as one ToolBox: each name belongs to one
of them (an MCP tool's is `SERVER__TOOL`; a Python tool of that shape is refused at start)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from koogcli.adapters.tools.mcp_tools import McpToolBox
from koogcli.adapters.tools.python_tools import PythonToolBox
from koogcli.core.tool_ports import ToolOutcome


class ToolBoxes:
    def __init__(self, python: PythonToolBox, mcp: McpToolBox) -> None:
        self.python = python
        self.mcp = mcp

    def _of(self, name: str) -> PythonToolBox | McpToolBox:
        return self.mcp if self.mcp.owns(name) else self.python

    def specs(self) -> list[dict[str, object]]:
        return [*self.python.specs(), *self.mcp.specs()]

    def names(self) -> list[str]:
        return [*self.python.names(), *self.mcp.names()]

    def call(self, name: str, arguments: str, receipt: Path | None = None) -> ToolOutcome:
        return self._of(name).call(name, arguments, receipt)

    def asks(self, name: str, undo: bool = False) -> bool:
        return self._of(name).asks(name, undo)

    def effects(self, name: str) -> dict[str, object] | None:
        return self._of(name).effects(name)

    def has_rollback(self, name: str) -> bool:
        return self._of(name).has_rollback(name)

    def rollback(
        self,
        name: str,
        arguments: str,
        before: Callable[[], None] | None = None,
        receipt: Path | None = None,
        result: str | None = None,
    ) -> ToolOutcome:
        return self._of(name).rollback(name, arguments, before, receipt, result)

    def forget(self, receipt: Path) -> None:
        self.python.forget(receipt)

    def settle(self, name: str, receipt: Path) -> ToolOutcome | None:
        return self._of(name).settle(name, receipt)
