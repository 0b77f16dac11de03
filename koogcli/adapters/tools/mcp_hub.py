"""Connections to MCP servers (the official `mcp` SDK), for koog's synchronous turn.

The SDK is async; a turn is not. The hub runs one event loop in a background thread and
keeps each server's connection open in a task of its own (the SDK's context managers must
be left by the task that entered them); a call is a coroutine handed to that loop and
waited for. A server is started the first time it is needed, within its
`startup_timeout_seconds`; a call is cut off after `tool_timeout_seconds`. A server that
fails, hangs or dies becomes a failed call naming the server and the end of its stderr,
never a traceback; the next call starts it again. Closing the hub stops every server, and
a stdio server is started under a keeper that stops it when koog dies (mcp_launch.py).

Imported only when `[[mcp.servers]]` names a server: the SDK takes a while to import.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import tempfile
import threading
import warnings
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any, TypeVar

from koogcli.adapters.tools import mcp_launch
from koogcli.core import exit_hooks
from koogcli.core.mcp_config import McpServerConfig
from koogcli.core.tool_ports import ToolOutcome

T = TypeVar("T")
STDERR_TAIL = 600


class McpFailure(Exception):
    """A server could not be used: the message names it and says why."""


@dataclass(frozen=True)
class McpTool:
    server: str
    name: str
    description: str
    schema: dict[str, Any]
    read_only: bool | None  # the server's readOnlyHint, when it gave one
    destructive: bool | None
    idempotent: bool | None
    open_world: bool | None


@dataclass
class _Server:
    spec: McpServerConfig
    client: Any = None
    tools: list[McpTool] = field(default_factory=list)
    stop: asyncio.Event | None = None
    task: asyncio.Task[None] | None = None
    stderr: IO[str] | None = None
    error: str | None = None  # why its last start or connection failed
    refused: int | None = None  # the last HTTP error status it answered (the SDK drops it)


class McpHub:
    def __init__(
        self, servers: Sequence[McpServerConfig], env: Mapping[str, str], every: bool = False
    ) -> None:
        self.servers = {s.name: _Server(s) for s in servers if s.enabled or every}
        self.env = env
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._guard = threading.Lock()

    # -- what koog asks ---------------------------------------------------------------

    def tools(self, name: str) -> list[McpTool]:
        """The server's tools, starting it if it is not running (McpFailure: it cannot)."""
        server = self.servers[name]
        return self._wait(self._started(server), None)

    def call(self, name: str, tool: str, arguments: dict[str, Any], label: str) -> ToolOutcome:
        """One tool call; every failure is a failed call whose text says what happened."""
        server = self.servers[name]
        spec = server.spec
        limit = spec.startup_timeout_seconds + spec.tool_timeout_seconds + 15
        try:
            return self._wait(self._call(server, tool, arguments, label), limit)
        except McpFailure as exc:
            return ToolOutcome(f"Error: {label}: {exc}", True)

    def close(self) -> None:
        """Stop every server and the loop (also at exit)."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        with contextlib.suppress(Exception, KeyboardInterrupt):  # Ctrl-C while closing
            asyncio.run_coroutine_threadsafe(self._close_all(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        self._loop = self._thread = None

    # -- the loop ---------------------------------------------------------------------

    def _wait(self, coro: Coroutine[Any, Any, T], timeout: float | None) -> T:
        future = asyncio.run_coroutine_threadsafe(coro, self._running())
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise McpFailure("no answer in time") from None
        except BaseException:  # Ctrl-C: the call is cancelled with the turn
            future.cancel()
            raise

    def _running(self) -> asyncio.AbstractEventLoop:
        with self._guard:
            if self._loop is None:
                import logging

                # The SDK logs what koog reports itself (a server gone, a session not
                # closed); nothing of it reaches the terminal.
                quiet = logging.getLogger("mcp")
                quiet.addHandler(logging.NullHandler())
                quiet.propagate = False
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="koog-mcp", daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
                exit_hooks.on_exit(self.close)  # koog's exit skips atexit (cli/process.py)
                atexit.register(self.close)
            return self._loop

    async def _started(self, server: _Server) -> list[McpTool]:
        if server.client is not None and server.task is not None and not server.task.done():
            return server.tools
        await self._stop(server)
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        server.stop = asyncio.Event()
        server.error = None
        # Kept open while the server may write to it; read for the end of what it said.
        server.stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115
        server.task = asyncio.create_task(self._keep(server, ready))
        limit = server.spec.startup_timeout_seconds
        try:
            await asyncio.wait_for(asyncio.shield(ready), limit)
        except TimeoutError:
            await self._stop(server)
            server.error = f"did not start within {limit:g}s (startup_timeout_seconds)"
            raise McpFailure(self._failed(server)) from None
        except Exception as exc:
            await self._stop(server)
            server.error = f"failed to start: {self._refusal(server) or describe(exc)}"
            raise McpFailure(self._failed(server)) from None
        return server.tools

    async def _keep(self, server: _Server, ready: asyncio.Future[None]) -> None:
        """The task that holds the server's connection open until it is stopped."""
        from mcp import Client

        try:
            async with Client(self._transport(server), mode="legacy") as client:
                server.tools = await _listed(client, server.spec)
                server.client = client
                ready.set_result(None)
                assert server.stop is not None
                await server.stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else McpFailure("stopped"))
                ready.exception()  # retrieved: a start that timed out has nobody waiting
            elif server.error is None and not isinstance(exc, asyncio.CancelledError):
                server.error = f"stopped: {describe(exc)}"
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            server.client = None

    def _transport(self, server: _Server) -> Any:
        spec = server.spec
        if spec.command is not None:
            from mcp.client.stdio import StdioServerParameters, stdio_client

            command, args = mcp_launch.kept(spec.command, list(spec.args))
            params = StdioServerParameters(
                command=command, args=args, env=dict(spec.env), cwd=spec.cwd
            )
            return stdio_client(params, errlog=server.stderr)  # type: ignore[arg-type]
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        headers = {}
        if spec.bearer_token_env:
            headers["Authorization"] = (
                f"Bearer {self._secret(spec.bearer_token_env, 'bearer_token_env')}"
            )
        for header, env in spec.headers_env.items():
            headers[header] = self._secret(env, f"headers_env.{header}")
        timeout = httpx2.Timeout(
            spec.startup_timeout_seconds, read=max(spec.tool_timeout_seconds, 30.0)
        )

        async def seen(response: httpx2.Response) -> None:
            if response.status_code >= 400:
                server.refused = response.status_code

        hooks = {"response": [seen]}
        http = httpx2.AsyncClient(headers=headers, timeout=timeout, event_hooks=hooks)
        assert spec.url is not None
        return streamable_http_client(spec.url, http_client=http)

    def _refusal(self, server: _Server) -> str | None:
        """An HTTP server's refusal in words, naming where its credentials come from."""
        status, server.refused = server.refused, None
        if status is None:
            return None
        if status in (401, 403):
            spec = server.spec
            where = [f"bearer_token_env {spec.bearer_token_env}"] if spec.bearer_token_env else []
            where += [f"headers_env {v}" for v in spec.headers_env.values()]
            check = f"; check {', '.join(where)}" if where else "; it needs credentials"
            return f"it refused the credentials (HTTP {status}{check})"
        return f"it answered HTTP {status}"

    def _secret(self, env: str, key: str) -> str:
        value = self.env.get(env, "")
        if not value:
            raise McpFailure(f"{key}: the environment variable {env} is not set")
        return value

    async def _call(
        self, server: _Server, tool: str, arguments: dict[str, Any], label: str
    ) -> ToolOutcome:
        await self._started(server)
        limit = server.spec.tool_timeout_seconds
        task = server.task
        try:
            result = await asyncio.wait_for(
                server.client.call_tool(tool, arguments, read_timeout_seconds=limit), limit
            )
        except TimeoutError:
            if await self._gone(server, task):  # hung whole: the next call starts it again
                await self._stop(server)
            return ToolOutcome(
                f"Error: {label} did not finish within {limit:g}s (tool_timeout_seconds) and "
                "was cancelled; whether it had its effect is unknown",
                True,
            )
        except Exception as exc:
            if await self._gone(server, task):
                server.error = server.error or f"stopped: {describe(exc)}"
                await self._stop(server)
                return ToolOutcome(
                    f"Error: {label}: the MCP server '{server.spec.name}' stopped during the "
                    f"call; whether it had its effect is unknown{self._tail(server)}",
                    True,
                )
            return ToolOutcome(f"Error: {label}: {describe(exc)}", True)
        return rendered(result, label)

    async def _gone(self, server: _Server, task: asyncio.Task[None] | None) -> bool:
        """After a failed call: whether the server is gone (its connection closed, or it
        no longer answers a ping)."""
        await asyncio.sleep(0.05)  # a dead server's connection closes a moment later
        if task is None or task.done() or server.client is None:
            return True
        try:
            with warnings.catch_warnings():  # ping is legacy-only; koog connects as legacy
                warnings.simplefilter("ignore")
                await asyncio.wait_for(server.client.send_ping(), 3)
        except Exception:
            return True
        return False

    async def _stop(self, server: _Server) -> None:
        if server.stop is not None:
            server.stop.set()
        task, server.task = server.task, None
        if task is not None and not task.done():
            if server.client is not None:  # connected: it closes in its own time
                with contextlib.suppress(BaseException):
                    await asyncio.wait_for(asyncio.shield(task), 5)
            if not task.done():  # still starting (a start that timed out), or stuck
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
        server.client = None

    async def _close_all(self) -> None:
        await asyncio.gather(*(self._stop(s) for s in self.servers.values()))

    def _failed(self, server: _Server) -> str:
        return f"MCP server '{server.spec.name}' {server.error}{self._tail(server)}"

    def _tail(self, server: _Server) -> str:
        """The end of what the server wrote to stderr, for the user to read."""
        if server.stderr is None:
            return ""
        with contextlib.suppress(OSError, ValueError):
            server.stderr.flush()
            server.stderr.seek(0)
            text = server.stderr.read().strip()
            if text:
                return f"; its stderr ends: {text[-STDERR_TAIL:]}"
        return ""


