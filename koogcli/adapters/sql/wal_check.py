"""Damage inside a SQLite WAL, found instead of passing silently.

SQLite recovers a WAL up to its first frame whose checksum fails and ignores the rest: a few
damaged bytes in the middle of `koog.sqlite3-wal` drop every later commit (restore points,
transcript rows, journal entries) without a word. Before SQLite opens the database, the WAL
is read as SQLite will read it (the header's salts and checksums, each frame's checksum
chained on the last, in the byte order the magic number names): commit frames of its
current generation after the first frame that fails are commits SQLite will drop.

Only the WAL file is read here, never the `-shm` file or the database: SQLite holds POSIX
locks on those, and closing any descriptor of a file a process has locked releases that
process's locks (another process would then take the wal-index for dead and rebuild it
under a live connection's feet). A crash in the middle of a write leaves only an
uncommitted tail, which holds no commit frame: it is never taken for damage. What is found
is copied aside first, so the dropped commits can still be looked at.
"""

from __future__ import annotations

import array
import contextlib
import os
import shutil
import struct
import sys
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

_MAGIC_LITTLE, _MAGIC_BIG = 0x377F0682, 0x377F0683
_FRAME_HEAD = 24
_MOST = 64 << 20  # a WAL larger than this is not read through (one write's worth of pages)


@dataclass(frozen=True)
class Damage:
    kept: int  # frames SQLite will take
    dropped: int  # frames of the current generation after them
    commits: int  # committed writes among those
    salts: tuple[int, int]


@dataclass
class Checked:
    """What a check found, and what it may remember for the next one."""

    damage: Damage | None
    memo: Path | None = None
    state: tuple[int, ...] = ()

    def remember(self) -> None:
        """Write what was found intact beside the WAL: called by a process that writes the
        database anyway (a command that writes nothing leaves the data dir as it was)."""
        if self.memo is not None and self.state:
            _remember(self.memo, self.state)
            self.state = ()


def damaged(wal: Path) -> Damage | None:
    """The commits SQLite will drop from `wal` (None: none, no WAL, or not one)."""
    return check(wal).damage


def check(wal: Path) -> Checked:
    """`wal` checked as SQLite's recovery will read it.

    Frames found intact may be remembered beside it (`-wal-checked`: the generation's
    salts, how many, and a CRC-32 of their bytes): the next process compares that CRC (C
    speed) and checks SQLite's chained sums only for frames written since. A WAL holds up
    to a thousand pages of its generation: checked whole, in Python, on every command,
    that cost a one-shot turn 20 ms and more. Damage to a frame checked before changes the
    CRC, and everything is checked again."""
    try:
        size = wal.stat().st_size
        if size < 32 or size > _MOST:
            return Checked(None)
        with wal.open("rb") as handle:
            return _checked(handle, size, _memo(wal))
    except OSError:
        return Checked(None)


def _checked(handle: BinaryIO, size: int, memo: Path) -> Checked:
    head = handle.read(32)
    magic, _, page, _, salt1, salt2 = struct.unpack(">IIIIII", head[:24])
    if magic not in (_MAGIC_LITTLE, _MAGIC_BIG) or page < 512 or page & (page - 1):
        return Checked(None)
    big = magic == _MAGIC_BIG
    sums = _checksum(head[:24], (0, 0), big)
    if sums != struct.unpack(">II", head[24:32]):
        return Checked(None)  # a header SQLite would not use: it starts the WAL over
    step = _FRAME_HEAD + page
    body = handle.read(((size - 32) // step) * step)
    frames = len(body) // step
    start, kept = _resumed(memo, (salt1, salt2), frames, body, step)
    if start:  # the chain goes on from the checksums the last frame checked carries
        at = (start - 1) * step + 16
        sums = struct.unpack(">II", body[at : at + 8])
    data = memoryview(body)[start * step :]
    last = commits = 0
    checked = start
    intact = True
    for index in range(start, frames):
        at = (index - start) * step
        _, committed, one, two, c1, c2 = struct.unpack_from(">IIIIII", data, at)
        if (one, two) != (salt1, salt2):
            # SQLite stops here: an earlier generation's frames (never salted as this one),
            # or a frame whose salts were damaged; this generation's frames past it are lost.
            intact = False
            continue
        last = index + 1
        if intact:
            sums = _checksum(bytes(data[at : at + 8]) + data[at + 24 : at + step], sums, big)
            if sums == (c1, c2):
                kept = index + 1 if committed else kept
                checked = index + 1
                continue
            intact = False
        commits += 1 if committed else 0
    if not commits:
        if checked > start:
            state = (salt1, salt2, checked, kept, zlib.crc32(body[: checked * step]))
            return Checked(None, memo, state)
        return Checked(None)
    return Checked(Damage(kept, last - kept, commits, (salt1, salt2)))


def _memo(wal: Path) -> Path:
    return wal.with_name(wal.name + "-checked")


def _resumed(
    memo: Path, salts: tuple[int, int], frames: int, body: bytes, step: int
) -> tuple[int, int]:
    """(frames of this generation found intact before and unchanged since, the commit
    frames among them); (0, 0) to check them all."""
    try:
        salt1, salt2, checked, kept, crc = (int(v) for v in memo.read_text().split())
    except (OSError, ValueError):
        return 0, 0
    if (salt1, salt2) != salts or not 0 < checked <= frames or not 0 <= kept <= checked:
        return 0, 0
    if zlib.crc32(body[: checked * step]) != crc:
        return 0, 0
    return checked, kept


def _remember(memo: Path, state: tuple[int, ...]) -> None:
    """Written whole or not at all (a temporary file renamed over it); a failure only means
    the next process checks everything again."""
    temporary = memo.with_name(f"{memo.name}.{os.getpid()}")
    with contextlib.suppress(OSError):
        temporary.write_text(" ".join(map(str, state)) + "\n")
        os.chmod(temporary, 0o600)
        os.replace(temporary, memo)
    with contextlib.suppress(OSError):
        temporary.unlink(missing_ok=True)


def _checksum(data: bytes, sums: tuple[int, int], big: bool) -> tuple[int, int]:
    """SQLite's WAL checksum of `data` (a multiple of 8 bytes), chained on `sums`."""
    words = array.array("I")
    words.frombytes(data)
    if big != (sys.byteorder == "big"):
        words.byteswap()
    s0, s1 = sums
    it = iter(words)
    for x0 in it:
        s0 = (s0 + x0 + s1) & 0xFFFFFFFF
        s1 = (s1 + next(it) + s0) & 0xFFFFFFFF
    return s0, s1


def keep_copy(wal: Path, damage: Damage) -> str:
    """The WAL copied beside it (0600), once per generation; the copy's name, or ""."""
    copy = wal.with_name(f"{wal.name}.damaged-{damage.salts[0]:08x}{damage.salts[1]:08x}")
    try:
        if not copy.exists():
            shutil.copyfile(wal, copy)
            copy.chmod(0o600)
    except OSError:
        return ""
    return copy.name


def said(wal: Path, damage: Damage, copy: str) -> str:
    kept_copy = f"; a copy of it is kept as {copy}" if copy else ""
    return (
        f"{wal} is damaged: SQLite keeps its first {damage.kept} frames and drops "
        f"{damage.dropped} after them, {damage.commits} committed write(s) (the newest "
        f"restore points, transcript rows or journal entries){kept_copy}"
    )
