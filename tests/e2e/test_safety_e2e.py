"""Crash, concurrency and hostile-input safety on the installed binary: no lost
compensation, no tool run twice, no bricked session, nothing outside the data dir."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import KOOG_BIN, snapshot
from tests.e2e.test_persistence_e2e import TOOLS as PERSISTENCE_TOOLS
from tests.e2e.test_persistence_e2e import call
from tests.e2e.test_persistence_e2e import tool_log as log_of
from tests.fakes.openai_server import FakeOpenAIServer
from tests.support.zygote import ForkedKoog

pytestmark = pytest.mark.e2e
Run = Callable[..., subprocess.CompletedProcess[str]]

TOOLS = (
    PERSISTENCE_TOOLS
    + '''
import sys
def step(x: str) -> str:
    """One step of work (it works a while, then has its effect)."""
    time.sleep(float(os.environ.get("STEP_SLEEP", "0")))
    _log("step", x)
    return f"step {x} done"
def hang(x: str) -> str:
    """Never returns in time."""
    time.sleep(30)
    return "too late"
def leave(x: str) -> str:
    """Calls sys.exit."""
    sys.exit(7)
def huge(x: str) -> str:
    """A very large result."""
    return "x" * 10_000_000
def noisy(x: str) -> str:
    """Writes to fd 1 and starts a program that does."""
    import subprocess
    os.write(1, b"written to fd 1\\n")
    subprocess.run(["echo", "echoed by a child"], check=True)
    return "noisy done"
def vanish(x: str) -> str:
    """Ends its own process."""
    os._exit(0)
'''
)


@pytest.fixture
def tool_env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "safety_tools.py").write_text(TOOLS)
    config = tmp_path / "safety.toml"
    config.write_text(
        "[tool_settings]\ntimeout_seconds = 1.5\n"
        '[[tools]]\ncallable = "safety_tools:create_user"\nrollback = "safety_tools:remove_user"\n'
        + "".join(
            f'[[tools]]\ncallable = "safety_tools:{n}"\n'
            for n in ("step", "hang", "leave", "huge", "noisy", "vanish")
        )
    )
    return {"KOOG_CONFIG": str(config), "TOOL_LOG": str(tmp_path / "tools.log")}


def kill_when(proc: subprocess.Popen[str] | ForkedKoog, ready: Callable[[], bool]) -> None:
    """SIGKILL the process as soon as `ready()` holds (polled every millisecond)."""
    deadline = time.monotonic() + 20
    while proc.poll() is None and time.monotonic() < deadline:
        if ready():
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.001)
    proc.wait(timeout=10)


def test_hostile_tool_calls_never_brick_the_session(
    run_koog: Run, server: FakeOpenAIServer, tool_env: dict[str, str]
) -> None:
    server.enqueue(
        {"tool_calls": [{"id": "c0", "name": "", "arguments": "{}"}]},
        {"tool_calls": [{"id": "c1", "name": "step", "arguments": {"x": "1"}, "raw": True}]},
        {"tool_calls": [call("huge", "c2", x="big")]},
        {"content": "survived"},
    )
    result = run_koog("chat", "-s", "h", "go", env=tool_env)
    assert result.returncode == 0 and result.stdout == "survived\n", result.stderr
    second = server.chat_requests[1]["messages"]
    assert "without giving its name" in second[-1]["content"]
    assert log_of(tool_env) == [["step", "1"]]
    shown = run_koog("history", "show", "-s", "h", "--format", "json")
    assert shown.returncode == 0
    assert all(
        c["function"]["name"] for m in json.loads(shown.stdout) for c in m.get("tool_calls", [])
    )
    assert run_koog("history", "list").returncode == 0
    assert run_koog("chat", "-s", "h", "again", env=tool_env).returncode == 0


def _sql(data_dir: Path, statement: str) -> None:
    import sqlite3

    with sqlite3.connect(data_dir / "koog.sqlite3") as db:
        db.execute(statement)


def test_a_damaged_transcript_row_is_skipped_with_a_warning(run_koog: Run, data_dir: Path) -> None:
    run_koog("chat", "-s", "t", "one")
    _sql(data_dir, 'UPDATE transcript SET body = \'{"id": "torn", "role": "us\' WHERE id = 1')
    assert run_koog("chat", "-s", "t", "two").returncode == 0
    shown = run_koog("history", "show", "-s", "t", "--transcript")
    assert shown.returncode == 0
    assert "[user] two" in shown.stdout and "[assistant] echo: two" in shown.stdout
    assert "koog: warning: skipped 1 unreadable line" in shown.stderr


def test_symlinks_in_the_data_dir_are_never_followed(
    run_koog: Run, data_dir: Path, tmp_path: Path
) -> None:
    run_koog("chat", "-s", "s", "one")
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "victim.txt"
    victim.write_text("precious")
    before = snapshot(outside)

    def plant(link: Path, target: Path) -> None:
        if link.is_dir() and not link.is_symlink():
            shutil.rmtree(link)
        elif link.exists() or link.is_symlink():
            link.unlink()
        link.symlink_to(target)

    cases = [
        data_dir / "koog.sqlite3",
        data_dir / "sessions" / "s.log",
        data_dir / "locks" / "s.lock",
        data_dir / "sessions",
    ]
    for link in cases:
        saved = tmp_path / "saved"
        shutil.rmtree(saved, ignore_errors=True)
        shutil.copytree(data_dir, saved, symlinks=True)
        plant(link, victim if link.name != "sessions" else outside)
        for args in (("chat", "-s", "s", "two"), ("history", "delete", "-s", "s", "--yes")):
            result = run_koog(*args)
            assert result.returncode == 3, (link, args, result.stderr)
            assert "symbolic link" in result.stderr and str(link) in result.stderr
        assert snapshot(outside) == before
        shutil.rmtree(data_dir)
        shutil.copytree(saved, data_dir, symlinks=True)


MALFORMED: list[tuple[str, str, Callable[[Path], None], tuple[str, ...]]] = [
    (
        "deep nesting",
        "sessions/bad.json",
        lambda p: p.write_text("[" * 100_000 + "]" * 100_000),
        (),
    ),
    (
        "long revision",
        "sessions/bad.json",
        lambda p: p.write_text(
            '{"format": "koog.chat-history", "version": 1, "session": "bad", "revision": '
            + "9" * 5001
            + ', "messages": []}'
        ),
        (),
    ),
    (
        "infinite version",
        "sessions/bad.json",
        lambda p: p.write_text(
            '{"format": "koog.chat-history", "version": 1e999, "session": "bad", '
            '"revision": 1, "messages": []}'
        ),
        (),
    ),
    (
        "no messages",
        "sessions/bad.json",
        lambda p: p.write_text(
            '{"format": "koog.chat-history", "version": 1, "session": "bad", "revision": 1}'
        ),
        (),
    ),
    ("not UTF-8", "sessions/bad.json", lambda p: p.write_bytes(b"\xff\xfe{}"), ()),
    ("a folder", "sessions/bad.json", lambda p: p.mkdir(), ()),
]


@pytest.mark.parametrize("case, where, spoil, extra", MALFORMED, ids=[c[0] for c in MALFORMED])
def test_malformed_session_files_exit_3_naming_the_file(
    run_koog: Run,
    data_dir: Path,
    case: str,
    where: str,
    spoil: Callable[[Path], None],
    extra: tuple[str, ...],
) -> None:
    run_koog("chat", "-s", "good", "fine")
    path = data_dir / where
    spoil(path)
    before = snapshot(data_dir)
    for args in (("chat", "-s", "bad", "hi"), ("history", "show", "-s", "bad")):
        result = run_koog(*args)
        assert result.returncode == 3, (case, result.stderr)
        lines = result.stderr.splitlines()
        assert 1 <= len(lines) <= 2 and str(path) in lines[0], result.stderr
        assert "internal error" not in result.stderr
    listed = run_koog("history", "list")
    assert listed.returncode == 0 and "good" in listed.stdout and "bad" in listed.stdout

    def data(snap: dict[str, bytes]) -> dict[str, bytes]:  # empty lock files hold nothing
        return {k: v for k, v in snap.items() if not k.startswith("locks/")}

    assert data(snapshot(data_dir)) == data(before)


def test_other_malformed_inputs(run_koog: Run, data_dir: Path, configure_env: Any) -> None:
    run_koog("chat", "-s", "good", "fine")
    (data_dir / "sessions" / "bad name.json").write_text("{}")
    assert "good" in run_koog("history", "list").stdout
    # Wrongly typed checkpoint fields: listed as unreadable, refused by name, turns go on.
    listed = json.loads(run_koog("checkpoint", "list", "-s", "good", "--json").stdout)
    cid = next(c["id"] for c in listed if c["kind"] == "restore")
    _sql(data_dir, f"UPDATE checkpoints SET header = '{{\"reason\": 5}}' WHERE id = '{cid}'")
    again = json.loads(run_koog("checkpoint", "list", "-s", "good", "--json").stdout)
    assert [c["readable"] for c in again if c["id"] == cid] == [False]
    refused = run_koog("rollback", "-s", "good", cid, "--yes")
    assert refused.returncode == 3 and f"checkpoint {cid} of good" in refused.stderr
    assert run_koog("chat", "-s", "good", "still fine").returncode == 0
    # Non-UTF-8 standard input, an infinite timeout, a dropped memory table.
    binary = subprocess.run(
        [KOOG_BIN, "chat", "-s", "good"],
        input=b"\xff\xfe",
        capture_output=True,
        env=configure_env(""),
        timeout=30,
    )
    assert binary.returncode == 2 and b"not UTF-8" in binary.stderr
    inf = subprocess.run(
        [KOOG_BIN, "chat", "-s", "good", "x"],
        capture_output=True,
        text=True,
        env=configure_env("[llm]\ntimeout_seconds = inf\n"),
        timeout=30,
    )
    assert inf.returncode == 2 and "llm.timeout_seconds" in inf.stderr
    assert run_koog("memory", "add", "a fact").returncode == 0
    import sqlite3

    db = sqlite3.connect(data_dir / "memory.sqlite3")
    db.execute("DROP TABLE records_fts")
    db.commit()
    db.close()
    dropped = run_koog("memory", "search", "fact", "--mode", "keyword")
    assert dropped.returncode == 3 and "memory.sqlite3" in dropped.stderr
    assert "internal error" not in dropped.stderr


@pytest.fixture
def configure_env(koog_env: dict[str, str], tmp_path: Path) -> Callable[[str], dict[str, str]]:
    def env(text: str) -> dict[str, str]:
        path = tmp_path / "other.toml"
        path.write_text(text)
        return {**koog_env, "KOOG_CONFIG": str(path)}

    return env


def test_a_checkpoint_whose_message_rows_are_gone_is_never_restored_from(
    run_koog: Run, data_dir: Path
) -> None:
    run_koog("chat", "-s", "o", "one")
    first = run_koog("checkpoint", "create", "-s", "o").stdout.strip()
    run_koog("chat", "-s", "o", "two")
    _sql(data_dir, "DELETE FROM messages WHERE body LIKE '%echo: one%'")
    before = snapshot(data_dir / "sessions")
    result = run_koog("rollback", "-s", "o", first, "--yes")
    assert result.returncode == 3, result.stderr
    assert "message rows that are gone" in result.stderr and "internal error" not in result.stderr
    assert snapshot(data_dir / "sessions") == before


def test_hanging_and_exiting_tools_do_not_end_the_turn(
    run_koog: Run, server: FakeOpenAIServer, tool_env: dict[str, str]
) -> None:
    server.enqueue(
        {"tool_calls": [call("hang", "c1", x="1"), call("leave", "c2", x="2")]},
        {"content": "carried on"},
    )
    started = time.monotonic()
    result = run_koog("chat", "-s", "x", "go", env=tool_env)
    assert result.returncode == 0 and result.stdout == "carried on\n", result.stderr
    assert time.monotonic() - started < 15
    told = [m["content"] for m in server.chat_requests[-1]["messages"] if m["role"] == "tool"]
    assert told[0] == "Error: hang did not finish within 1.5s and was stopped"
    assert told[1] == "Error: SystemExit: 7"


def test_tools_cannot_reach_past_koog(
    run_koog: Run, server: FakeOpenAIServer, tool_env: dict[str, str]
) -> None:
    """A tool writing to file descriptor 1 (itself, or a program it starts) leaves stdout
    holding only the reply; a tool ending its own process is a failed call the model and
    the user are told about, and there is nothing left to resume."""
    server.enqueue(
        {"tool_calls": [call("noisy", "n1", x="1"), call("vanish", "v1", x="2")]},
        {"content": "the reply"},
    )
    result = run_koog("chat", "-s", "iso", "go", env=tool_env)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "the reply\n"
    assert "written to fd 1" in result.stderr and "echoed by a child" in result.stderr
    told = [m["content"] for m in server.chat_requests[-1]["messages"] if m["role"] == "tool"]
    assert told[0] == "noisy done"
    assert told[1].startswith("Error: vanish ended its own process (exit status 0)")
    assert "vanish ended its own process" in result.stderr  # the user is told too
    again = run_koog("chat", "-s", "iso", "--resume", env=tool_env)
    assert again.returncode == 0 and again.stdout == "" and "nothing to resume" in again.stderr


def test_base_url_credentials_are_masked(run_koog: Run, server: FakeOpenAIServer) -> None:
    secret_url = server.base_url.replace("http://", "http://bob:hunter2@") + "?api_key=hunter3"
    server.enqueue({"status": 500, "message": "nope"})
    failed = run_koog("chat", "-s", "m", "hi", env={"OPENAI_BASE_URL": secret_url})
    assert failed.returncode == 1 and "hunter" not in failed.stderr and "***@" in failed.stderr
    shown = run_koog("config", "show", env={"OPENAI_BASE_URL": secret_url})
    assert "hunter" not in shown.stdout and "***" in shown.stdout
    assert os.environ.get("OPENAI_BASE_URL") is None


@pytest.mark.usefixtures("server")
def test_an_edited_stored_message_is_never_restored(forked_koog: Run, data_dir: Path) -> None:
    forked_koog("chat", "-s", "e", "first words")
    forked_koog("chat", "-s", "e", "second")
    _sql(data_dir, "UPDATE messages SET body = replace(body, 'first words', 'forged words')")
    result = forked_koog("rollback", "-s", "e", "--latest", "--yes")
    assert result.returncode == 3, result.stderr
    first = result.stderr.splitlines()[0]
    assert "koog.sqlite3" in first and "was changed after it was stored" in first
    shown = forked_koog("history", "show", "-s", "e")
    assert "forged" not in shown.stdout and "second" in shown.stdout


def test_a_forged_digests_file_never_decides_what_is_restored(
    forked_koog: Run, data_dir: Path, server: FakeOpenAIServer
) -> None:
    """Its checks can be recomputed by whoever edits it: every digest the first message's
    made later restore points name 1,200 copies of the first message."""
    import hashlib

    from koogcli.adapters.files.history import FileHistoryStore
    from koogcli.adapters.paths import DataDir
    from koogcli.core.messages import assistant, user
    from koogcli.core.names import SessionName

    history = [user(f"q{i}") if i % 2 == 0 else assistant(f"a{i}") for i in range(1200)]
    FileHistoryStore(DataDir(data_dir)).write(SessionName("big"), history, None)
    cache = data_dir / "sessions" / "big.digests"
    header, _, lines = cache.read_bytes().partition(b"\n")
    keys = lines.split(b"\n")
    forged = b"\n".join([keys[0]] * len(keys))
    words = header.split(b" ")
    words[4] = hashlib.sha256(forged).hexdigest()[:16].encode()
    cache.write_bytes(b" ".join(words) + b"\n" + forged)
    assert forked_koog("chat", "-s", "big", "one more").returncode == 0
    done = forked_koog("rollback", "-s", "big", "--latest", "--yes")
    assert done.returncode == 0, done.stderr
    restored = FileHistoryStore(DataDir(data_dir)).read(SessionName("big")).messages
    assert [m.text for m in restored if m.role != "system"] == [m.text for m in history]
