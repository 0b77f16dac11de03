"""The tools a model may call and the MCP servers behind them, as the services see them
(adapters/tools implements them)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    text: str
    error: bool = False
    ran: bool = True  # False: refused before it ran (not approved); nothing to undo


@dataclass(frozen=True)
class McpServerInfo:
    """One configured MCP server as `koog mcp list` shows it."""

    name: str
    transport: str  # "stdio: COMMAND ARGS" or "http: URL"
    enabled: bool
    trusted: bool
    state: str  # "running", "disabled", or "failed: why"
    tools: int | None  # how many it offers; None when it is not running


@dataclass(frozen=True)
class McpToolInfo:
    """One MCP tool as `koog mcp tools` shows it."""

    name: str  # as offered to the model: SERVER__TOOL
    server: str
    description: str
    read_only: bool | None  # the server's hints, as it gave them
    destructive: bool | None
    idempotent: bool | None
    open_world: bool | None
    asks: bool  # whether a call asks first ([mcp] approval)
    compensation: str | None  # what undoes a call: a tool, a callable, or None


class McpCatalog(Protocol):
    """The configured MCP servers and their tools (each server started to list them)."""

    def servers_info(self) -> list[McpServerInfo]: ...

    def tools_info(self, server: str | None = None) -> list[McpToolInfo]: ...

    def close(self) -> None: ...


class ToolBox(Protocol):
    """The tools the model may call, with their compensating actions (Koog's registry)."""

    def specs(self) -> list[dict[str, object]]: ...

    def names(self) -> list[str]: ...

    def call(self, name: str, arguments: str, receipt: Path | None = None) -> ToolOutcome:
        """Run a tool; with `receipt`, its result is written there durably before it is
        returned (a koog killed in between resumes with it: core/receipts.py)."""
        ...

    def asks(self, name: str, undo: bool = False) -> bool:
        """Whether the user must approve each call of this tool (`undo`: each compensation)."""
        ...

    def effects(self, name: str) -> dict[str, object] | None:
        """What a rollback must know of a call of this tool, recorded with its result (an
        MCP tool's hints: adapters/tools/mcp_tools.py); None: nothing beyond its name."""
        ...

    def has_rollback(self, name: str) -> bool: ...

    def rollback(
        self,
        name: str,
        arguments: str,
        before: Callable[[], None] | None = None,
        receipt: Path | None = None,
        result: str | None = None,
    ) -> ToolOutcome:
        """Run the compensating function; `before` runs right before it is called; `result`
        is the call's result, when known (a compensation's arguments may name it). With
        `receipt`, its process finishes even if koog dies, and writes its result there
        durably before returning it (SPEC §5.18; adapters/tools/outliving.py)."""
        ...

    def forget(self, receipt: Path) -> None:
        """The result is recorded elsewhere now: the receipt goes, and its session's folder
        once empty (what cannot be removed is left for a later sweep)."""
        ...

    def settle(self, name: str, receipt: Path) -> ToolOutcome | None:
        """The result a call's or a compensation's process wrote to `receipt`, once that
        process has ended (a compensation that outlived its koog is waited for, and stopped
        past the tool's time limit); None: it never returned."""
        ...
