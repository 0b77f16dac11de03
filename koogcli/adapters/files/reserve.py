"""Room kept on the data dir's disk for closing a failed turn (SPEC §5.19: no false
interrupted turn).

A turn that fails because the disk is full must still write its tombstone, or every later
command reports it as an interrupted turn and offers to send it again. So the data dir
holds `koog.reserve`, 256 KiB of zeros (real blocks, not a sparse file). Closing a failed
turn whose tombstone could not be written deletes the reserve, which frees that room, and
writes the tombstone again; the next turn puts the reserve back when there is room (a full
disk leaves it out, and nothing else depends on it).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

SIZE = 256 * 1024


def keep(path: Path) -> None:
    """Put the reserve in place if it is missing; never an error."""
    if path.exists() or not path.parent.is_dir():
        return
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except OSError:
        return
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(bytes(SIZE))
    except OSError:  # no room for it: none kept
        with contextlib.suppress(OSError):
            path.unlink()


def spend(path: Path) -> bool:
    """Free the reserve's room; False when there was none to free."""
    try:
        if path.is_symlink() or not path.is_file():
            return False
        path.unlink()
    except OSError:
        return False
    return True
