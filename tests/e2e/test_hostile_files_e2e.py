"""Hostile files: every file koog writes, damaged every way a crash, a disk or a person
damages files, under the main commands. Each ends 0, 2 or 3 with at most one error line
and a hint, never an internal error; a damaged file is never written over."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import snapshot
from tests.e2e.test_persistence_e2e import call
from tests.e2e.test_safety_e2e import tool_env  # noqa: F401  (fixture)
from tests.fakes.openai_server import FakeOpenAIServer
from tests.support.zygote import Zygote

pytestmark = pytest.mark.e2e

FILES = [
    "sessions/a.json",
    "sessions/a.log",
    "koog.sqlite3",
    "memory.sqlite3",
]


def _flip_line(path: Path, which: int) -> None:
    lines = path.read_bytes().split(b"\n")
    if lines and not lines[-1]:
        lines.pop()
    index = which if which >= 0 else len(lines) + which
    if not 0 <= index < len(lines):  # a binary file of one "line": a byte in its middle
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0x21
        path.write_bytes(bytes(data))
        return
    # One byte from the middle of the line on, the first whose change leaves no JSON (a
    # letter of a key flipped to another letter would still parse, as a different line).
    for at in range(len(lines[index]) // 2, len(lines[index])):
        line = bytearray(lines[index])
        line[at] ^= 0x21
        try:
            json.loads(bytes(line))
        except ValueError:
            break
    lines[index] = bytes(line)
    path.write_bytes(b"\n".join(lines) + b"\n")


def _out_of_range(path: Path) -> None:
    data = path.read_bytes()
    for key in (b'"r": ', b'"revision": ', b'"seq": ', b'"s": ', b'"next": ', b'"b": '):
        at = data.rfind(key)
        if at >= 0:
            start = at + len(key)
            end = start
            while end < len(data) and data[end : end + 1].isdigit():
                end += 1
            path.write_bytes(data[:start] + b"1e400" + data[end:])
            return
    path.write_bytes(data[:-2] + b"1e400\n")


def _folder(path: Path) -> None:
    path.unlink()
    path.mkdir()


def _symlink(path: Path) -> None:
    copy = path.with_name(path.name + ".real")
    path.rename(copy)
    path.symlink_to(copy)


def _huge(path: Path) -> None:
    with path.open("ab") as handle:
        handle.truncate(path.stat().st_size + 80 * 1024 * 1024)  # zeros, sparse


DAMAGES: dict[str, Callable[[Path], None]] = {
    "last line": lambda p: _flip_line(p, -1),
    "middle line": lambda p: _flip_line(p, 1),
    "out of range": _out_of_range,
    "folder": _folder,
    "symlink": _symlink,
    "empty": lambda p: p.write_bytes(b""),
    "huge": _huge,
}

COMMANDS = [
    ("history", "list"),
    ("history", "show", "-s", "a", "--last", "1"),
    ("chat", "-s", "a", "hi"),
    ("checkpoint", "list", "-s", "a"),
    ("rollback", "-s", "a", "--latest", "--yes"),
    ("memory", "search", "deploys"),
]


@pytest.fixture
def pristine(
    tmp_path: Path,
    server: FakeOpenAIServer,
    forked_koog: Callable[..., object],
    tool_env: dict[str, str],  # noqa: F811
    data_dir: Path,
) -> Path:
    """A data dir with every file koog writes: turns (one calling a tool), a log, a
    checkpoint, a rollback that compensated, a memory record."""
    run_koog = forked_koog
    for args in (
        ("chat", "-s", "a", "first"),
        ("checkpoint", "create", "-s", "a"),
        ("enqueue",),
        ("chat", "-s", "a", "make Alex"),
        ("rollback", "-s", "a", "--latest", "--yes"),
        ("chat", "-s", "a", "again"),
        ("chat", "-s", "a", "and again"),
        ("memory", "add", "deploys are blue-green"),
    ):
        if args == ("enqueue",):
            server.enqueue(
                {"tool_calls": [call("create_user", "c1", name="Alex")]}, {"content": "ok"}
            )
            continue
        done = run_koog(*args, env=tool_env)
        assert done.returncode == 0, (args, done.stderr)  # type: ignore[attr-defined]
    for name in FILES:
        assert (data_dir / name).exists(), name
    kept = tmp_path / "pristine"
    shutil.copytree(data_dir, kept, symlinks=True)
    return kept


@pytest.mark.parametrize("name", FILES)
def test_every_file_damaged_every_way_under_every_command(
    name: str,
    pristine: Path,
    data_dir: Path,
    zygote: Zygote,
    koog_env: dict[str, str],
    tool_env: dict[str, str],  # noqa: F811
    tmp_path: Path,
) -> None:
    env = {**koog_env, **tool_env}
    err = tmp_path / "stderr.txt"
    failures = []
    for damage, spoil in DAMAGES.items():
        shutil.rmtree(data_dir)
        shutil.copytree(pristine, data_dir, symlinks=True)
        target = data_dir / name
        spoil(target)
        spoiled = _bytes_of(target)
        for args in COMMANDS:
            proc = zygote.spawn(*args, env=env, stderr=err)
            code = proc.wait(timeout=60)
            said = err.read_text()
            errors = [line for line in said.splitlines() if line.startswith("koog: ")]
            shown = [line for line in errors if not line.startswith("koog: warning")]
            ok = (
                code in (0, 2, 3)
                and "internal error" not in said
                and "Traceback" not in said
                and len(shown) <= 2
                and (code == 0 or shown)
            )
            if not ok:
                failures.append((name, damage, " ".join(args), code, said[-300:]))
            # SQLite folds its write-ahead log into the database when the last connection
            # closes: its own recovery, not koog writing over a damaged file.
            databases = ("memory.sqlite3", "koog.sqlite3")
            if code == 3 and name not in databases and not _kept(_bytes_of(target), spoiled):
                failures.append((name, damage, " ".join(args), "wrote over the damaged file"))
    assert not failures, "\n".join(repr(f) for f in failures)


def _kept(now: object, spoiled: object) -> bool:
    """The damaged file is still there as it was (lines appended after it do not count)."""
    if isinstance(now, tuple) and isinstance(spoiled, tuple) and isinstance(now[0], int):
        size, head = spoiled
        return now[0] >= size and now[1][: len(head)] == head  # type: ignore[index]
    return now == spoiled


def _bytes_of(path: Path) -> object:
    if path.is_symlink():
        return ("link", os.readlink(path))
    if path.is_dir():
        return ("folder", sorted(os.listdir(path)))
    if not path.exists():
        return None
    size = path.stat().st_size
    with path.open("rb") as handle:
        return (size, handle.read(1 << 20))


def test_a_damaged_last_log_line_keeps_its_turn(
    forked_koog: Callable[..., object], data_dir: Path
) -> None:
    """Acceptance: exit 3 naming the file, and the turn is there once repaired by hand."""
    run_koog = forked_koog
    for text in ("one", "two", "three"):
        run_koog("chat", "-s", "t", text)
    log = data_dir / "sessions" / "t.log"
    good = log.read_bytes()
    _flip_line(log, -1)
    before = snapshot(data_dir / "sessions")
    for args in (("chat", "-s", "t", "four"), ("history", "show", "-s", "t")):
        result = run_koog(*args)
        assert result.returncode == 3, result.stderr  # type: ignore[attr-defined]
        first = result.stderr.splitlines()[0]  # type: ignore[attr-defined]
        assert first.startswith(f"koog: error: {log}: line 2 is damaged"), first
    assert snapshot(data_dir / "sessions") == before
    log.write_bytes(good)
    shown = run_koog("history", "show", "-s", "t", "--last", "2")
    assert shown.stdout == "[user] three\n[assistant] echo: three\n"  # type: ignore[attr-defined]


DAMAGED_ITEMS = {
    "out of range": "[[1, 99999999999999999999]]",
    "not a list": '{"runs": [1, 2]}',
    "nested 100,000 deep": "[" * 100_000 + "]" * 100_000,
    "not JSON": "[[1, 2]",
    "a reversed run": "[[9, 1]]",
}


@pytest.mark.parametrize("damage", list(DAMAGED_ITEMS))
def test_a_checkpoint_whose_items_row_is_damaged_is_exit_3_naming_it(
    damage: str, run_koog: Callable[..., object], data_dir: Path, server: FakeOpenAIServer
) -> None:
    """checkpoint show, rollback ID and history fork --checkpoint on a restore point whose
    list of message rows is damaged: exit 3, one error line naming koog.sqlite3 and the
    checkpoint, nothing changed; never an internal error."""
    import json
    import sqlite3

    def koog(*args: str) -> subprocess.CompletedProcess[str]:
        return run_koog(*args)  # type: ignore[return-value]

    for word in ("one", "two"):
        assert koog("chat", "-s", "dm", f"turn {word}").returncode == 0
    listed = json.loads(koog("checkpoint", "list", "-s", "dm", "--json").stdout)
    target = listed[0]["id"]
    with sqlite3.connect(data_dir / "koog.sqlite3") as db:
        db.execute("UPDATE checkpoints SET items = ? WHERE id = ?", [DAMAGED_ITEMS[damage], target])
    before = snapshot(data_dir / "sessions")
    for args in (
        ("checkpoint", "show", target, "-s", "dm"),
        ("rollback", "-s", "dm", target, "--yes"),
        ("history", "fork", "-s", "dm", "--checkpoint", target, "dm-copy"),
    ):
        done = koog(*args)
        assert done.returncode == 3, (args, done.stderr)
        assert "internal error" not in done.stderr and "Traceback" not in done.stderr
        first = done.stderr.splitlines()[0]
        assert "koog.sqlite3" in first and target in first, (args, first)
    assert snapshot(data_dir / "sessions") == before
    assert koog("chat", "-s", "dm", "still works").returncode == 0


@pytest.mark.files_only
def test_an_emptied_or_replaced_database_is_exit_3_never_a_fresh_start(
    run_koog: Callable[..., object], data_dir: Path, tmp_path: Path, server: FakeOpenAIServer
) -> None:
    """The sessions were written with checkpoints in koog.sqlite3: truncated to 0 bytes,
    deleted, or swapped for another data dir's, every command is exit 3 naming the file
    (never exit 0 with "no checkpoints yet"); removing koog.sqlite3.id accepts it."""
    import sqlite3

    def koog(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return run_koog(*args, env=env)  # type: ignore[return-value]

    assert koog("chat", "-s", "db", "hello").returncode == 0
    database = data_dir / "koog.sqlite3"
    other = tmp_path / "other-data"
    assert koog("chat", "-s", "x", "elsewhere", env={"KOOG_DATA_DIR": str(other)}).returncode == 0
    for path in (database, other / "koog.sqlite3"):  # everything in the main file
        with sqlite3.connect(path) as db:
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    kept = database.read_bytes()
    for damage in ("empty", "deleted", "another data dir's"):
        for suffix in ("-wal", "-shm"):
            (data_dir / f"koog.sqlite3{suffix}").unlink(missing_ok=True)
        if damage == "empty":
            database.write_bytes(b"")
        elif damage == "deleted":
            database.unlink()
        else:
            shutil.copy(other / "koog.sqlite3", database)
        for args in (("checkpoint", "list", "-s", "db"), ("chat", "-s", "db", "more")):
            done = koog(*args)
            assert done.returncode == 3, (damage, args, done.stdout, done.stderr)
            assert "koog.sqlite3" in done.stderr.splitlines()[0], (damage, done.stderr)
            assert "internal error" not in done.stderr
        database.write_bytes(kept)
    assert koog("checkpoint", "list", "-s", "db").returncode == 0
    shutil.copy(other / "koog.sqlite3", database)
    (data_dir / "koog.sqlite3.id").unlink()  # the user's say: use this one
    assert koog("chat", "-s", "db", "adopted").returncode == 0


def test_damage_inside_the_wal_is_said_once_and_kept_for_a_look(
    run_koog: Callable[..., subprocess.CompletedProcess[str]], data_dir: Path
) -> None:
    """Issue 51: 4 KiB of damage in the middle of koog.sqlite3-wal made SQLite drop every
    later commit without a word. The next command says so (naming the file and what was
    dropped) and keeps a copy of the WAL; the one after is silent; a WAL whose last frame
    a crash tore holds no lost commit and is never reported."""
    for i in range(4):
        assert run_koog("chat", "-s", "w", f"turn {i}").returncode == 0
    wal = data_dir / "koog.sqlite3-wal"
    whole = wal.read_bytes()
    wal.write_bytes(whole[: len(whole) - 100])  # a torn last frame: not damage
    quiet = run_koog("checkpoint", "list", "-s", "w")
    assert quiet.returncode == 0 and "damaged" not in quiet.stderr, quiet.stderr
    assert run_koog("chat", "-s", "w", "turn 4").returncode == 0
    size = wal.stat().st_size
    with wal.open("r+b") as handle:
        handle.seek(size // 2)
        handle.write(os.urandom(4096))
    said = run_koog("checkpoint", "list", "-s", "w")
    assert said.returncode == 0, said.stderr
    [line] = [x for x in said.stderr.splitlines() if "koog.sqlite3-wal is damaged" in x]
    assert "committed write(s)" in line and "a copy of it is kept" in line, line
    assert [p.name for p in data_dir.glob("koog.sqlite3-wal.damaged-*")], line
    again = run_koog("checkpoint", "list", "-s", "w")
    assert again.returncode == 0 and "damaged" not in again.stderr, again.stderr
