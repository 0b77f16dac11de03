"""The agent's files are read and written one folder at a time, following no link (issue 51):
with a folder of the working folder swapped for a link to another folder in a tight loop,
no read ever returns the other folder's file and no write or temporary file lands there."""

from __future__ import annotations

import hashlib
from pathlib import Path

from koogcli.adapters.files.agent_files import FileAgentFiles
from koogcli.adapters.paths import DataDir
from tests.support.swapper import swapping

SECRET = b"the other folder's secret\n"


def test_a_folder_swapped_for_a_link_in_a_race_leads_nothing_outside(tmp_path: Path) -> None:
    work, outside = tmp_path / "work", tmp_path / "outside"
    (work / "sub").mkdir(parents=True)
    outside.mkdir()
    (outside / "notes.txt").write_bytes(SECRET)
    (work / "sub" / "notes.txt").write_bytes(b"inside\n")
    (work / "swap").symlink_to(outside)
    files = FileAgentFiles(DataDir(tmp_path / "data"))
    target = str(work / "sub" / "notes.txt")
    read = written = refused = 0
    with swapping(work / "sub", work / "swap") as swaps:
        # At least 400 tries, and on until both outcomes were seen (a loaded machine may
        # run the swapper in bursts): at most 20,000.
        for i in range(20_000):
            if i >= 400 and read and written and refused:
                break
            look = files.look(target, 1 << 20)
            assert look.content != SECRET and look.digest != hashlib.sha256(SECRET).hexdigest()
            read += look.content is not None
            try:
                files.put(target, f"restore {i}\n".encode() if i % 3 else None)
                written += 1
            except OSError as exc:
                assert "symbolic link" in (exc.strerror or ""), exc
                refused += 1
    assert swaps.count > 400
    assert (outside / "notes.txt").read_bytes() == SECRET
    assert sorted(p.name for p in outside.iterdir()) == ["notes.txt"]  # no temporary file
    assert not [p for p in work.rglob("*") if ".koog-" in p.name]
    # The race was run both ways: some reads and writes went through, some met the link.
    assert read and written and refused, (read, written, refused)