async def _listed(client: Any, spec: McpServerConfig) -> list[McpTool]:
    """Every page of the server's tools, less those the config leaves out."""
    tools: list[McpTool] = []
    cursor = None
    for _ in range(100):
        page = await client.list_tools(cursor=cursor)
        for tool in page.tools:
            if spec.enabled_tools is not None and tool.name not in spec.enabled_tools:
                continue
            if tool.name in spec.disabled_tools:
                continue
            hints = tool.annotations
            tools.append(
                McpTool(
                    spec.name,
                    tool.name,
                    tool.description or "",
                    dict(tool.input_schema or {"type": "object"}),
                    getattr(hints, "read_only_hint", None),
                    getattr(hints, "destructive_hint", None),
                    getattr(hints, "idempotent_hint", None),
                    getattr(hints, "open_world_hint", None),
                )
            )
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


def rendered(result: Any, label: str) -> ToolOutcome:
    """A tool's result as the text the model reads: its text parts, other parts named,
    the structured result when there is no text; `isError` a failed call."""
    import json

    parts: list[str] = []
    for block in result.content or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind in ("image", "audio"):
            parts.append(f"[{kind} {getattr(block, 'mime_type', '')}]")
        elif kind == "resource_link":
            parts.append(f"[resource {getattr(block, 'uri', '')}]")
        elif kind == "resource":
            inner = getattr(block, "resource", None)
            parts.append(getattr(inner, "text", None) or f"[resource {getattr(inner, 'uri', '')}]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False, default=str))
    text = "\n".join(parts) or "ok"
    if result.is_error:
        return ToolOutcome(f"Error: {label}: {text}", True)
    return ToolOutcome(text)


def describe(exc: BaseException) -> str:
    """One line for a failure, from inside the task groups' exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    response = getattr(exc, "response", None)
    status = getattr(response, "status_code", None)
    if isinstance(status, int):
        return f"HTTP {status}" + (" (check its token)" if status in (401, 403) else "")
    text = str(exc).strip() or type(exc).__name__
    error = getattr(exc, "error", None)
    message = getattr(error, "message", None)
    if isinstance(message, str) and message:
        text = message
    return text.splitlines()[0][:300]


def run_once(
    spec: McpServerConfig, env: Mapping[str, str], tool: str, arguments: dict[str, Any], label: str
) -> ToolOutcome:
    """One call on a connection of its own, for a process that makes just this one (a
    compensation's process, which outlives koog: adapters/tools/outliving.py)."""
    hub = McpHub([spec], env, every=True)
    try:
        return hub.call(spec.name, tool, arguments, label)
    finally:
        hub.close()
