"""A data dir on a disk that fills up (a real 16 MiB tmpfs): a turn that fails for want of
room is exit 3 and stores nothing; once there is room again, no later command reports an
interrupted turn and nothing is stored twice (SPEC §5.19). Needs root's `mount`; skipped,
saying so, where this machine cannot mount (a failure under CI)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import forked_run_koog

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
Run = Callable[..., subprocess.CompletedProcess[str]]
run_koog = pytest.fixture(name="run_koog")(forked_run_koog)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=16M", "tmpfs", str(disk)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        why = f"cannot mount a tmpfs here: {mounted.stderr.strip()}"
        if os.environ.get("CI"):  # CI runs as root, where mount works: a failure there
            pytest.fail(why)
        pytest.skip(why)
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def fill(disk: Path, leave: int) -> Path:
    stat = os.statvfs(disk)
    filler = disk / "filler"
    with filler.open("wb") as handle:
        handle.write(bytes(max(0, stat.f_bavail * stat.f_frsize - leave)))
    return filler


def test_a_turn_that_fails_on_a_full_disk_is_never_reported_as_interrupted(
    run_koog: Run, small_disk: Path
) -> None:
    env = {"KOOG_DATA_DIR": str(small_disk / "data")}
    assert run_koog("chat", "-s", "d", "hello", env=env).returncode == 0
    stored, failed = ["hello"], 0
    for leave in range(0, 96_000, 8192):
        filler = fill(small_disk, leave)
        # 24 KB: more than the slack the session's log and the WAL keep in their blocks.
        said = f"left {leave} " + "padding " * 3000
        turn = run_koog("chat", "-s", "d", said, env=env)
        assert turn.returncode in (0, 3), turn.stderr
        if turn.returncode == 3:
            failed += 1
            assert "disk is full" in turn.stderr or "No space" in turn.stderr, turn.stderr
        else:
            stored.append(said)
        filler.unlink()
        after = run_koog("chat", "-s", "d", f"after {leave}", env=env)
        assert after.returncode == 0, (leave, after.stderr)
        assert "interrupted" not in after.stderr, (leave, after.stderr)
        stored.append(f"after {leave}")
        resumed = run_koog("chat", "-s", "d", "--resume", env=env)
        assert "nothing to resume" in resumed.stderr, (leave, resumed.stderr)
    shown = json.loads(run_koog("history", "show", "-s", "d", "--json", env=env).stdout)
    assert [m["content"] for m in shown if m["role"] == "user"] == stored
    assert failed >= 3, failed  # the disk was really full for some of the turns
    with contextlib.suppress(FileNotFoundError):
        assert (small_disk / "data" / "koog.reserve").stat().st_size == 256 * 1024


FILLING_TOOL = '''
def make_mark(name: str) -> str:
    """Make a mark."""
    _log("mark", name)
    with open(os.environ["FILLER"], "wb") as handle:  # the disk fills just after it ran
        try:
            while True:
                handle.write(bytes(1 << 16))
                handle.flush()
        except OSError:
            pass
    return f"marked {name}"
'''


def test_a_tool_that_ran_before_the_disk_filled_is_said_and_resumed_never_run_twice(
    run_koog: Run, small_disk: Path, tmp_path: Path
) -> None:
    """Issue 51: the disk fills right after a tool ran, so its result cannot be recorded.
    Closing the turn as failed orphaned the effect with nothing saying so; the error names
    the call and --resume, and once there is room --resume finishes the turn without
    running the tool again."""
    from tests.e2e.test_persistence_e2e import call
    from tests.fakes.openai_server import FakeOpenAIServer
    from tests.support import tool_logs

    config = '[[tools]]\ncallable = "fill_tools:make_mark"\n'
    env = {
        **tool_logs.tool_env(tmp_path, "fill_tools", FILLING_TOOL, config),
        "KOOG_DATA_DIR": str(small_disk / "data"),
        "FILLER": str(small_disk / "filler"),
    }
    server = FakeOpenAIServer().start()
    try:
        env["OPENAI_BASE_URL"] = server.base_url
        server.enqueue({"tool_calls": [call("make_mark", "m1", name="A")]}, {"content": "made"})
        stopped = run_koog("chat", "-s", "t", "make a mark", env=env)
        assert stopped.returncode == 3, stopped.stderr
        assert "make_mark(" in stopped.stderr and "--resume" in stopped.stderr, stopped.stderr
        (small_disk / "filler").unlink()
        resumed = run_koog("chat", "-s", "t", "--resume", env=env)
        assert resumed.returncode == 0, resumed.stderr
    finally:
        server.stop()
    assert [e for e in tool_logs.logged(env) if e[0] == "mark"] == [["mark", "A"]]
    shown = json.loads(run_koog("history", "show", "-s", "t", "--json", env=env).stdout)
    assert [m["role"] for m in shown if m["role"] != "system"] == [
        "user", "assistant", "tool", "assistant"
    ], shown  # fmt: skip
    assert shown[-1]["content"] == "made"
