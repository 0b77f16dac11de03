"""Damage inside a SQLite WAL, found instead of passing silently.

SQLite recovers a WAL up to its first frame whose checksum fails and ignores the rest: a few
damaged bytes in the middle of `koog.sqlite3-wal` drop every later commit (restore points,
transcript rows, journal entries) without a word. What was lost is told by comparing two
counts, without computing a checksum:

- `written`: the last commit frame of the WAL's current generation, read from the frame
  headers (a frame of this generation carries the header's salts; frames an earlier
  generation left further on carry others);
- what SQLite kept after its recovery (the wal-index header's `mxFrame` in the `-shm`
  file: read, never written, so a command that writes nothing still writes nothing).

More written than kept is damage. A crash in the middle of a write leaves only an
uncommitted tail, which holds no commit frame: it is never taken for damage. The WAL is
copied aside before SQLite writes to it again (its next write after a checkpoint starts it
over; koog then empties it at once, so the damage is said once), so the lost commits can
still be looked at.
"""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
import struct
import sys
from dataclasses import dataclass
from pathlib import Path

_HEADER = struct.Struct(">IIIIII")  # magic, version, page size, checkpoint seq, salts
_FRAME = struct.Struct(">IIII")  # page number, database size after a commit, salts
_MAGIC = (0x377F0682, 0x377F0683)
_FRAME_HEAD = 24


@dataclass(frozen=True)
class Written:
    salts: tuple[int, int]
    frames: int  # the last commit frame of the current generation (1-based; 0: none)
    commits: list[int]  # the commit frames, in order


def written(wal: Path) -> Written | None:
    """The WAL's commits as its frame headers tell them (None: no WAL, or not one)."""
    try:
        with wal.open("rb") as handle:
            head = handle.read(32)
            if len(head) < 32:
                return None
            magic, _, page, _, salt1, salt2 = _HEADER.unpack(head[:24])
            if magic not in _MAGIC or page < 512 or page & (page - 1):
                return None
            size, commits = wal.stat().st_size, []
            step = _FRAME_HEAD + page
            for index in range((size - 32) // step):
                handle.seek(32 + index * step)
                _, committed, one, two = _FRAME.unpack(handle.read(16))
                if committed and (one, two) == (salt1, salt2):
                    commits.append(index + 1)
    except OSError:
        return None
    return Written((salt1, salt2), commits[-1] if commits else 0, commits)


def kept(shm: Path, salts: tuple[int, int]) -> int | None:
    """How many frames SQLite took from the WAL (its wal-index header's `mxFrame`, read
    from the `-shm` file, native byte order), when the header is of the same WAL
    generation; None when it cannot be told. Reading it writes nothing."""
    try:
        with shm.open("rb") as handle:
            head = handle.read(48)
    except OSError:
        return None
    if len(head) < 48 or head[12] != 1:  # isInit
        return None
    frames = int.from_bytes(head[16:20], sys.byteorder)
    if struct.unpack(">II", head[32:40]) != salts:  # aSalt, as the WAL header holds them
        return None
    return frames


def lost(conn: sqlite3.Connection, wal: Path, before: Written) -> str | None:
    """What SQLite dropped of what the WAL holds, in words, after keeping a copy of the
    WAL (None: nothing, or it cannot be told: another process started the WAL over)."""
    found = kept(wal.with_name(wal.name[: -len("-wal")] + "-shm"), before.salts)
    if found is None or before.frames <= found:
        return None
    after = written(wal)
    if after is None or after.salts != before.salts:
        return None
    dropped = [c for c in before.commits if c > found]
    copy = wal.with_name(f"{wal.name}.damaged-{before.salts[0]:08x}{before.salts[1]:08x}")
    try:
        if not copy.exists():
            shutil.copyfile(wal, copy)
            copy.chmod(0o600)
        kept_copy = f"; a copy of it is kept as {copy.name}"
    except OSError:
        kept_copy = ""
    else:
        # What SQLite kept goes into the database and the WAL starts over: said once.
        with contextlib.suppress(sqlite3.Error):
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return (
        f"{wal} is damaged: SQLite kept its first {found} frames and dropped "
        f"{before.frames - found} after them, {len(dropped)} committed write(s) "
        f"(the newest restore points, transcript rows or journal entries){kept_copy}"
    )
