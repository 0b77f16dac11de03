"""Which process owns a turn, and whether it is still running (SPEC §5.10).

A turn is "interrupted" only when its process died. A pid alone is not enough (pids are
reused), so the owner is the pid plus the process start time from `/proc` where the system
has it; without `/proc` the pid alone is checked.
"""

from __future__ import annotations

import os
from collections.abc import Mapping


def _stat(pid: int) -> list[bytes] | None:
    """Fields of /proc/PID/stat from the state on (the command name may hold spaces)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return None
    return stat[stat.rfind(b")") + 2 :].split()


def _start_time(pid: int) -> int | None:
    fields = _stat(pid)
    try:
        return int(fields[19]) if fields else None  # field 22, starttime
    except (IndexError, ValueError):
        return None


def current_owner() -> dict[str, object]:
    pid = os.getpid()
    return {"pid": pid, "start": _start_time(pid)}


def owner_alive(owner: Mapping[str, object] | None) -> bool:
    """True while the recorded process runs; an unknown or malformed owner counts as gone."""
    if not isinstance(owner, Mapping):
        return False
    pid, start = owner.get("pid"), owner.get("start")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    if pid == os.getpid():
        return start is None or start == _start_time(pid)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, owned by someone else
    except OSError:
        return False
    fields = _stat(pid)
    if fields and fields[0] in (b"Z", b"X"):
        return False  # killed, not yet reaped by its parent
    if isinstance(start, int) and fields:
        return _start_time(pid) == start
    return True
