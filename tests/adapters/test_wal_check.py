"""The WAL check (adapters/sql/wal_check.py) remembers what it found intact, so a command
checks only the frames written since, yet damage anywhere is still found."""

from __future__ import annotations

import os
import shutil
import sqlite3
import struct
from pathlib import Path

from koogcli.adapters.sql import wal_check


def _wal_with(tmp_path: Path, writes: int, into: Path | None = None) -> tuple[Path, Path]:
    """A WAL of `writes` committed writes (a connection kept open, no checkpoint), copied
    to `into` as a process that died would leave it."""
    source = tmp_path / "live.sqlite3"
    db = sqlite3.connect(source, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA wal_autocheckpoint=0")
    db.execute("CREATE TABLE IF NOT EXISTS t (x BLOB)")
    for _ in range(writes):
        db.execute("INSERT INTO t VALUES (?)", [os.urandom(3000)])
    target = into or tmp_path / "copy"
    target.mkdir(exist_ok=True)
    shutil.copy(source.with_name(source.name + "-wal"), target / "koog.sqlite3-wal")
    db.close()
    return target / "koog.sqlite3-wal", source


def _checked(wal: Path) -> wal_check.Damage | None:
    """Checked, and remembered as a process that writes the database remembers it."""
    found = wal_check.check(wal)
    found.remember()
    return found.damage


def test_a_checked_wal_is_checked_again_only_where_it_grew(tmp_path: Path) -> None:
    wal, _ = _wal_with(tmp_path, 20)
    assert _checked(wal) is None
    memo = wal.with_name("koog.sqlite3-wal-checked")
    salts_and_count = memo.read_text().split()[:3]
    assert int(salts_and_count[2]) > 20  # the frames found intact, remembered
    assert wal_check.damaged(wal) is None  # resumed: the same answer
    memo.unlink()
    assert wal_check.damaged(wal) is None and not memo.exists()  # a reader writes nothing


def test_damage_to_a_frame_checked_before_is_still_found(tmp_path: Path) -> None:
    wal, _ = _wal_with(tmp_path, 20)
    assert _checked(wal) is None
    with wal.open("r+b") as handle:
        handle.seek(wal.stat().st_size // 3)
        handle.write(os.urandom(4096))
    found = wal_check.damaged(wal)
    assert found is not None and found.commits > 0 and found.dropped > 0


def test_damage_to_frames_written_after_the_check_is_found(tmp_path: Path) -> None:
    wal, _ = _wal_with(tmp_path, 20)
    whole = wal.read_bytes()
    (page,) = struct.unpack(">I", whole[8:12])
    step = 24 + page
    frames = (len(whole) - 32) // step
    # The WAL as it was halfway (a generation only grows), checked then.
    wal.write_bytes(whole[: 32 + (frames // 2) * step])
    assert _checked(wal) is None
    checked = int(wal.with_name("koog.sqlite3-wal-checked").read_text().split()[2])
    assert checked == frames // 2
    wal.write_bytes(whole)  # it grew; then a frame written since is damaged
    with wal.open("r+b") as handle:
        handle.seek(32 + (frames - 3) * step + 24 + 100)
        handle.write(os.urandom(1000))
    found = wal_check.damaged(wal)
    assert found is not None and found.commits > 0 and found.kept >= checked - 1
