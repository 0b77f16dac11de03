"""Work to finish before the process ends: koog exits without interpreter teardown
(cli/process.py `leave`), so `atexit` never runs; what must still happen (MCP servers
closed gracefully, so they can finish writing) is registered here instead."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

_HOOKS: list[Callable[[], None]] = []


def on_exit(hook: Callable[[], None]) -> None:
    if hook not in _HOOKS:
        _HOOKS.append(hook)


def run() -> None:
    """Each hook once, newest first; one that fails does not stop the others."""
    while _HOOKS:
        hook = _HOOKS.pop()
        with contextlib.suppress(Exception, KeyboardInterrupt):  # Ctrl-C while closing
            hook()
