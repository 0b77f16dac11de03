"""Optional features come with extras of the package (`pip install 'koog-cli[postgres]'`):
the chat client alone stays light. A feature used without its extra says which one to
install, in one line (exit 2), instead of an import error."""

from __future__ import annotations

import importlib.util
import sys

from koogcli.core.errors import UsageError

# What each extra brings, and the feature that needs it.
EXTRAS = {
    "psycopg": ("postgres", "PostgreSQL storage and search"),
    "numpy": ("vectors", "vector search and embeddings"),
    "mcp": ("mcp", "MCP servers and their tools"),
}


def need(module: str) -> None:
    """Say which extra brings `module` when it is not installed (found, not imported: the
    mcp SDK alone takes 0.4 s to import, and a turn that calls no MCP tool needs none)."""
    if not _installed(module):
        extra, feature = EXTRAS[module]
        raise UsageError(
            f"{feature} come with koog's {extra!r} extra: pip install 'koog-cli[{extra}]'",
            hint="or install everything with 'koog-cli[all]'",
        ) from None


def _installed(module: str) -> bool:
    if module in sys.modules:
        return sys.modules[module] is not None
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False
