"""A streamable-HTTP MCP server for tests, built with the `mcp` SDK, behind a bearer token.

    python -m tests.support.mcp_http_server --token T [--log FILE]

Prints `serving http://127.0.0.1:PORT/mcp` once it listens. Tools: `echo` (read-only),
`note` (appends its text to --log), `slow_note` (the same, after a while), `hang` (never answers), `die` (ends the server's
process in the middle of the call). A request without `Authorization: Bearer T` is 401.
"""

from __future__ import annotations

import argparse
import os
import socket
import time
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations


def build(log: Path | None) -> MCPServer:
    server = MCPServer("koog-test-http")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def echo(text: str) -> str:
        """Say the text back."""
        return f"echo: {text}"

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
    def note(text: str) -> str:
        """Keep a note."""
        if log is not None:
            with log.open("a") as out:
                out.write(text + "\n")
        return f"noted: {text}"

    @server.tool()
    def slow_note(text: str, seconds: float) -> str:
        """Keep a note after a while."""
        time.sleep(seconds)
        return note(text)

    @server.tool()
    def hang(seconds: float = 600) -> str:
        """Take a very long time."""
        time.sleep(seconds)
        return "done"

    @server.tool()
    def die() -> str:
        """End the server in the middle of the call."""
        os._exit(9)

    return server


class BearerOnly:
    """401 for any HTTP request without the token; lifespan passes through."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if (
            scope["type"] == "http"
            and dict(scope["headers"]).get(b"authorization") != self.expected
        ):
            await send({"type": "http.response.start", "status": 401, "headers": []})
            await send({"type": "http.response.body", "body": b"unauthorized"})
            return
        await self.app(scope, receive, send)


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser()
    parser.add_argument("--token", required=True)
    parser.add_argument("--log", type=Path)
    args = parser.parse_args()
    app = BearerOnly(build(args.log).streamable_http_app(), args.token)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)

    import asyncio

    async def serve() -> None:
        task = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started:
            await asyncio.sleep(0.02)
        print(f"serving http://127.0.0.1:{port}/mcp", flush=True)
        await task

    asyncio.run(serve())


if __name__ == "__main__":
    main()
