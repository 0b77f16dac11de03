"""Asking before a destructive command: a question on a terminal, answered by one key
(typed-ahead keys stay unread for what comes next), --yes anywhere else."""

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
    from koogcli.ui.environment import current
    from koogcli.ui.keypress import read_char
    from koogcli.ui.render import visible

    err = current().stderr
    err.write(visible(f"{question[0].upper()}{question[1:]}?") + " [y/N]: ")
    err.flush()
    key = read_char(sys.stdin).lower()  # one key: y is yes, any other (Enter) is no
    err.write(("y" if key == "y" else "n") + "\n")
    err.flush()
    if key != "y":
        raise UsageError("cancelled; nothing changed")
