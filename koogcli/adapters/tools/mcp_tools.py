"""McpToolBox: the tools of `[[mcp.servers]]` as koog tools, named `SERVER__TOOL`.

- Approval (`[mcp] approval`): `auto` never asks, `always` asks for every call, `writes`
  (the default) asks unless the tool is read-only by the annotations of a server the user
  marked `trusted`. Compensations ask only under `always`: the rollback that runs them was
  confirmed with each of them named.
- A call's result is written to its receipt durably before it is returned, as a Python
  tool's process does (core/receipts.py): a koog killed after the call returned records it
  on resume instead of calling again. A call in flight when koog dies is in doubt.
- Undo (`[[mcp.compensations]]`): the compensating tool runs in a process of its own that
  outlives koog (adapters/tools/tool_worker.py, `outlive`), on a connection of its own, so
  a rollback killed at any instant finishes each compensation exactly once. A koog Python
  callable may compensate instead.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from koogcli.adapters.tools import mcp_templates, outliving, tool_worker
from koogcli.adapters.tools.mcp_hub import McpFailure, McpHub, McpTool, run_once
from koogcli.adapters.tools.mcp_tool_cache import McpToolCache
from koogcli.core.errors import McpServerError, UsageError
from koogcli.core.mcp_config import McpCompensationConfig, McpConfig, server_of
from koogcli.core.tool_ports import McpServerInfo, McpToolInfo, ToolOutcome

_NAME = re.compile(r"[^A-Za-z0-9_-]")
# A server that could not start is tried again after this long (a later turn), not at
# each of the several looks one turn takes at the tools.
RETRY_SECONDS = 10.0


def offered_name(server: str, tool: str) -> str:
    """`SERVER__TOOL` in the characters and length every provider takes (a name that had
    to be changed gets a short digest, so two tools never share one)."""
    name = f"{server}__{_NAME.sub('_', tool)}"
    if name == f"{server}__{tool}" and len(name) <= 64:
        return name
    digest = hashlib.sha256(tool.encode()).hexdigest()[:6]
    return f"{name[:57]}_{digest}"


class McpCallFailed(Exception):
    """A compensation's MCP call failed (its process reports it as the error text)."""


