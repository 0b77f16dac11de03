"""The token `koog serve` requires where it cannot tell who is connecting (SPEC §6).

Without `[serve] tokens`, only the user who runs the server is served; on a system that
does not say who owns a loopback socket (no Linux socket tables), or with `[serve]
require_token = true`, a token is required instead. It is made once, kept 0600 in the
data dir (`serve-token`) so clients can be configured with it, and shown by
`koog serve --print-token`.
"""

from __future__ import annotations

import secrets
from pathlib import Path

from koogcli.adapters.atomic import read_bytes, write_text
from koogcli.core.errors import StorageError

FILE_NAME = "serve-token"
_SHORTEST = 16


def kept_token(root: Path) -> str:
    """The data dir's serve token, made on first use."""
    path = root / FILE_NAME
    try:
        kept = read_bytes(path, limit=4096).decode("ascii", "replace").strip()
    except FileNotFoundError:
        kept = ""
    if kept:
        if len(kept) < _SHORTEST or not kept.isascii() or not kept.isprintable():
            raise StorageError(
                f"{path} does not hold a usable token (at least {_SHORTEST} printable "
                "characters); delete it and a new one is made"
            )
        return kept
    made = secrets.token_urlsafe(32)
    write_text(path, made + "\n")
    return made
