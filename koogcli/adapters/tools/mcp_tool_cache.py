"""The tools each MCP server offers, kept in the data dir's `mcp-tools.json`, so a turn
that calls none of them starts no server (an MCP server cost every one-shot 1-1.4 s).
Each entry is keyed by the digest of the server's configuration: a changed command,
argument, environment or URL lists the server again. The server's own answer replaces
the entry whenever it is started (to call a tool, or `koog mcp`). A cache: a file that
cannot be read counts as empty and is written anew."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from koogcli.adapters import atomic, paths
from koogcli.adapters.tools.mcp_hub import McpTool
from koogcli.core.errors import KoogError
from koogcli.core.mcp_config import McpServerConfig

_LIMIT = 8 << 20


def digest(spec: McpServerConfig) -> str:
    """What decides the tools a server offers: how it is started or reached, and which of
    its tools are enabled (hashed: the environment may hold secrets)."""
    said = [
        spec.command,
        list(spec.args),
        sorted(spec.env.items()),
        spec.cwd,
        spec.url,
        spec.bearer_token_env,
        sorted(spec.headers_env.items()),
        None if spec.enabled_tools is None else list(spec.enabled_tools),
        list(spec.disabled_tools),
    ]
    return hashlib.sha256(json.dumps(said, default=str).encode()).hexdigest()


class McpToolCache:
    def __init__(self, path: Path) -> None:
        self.path = path

    def get(self, spec: McpServerConfig) -> list[McpTool] | None:
        entry = self._read().get(spec.name)
        if not isinstance(entry, dict) or entry.get("digest") != digest(spec):
            return None
        listed = entry.get("tools")
        if not isinstance(listed, list):
            return None
        try:
            return [McpTool(**{**t, "server": spec.name}) for t in listed if isinstance(t, dict)]
        except TypeError:  # written by another version of koog
            return None

    def put(self, spec: McpServerConfig, tools: list[McpTool]) -> None:
        entry = {"digest": digest(spec), "tools": [asdict(t) for t in tools]}
        try:
            paths.ensure_dir(self.path.parent)
            with atomic.file_lock(self.path.with_suffix(".lock")):
                known = self._read()
                if known.get(spec.name) == entry:
                    return
                known[spec.name] = entry
                atomic.write_text(self.path, json.dumps(known, sort_keys=True), sync=False)
        except (KoogError, OSError):
            return  # only a cache: the next turn lists the server again

    def _read(self) -> dict[str, Any]:
        try:
            raw = (
                json.loads(atomic.read_bytes(self.path, limit=_LIMIT)) if self.path.exists() else {}
            )
        except (KoogError, ValueError, RecursionError, OSError):
            return {}
        return raw if isinstance(raw, dict) else {}
