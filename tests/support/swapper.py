"""A hostile process that swaps a folder and a symbolic link back and forth as fast as the
system lets it (`renameat2(RENAME_EXCHANGE)`: at every instant one of the two names is the
folder and the other the link, never neither), to race koog's checks against its reads
and writes of an agent's files."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

_SWAP = r"""
import ctypes, os, signal, sys
libc = ctypes.CDLL(None, use_errno=True)
first, second = os.fsencode(sys.argv[1]), os.fsencode(sys.argv[2])
count = 0
def stop(*_):
    if os.path.islink(first):  # the folder back where it was
        libc.renameat2(-100, first, -100, second, 2)
    print(count, flush=True)
    os._exit(0)
signal.signal(signal.SIGTERM, stop)
print("ready", flush=True)
while True:
    if libc.renameat2(-100, first, -100, second, 2) != 0:  # AT_FDCWD, RENAME_EXCHANGE
        sys.exit(f"renameat2: {os.strerror(ctypes.get_errno())}")
    count += 1
"""


@dataclass
class Swaps:
    count: int = 0


@contextmanager
def swapping(folder: Path, link: Path) -> Iterator[Swaps]:
    """`folder` and `link` exchanged in a loop while the block runs; after it, `folder` is
    the folder again and `count` says how many exchanges were made."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _SWAP, str(folder), str(link)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready", proc.stderr.read() if proc.stderr else ""
    swaps = Swaps()
    try:
        yield swaps
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
        swaps.count = int(out.split()[-1])
