"""Session names (SPEC §4): 1-64 of letters, digits, '.', '_', '-', not starting with '.';
also '~' after the first character, which `koog serve` uses for forks (`work~2`).

A name is validated before any path is built from it, so no name can escape the data dir.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from koogcli.core.errors import InvalidSessionNameError

_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._~-]{0,63}", re.ASCII)
_FORK = re.compile(r"~[0-9]+$")


@dataclass(frozen=True, slots=True)
class SessionName:
    value: str

    @classmethod
    def parse(cls, raw: str) -> SessionName:
        if not _NAME.fullmatch(raw):
            # As typed; only what a terminal would not show (control characters) escaped.
            shown = "".join(
                c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in raw
            )
            raise InvalidSessionNameError(
                f"invalid session name: '{shown[:80]}'",
                hint="use 1-64 ASCII letters, digits, '.', '_', '-' or '~', not starting with '.' or '~'",
            )
        return cls(raw)

    def __str__(self) -> str:
        return self.value


def family_name(name: str) -> str:
    """`work~3` → `work`: the session a fork koog serve made belongs with (a name that is
    no such fork: itself)."""
    return _FORK.sub("", name)


def generated(now: datetime, suffix: str) -> SessionName:
    """A new session's name: sorting names sorts by creation time, even within a second
    (`20261129-153012-417-a3f2`); `suffix` keeps two names of one millisecond apart."""
    stamp = now.strftime("%Y%m%d-%H%M%S") + f"-{now.microsecond // 1000:03d}"
    return SessionName.parse(f"{stamp}-{suffix}")