class McpToolBox:
    def __init__(
        self,
        settings: McpConfig,
        env: Mapping[str, str],
        callables: Mapping[str, Callable[..., object]] | None = None,
        max_result_bytes: int = 1024 * 1024,
        hub: McpHub | None = None,
        warn: Callable[[str], None] | None = None,
        ask_all: bool = False,
        cache: McpToolCache | None = None,
    ) -> None:
        self.settings = settings
        self.env = env
        self.hub = hub or McpHub(settings.servers, env)
        self.callables = dict(callables or {})
        self.max_result_bytes = max_result_bytes
        self.warn = warn
        self.ask_all = ask_all  # `[tool_settings] ask` / `chat --ask-tools`: every call asks
        self.undo = {c.tool: c for c in settings.compensations}
        self._tools: dict[str, McpTool] = {}
        self._listed: set[str] = set()
        self._failed: dict[str, float] = {}  # server -> when its last start failed
        self.cache = cache

    # -- the model's tools --------------------------------------------------------------

    def specs(self) -> list[dict[str, object]]:
        return [
            {
                "type": "function",
                "function": {
                    "name": name,
                    "description": tool.description or f"{tool.name} (MCP server {tool.server})",
                    "parameters": tool.schema or {"type": "object", "properties": {}},
                },
            }
            for name, tool in self.offered().items()
        ]

    def names(self) -> list[str]:
        return list(self.offered())

    def offered(self) -> dict[str, McpTool]:
        """Every server's tools: as the cache knows them, else from the server, started
        when first needed. A server that cannot start is told and its tools left out; it
        is tried again on a later turn (not within RETRY_SECONDS, so one turn does not
        wait on it twice)."""
        for server in self.hub.servers:
            failed = self._failed.get(server)
            if server in self._listed or (
                failed is not None and time.monotonic() - failed < RETRY_SECONDS
            ):
                continue
            if self._from_cache(server):
                continue
            problem = self._list(server)
            if problem is not None and self.warn is not None:
                self.warn(f"{problem}; its tools are not offered")
        return dict(self._tools)

    def _list(self, server: str) -> McpFailure | None:
        """The server's tools into the offer (starting it when it is not running)."""
        try:
            tools = self.hub.tools(server)
        except McpFailure as exc:
            self._failed[server] = time.monotonic()
            return exc
        self._failed.pop(server, None)
        self._listed.add(server)
        self._offer(server, tools)
        if self.cache is not None:
            self.cache.put(self.hub.servers[server].spec, tools)
        return None

    def _from_cache(self, server: str) -> bool:
        """The server's tools as last listed, without starting it."""
        known = self.cache.get(self.hub.servers[server].spec) if self.cache else None
        if known is None:
            return False
        self._offer(server, known)
        return True

    def _offer(self, server: str, tools: list[McpTool]) -> None:
        for name in [n for n, t in self._tools.items() if t.server == server]:
            del self._tools[name]
        for tool in tools:
            self._tools[offered_name(server, tool.name)] = tool

    def tool(self, name: str) -> McpTool | None:
        if name not in self._tools and self._server_of(name) is not None:
            self.offered()
        return self._tools.get(name)

    def owns(self, name: str) -> bool:
        return self._server_of(name) is not None

    def _server_of(self, name: str) -> str | None:
        return server_of(name, self.hub.servers)

    # -- approval and effects -----------------------------------------------------------

    def read_only(self, name: str) -> bool:
        """Read-only by the annotations of a server the user trusts."""
        tool = self.tool(name)
        if tool is None or tool.read_only is not True:
            return False
        return self.hub.servers[tool.server].spec.trusted

    def asks(self, name: str, undo: bool = False) -> bool:
        mode = self.settings.approval
        if mode == "always" or self.ask_all:
            return True
        if mode == "auto" or undo:
            return False
        return not self.read_only(name)

    def effects(self, name: str) -> dict[str, object]:
        """What rollback needs to know of a call later, recorded with its result."""
        tool = self.tool(name)
        return {
            "read_only": self.read_only(name),
            "destructive": tool.destructive if tool is not None else None,
        }

    # -- calls ------------------------------------------------------------------------

    def call(self, name: str, arguments: str, receipt: Path | None = None) -> ToolOutcome:
        server = self._server_of(name)
        if server is not None:  # (re)started when not running: its failure is this call's
            problem = self._list(server)
            if problem is not None:
                return ToolOutcome(f"Error: {name}: {problem}", True, ran=False)
        tool = self._tools.get(name) if server is not None else None
        if server is None or tool is None:
            known = ", ".join(self._tools) or "none"
            text = f"Error: no tool named {name!r}; available: {known}"
            return ToolOutcome(text, True, ran=False)
        parsed = _arguments(arguments)
        if isinstance(parsed, ToolOutcome):
            return parsed
        label = f"{name}({_short(arguments)})"
        lock = outliving.hold(receipt) if receipt is not None else None
        try:
            outcome = self.hub.call(server, tool.name, parsed, label)
            outcome = ToolOutcome(
                tool_worker.truncated(outcome.text, self.max_result_bytes), outcome.error
            )
            if receipt is not None:  # durably, before the call's result is returned
                from koogcli.core import receipts

                tool_worker.write_receipt(receipt, receipts.encode(outcome.text, outcome.error))
            return outcome
        finally:
            if lock is not None:
                outliving.release(lock, receipt or Path())

    # -- undo -------------------------------------------------------------------------

    def has_rollback(self, name: str) -> bool:
        return name in self.undo

    def rollback(
        self,
        name: str,
        arguments: str,
        before: Callable[[], None] | None = None,
        receipt: Path | None = None,
        result: str | None = None,
    ) -> ToolOutcome:
        spec = self.undo.get(name)
        if spec is None:
            return ToolOutcome(f"Error: no compensation configured for {name!r}", True)
        args = _arguments(arguments)
        if isinstance(args, ToolOutcome):
            return args
        try:  # the configured templates; none: the call's own arguments, as they were
            given = (
                mcp_templates.render(
                    dict(spec.arguments), args, mcp_templates.parsed_result(result)
                )
                if spec.arguments
                else args
            )
        except mcp_templates.TemplateError as exc:
            return ToolOutcome(f"Error: the compensation of {name}: {exc}", True)
        kwargs = dict(given) if isinstance(given, dict) else {}
        function, timeout = self._compensation(spec, kwargs)
        if before is not None:
            before()
        return tool_worker.run(
            spec.compensation or spec.callable or name,
            function,
            {},
            _text,
            timeout,
            self.max_result_bytes,
            receipt,
            outlive=receipt is not None,
        )

    def _compensation(
        self, spec: McpCompensationConfig, kwargs: dict[str, Any]
    ) -> tuple[Callable[[], object], float]:
        if spec.callable is not None:
            function = self.callables[spec.callable]
            return (lambda: function(**kwargs)), 60.0
        assert spec.compensation is not None
        server_name, tool = spec.compensation.split("__", 1)
        server = self.hub.servers.get(server_name)
        if server is None:
            message = f"the compensation's server {server_name!r} is not configured or enabled"

            def missing() -> object:
                raise McpCallFailed(message)

            return missing, 10.0
        label = f"{spec.compensation}({_short(json.dumps(kwargs, ensure_ascii=False))})"
        env = dict(self.env)

        def compensate() -> object:
            done = run_once(server.spec, env, tool, kwargs, label)
            if done.error:
                raise McpCallFailed(done.text.removeprefix("Error: "))
            return done.text

        limit = server.spec.startup_timeout_seconds + server.spec.tool_timeout_seconds + 10
        return compensate, limit

    def forget(self, receipt: Path) -> None:
        outliving.forget(receipt)

    # -- the catalog (`koog mcp list|tools`, `/mcp`) --------------------------------------

    def servers_info(self) -> list[McpServerInfo]:
        found = []
        for spec in self.settings.servers:
            where = (
                f"stdio: {' '.join([spec.command, *spec.args])}"
                if spec.command is not None
                else f"http: {spec.url}"
            )
            if not spec.enabled:
                found.append(McpServerInfo(spec.name, where, False, spec.trusted, "disabled", None))
                continue
            problem = self._list(spec.name)
            count: int | None = None
            if problem is None:
                count = len([t for t in self._tools.values() if t.server == spec.name])
                state = "running"
            else:
                state = "failed: " + str(problem).removeprefix(f"MCP server {spec.name!r} ")
            found.append(McpServerInfo(spec.name, where, True, spec.trusted, state, count))
        return found

    def tools_info(self, server: str | None = None) -> list[McpToolInfo]:
        if server is not None and server not in {s.name for s in self.settings.servers}:
            known = ", ".join(s.name for s in self.settings.servers) or "none"
            raise UsageError(f"no MCP server named {server!r} (configured: {known})")
        if server is not None and server not in self.hub.servers:
            raise UsageError(f"MCP server {server!r} is disabled (enabled = false)")
        if server is not None:
            problem = self._list(server)
            if problem is not None:  # a failure to start is the command's error
                raise McpServerError(str(problem))
        found = []
        for name, tool in self.offered().items():
            if server is not None and tool.server != server:
                continue
            spec = self.undo.get(name)
            undo = (spec.compensation or spec.callable) if spec is not None else None
            found.append(
                McpToolInfo(
                    name,
                    tool.server,
                    tool.description,
                    tool.read_only,
                    tool.destructive,
                    tool.idempotent,
                    tool.open_world,
                    self.asks(name),
                    undo,
                )
            )
        return found

    def settle(self, name: str, receipt: Path) -> ToolOutcome | None:
        server = self._server_of(name)
        spec = self.hub.servers[server].spec if server is not None else None
        limit = spec.startup_timeout_seconds + spec.tool_timeout_seconds + 10 if spec else 60.0
        return outliving.settle(receipt, limit)

    def close(self) -> None:
        self.hub.close()


def _arguments(arguments: str) -> dict[str, Any] | ToolOutcome:
    try:
        parsed = json.loads(arguments or "{}")
    except ValueError as exc:
        return ToolOutcome(f"Error: the arguments are not JSON: {exc}", True, ran=False)
    except RecursionError:
        return ToolOutcome("Error: the arguments are nested too deep", True, ran=False)
    if not isinstance(parsed, dict):
        return ToolOutcome("Error: the arguments must be a JSON object", True, ran=False)
    return parsed


def _short(arguments: str, limit: int = 80) -> str:
    text = arguments.strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str)
