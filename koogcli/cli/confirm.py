"""Asking before a destructive command: a question on a terminal, --yes anywhere else."""

from __future__ import annotations

import sys

from koogcli.ui.render import is_tty


def confirm_destructive(question: str, yes: bool) -> None:
    """Ask on a terminal; elsewhere demand --yes (SPEC §2: exit 2, nothing changed)."""
    from koogcli.core.errors import UsageError

    if yes:
        return
    if not is_tty(sys.stdin):
        raise UsageError(f"refusing to {question} without confirmation", hint="pass --yes")
    import typer

    from koogcli.ui.render import visible

    asked = visible(f"{question[0].upper()}{question[1:]}?")
    if not typer.confirm(asked, default=False, err=True):
        raise UsageError("cancelled; nothing changed")
