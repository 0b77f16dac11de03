"""Optional features come with extras of the package (`pip install 'koog-cli[postgres]'`):
the chat client alone stays light. A feature used without its extra says which one to
install, in one line (exit 2), instead of an import error."""

from __future__ import annotations

import importlib

from koogcli.core.errors import UsageError

# What each extra brings, and the feature that needs it.
EXTRAS = {
    "psycopg": ("postgres", "PostgreSQL storage and search"),
    "numpy": ("vectors", "vector search and embeddings"),
    "mcp": ("mcp", "MCP servers and their tools"),
}


def need(module: str) -> None:
    """Import `module`, or say which extra brings it."""
    try:
        importlib.import_module(module)
    except ImportError:
        extra, feature = EXTRAS[module]
        raise UsageError(
            f"{feature} come with koog's {extra!r} extra: pip install 'koog-cli[{extra}]'",
            hint="or install everything with 'koog-cli[all]'",
        ) from None
