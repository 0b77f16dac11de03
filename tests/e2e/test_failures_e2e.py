"""Failure paths tell the truth (SPEC §5.10-12): failed turns stay failed, rollback never
lies, endpoints' quirks are handled. Each test runs the installed binary."""

from __future__ import annotations

import json
import signal
import socket
import sqlite3
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pexpect
import pytest

from tests.conftest import KOOG_BIN, forked_run_koog, snapshot, spawn_koog
from tests.e2e.test_persistence_e2e import call, tool_env, tool_log
from tests.fakes.openai_server import FakeOpenAIServer

pytestmark = pytest.mark.e2e


# koog processes forked from the zygote (tests/conftest.py: forked_run_koog).
run_koog = pytest.fixture(name="run_koog")(forked_run_koog)


__all__ = ["tool_env"]  # the fixture, shared with the persistence tests
Run = Callable[..., subprocess.CompletedProcess[str]]


def history(run_koog: Run, session: str) -> list[dict[str, Any]]:
    shown = run_koog("history", "show", "-s", session, "--format", "json")
    assert shown.returncode == 0, shown.stderr
    return list(json.loads(shown.stdout))


def restore_points(run_koog: Run, session: str) -> list[dict[str, Any]]:
    return list(json.loads(run_koog("checkpoint", "list", "-s", session, "--json").stdout))


@pytest.fixture
def configure(run_koog: Run, tmp_path: Path) -> Callable[[str], Run]:
    """Write a config file; the returned runner uses it (run_koog's env is fixed at setup)."""

    def write(text: str) -> Run:
        path = tmp_path / "e2e-config.toml"
        path.write_text(text, encoding="utf-8")

        def run(*args: str, env: dict[str, str] | None = None, **kw: Any) -> Any:
            return run_koog(*args, env={"KOOG_CONFIG": str(path), **(env or {})}, **kw)

        return run

    return write


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_five_failed_turns_leave_no_trace(
    run_koog: Run, server: FakeOpenAIServer, koog_env: dict[str, str], data_dir: Path
) -> None:
    assert run_koog("chat", "-s", "f", "good turn").returncode == 0
    session_file = data_dir / "sessions" / "f.json"
    before = session_file.read_bytes()
    points = restore_points(run_koog, "f")

    server.enqueue({"status": 401})
    assert run_koog("chat", "-s", "f", "401").returncode == 1
    server.enqueue({"status": 500})
    assert run_koog("chat", "-s", "f", "500").returncode == 1
    server.enqueue({"delay": 2, "content": "late"})
    slow = run_koog("chat", "-s", "f", "slow", env={"KOOG_TIMEOUT_SECONDS": "0.3"})
    assert slow.returncode == 1
    refused_url = f"http://127.0.0.1:{closed_port()}/v1"
    refused = run_koog("chat", "-s", "f", "refused", env={"OPENAI_BASE_URL": refused_url})
    assert refused.returncode == 1 and "cannot connect" in refused.stderr
    server.enqueue({"chunks": ["slow "] * 50, "chunk_delay": 0.1})
    proc = spawn_koog("chat", "-s", "f", "ctrl-c", env=koog_env, capture=True)
    assert proc.stdout is not None
    proc.stdout.read(5)  # the reply has started
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=10) == 130

    assert session_file.read_bytes() == before
    assert restore_points(run_koog, "f") == points
    after = run_koog("chat", "-s", "f", "next")
    assert after.returncode == 0 and "interrupted" not in after.stderr
    resume = run_koog("chat", "-s", "f", "--resume")
    assert "nothing to resume" in resume.stderr

    env = {**koog_env, "PROMPT_TOOLKIT_NO_CPR": "1", "TERM": "xterm", "NO_COLOR": "1"}
    server.enqueue({"status": 500})
    child = pexpect.spawn(KOOG_BIN, ["chat", "-s", "f"], env=env, encoding="utf-8", timeout=15)
    child.expect_exact("f>")
    child.send("fails in the repl\r")
    child.expect_exact("HTTP 500")
    child.expect_exact("f>")
    child.sendcontrol("d")
    child.expect(pexpect.EOF)
    child = pexpect.spawn(KOOG_BIN, ["chat", "-s", "f"], env=env, encoding="utf-8", timeout=15)
    child.expect_exact("f>")
    child.sendcontrol("d")
    child.expect(pexpect.EOF)
    assert "resume" not in (child.before or "") and "interrupted" not in (child.before or "")


def test_a_live_turn_in_another_process_is_not_interrupted(
    run_koog: Run, server: FakeOpenAIServer, koog_env: dict[str, str], tool_env: dict[str, str]
) -> None:
    env = {**koog_env, **tool_env, "TOOL_SLEEP": "4"}
    server.enqueue({"tool_calls": [call("a", "ca", x="1")]})
    proc = spawn_koog("chat", "-s", "live", "slow tool", env=env, capture=True)
    deadline = time.monotonic() + 10
    while not tool_log(tool_env) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert tool_log(tool_env) == [["a", "1"]]  # the first process is inside the tool
    server.enqueue({"content": "meanwhile"}, {"content": "slow done"})
    other = run_koog("chat", "-s", "live", "meanwhile", env=tool_env)
    assert other.returncode == 0 and "interrupted" not in other.stderr
    resume = run_koog("chat", "-s", "live", "--resume", env=tool_env)
    assert "nothing to resume" in resume.stderr
    out, _ = proc.communicate(timeout=15)
    assert proc.returncode == 0 and out == "slow done\n"
    assert tool_log(tool_env) == [["a", "1"]]


def test_rollback_latest_skips_a_failed_turn(run_koog: Run, server: FakeOpenAIServer) -> None:
    run_koog("chat", "-s", "rl", "one")
    after_one = history(run_koog, "rl")
    run_koog("chat", "-s", "rl", "two")
    server.enqueue({"status": 500})
    assert run_koog("chat", "-s", "rl", "three").returncode == 1
    rolled = run_koog("rollback", "-s", "rl", "--latest", "--yes")
    assert rolled.returncode == 0, rolled.stderr
    assert history(run_koog, "rl") == after_one
    assert "undoing turn 2" in rolled.stderr
    # A rollback is a change too: --latest again redoes turn two.
    redo = run_koog("rollback", "-s", "rl", "--latest", "--yes")
    assert "undoing the rollback" in redo.stderr
    assert [m["content"] for m in history(run_koog, "rl")][-2:] == ["two", "echo: two"]


def test_rollback_never_restores_effects_that_were_undone(
    run_koog: Run, server: FakeOpenAIServer, tool_env: dict[str, str]
) -> None:
    run_koog("chat", "-s", "bob", "hello", env=tool_env)
    point = run_koog("checkpoint", "create", "-s", "bob", env=tool_env).stdout.strip()
    server.enqueue({"tool_calls": [call("create_user", "c1", name="bob")]}, {"content": "made"})
    run_koog("chat", "-s", "bob", "create bob", env=tool_env)
    undone = run_koog("rollback", "-s", "bob", point, "--yes", env=tool_env)
    assert undone.returncode == 0 and tool_log(tool_env)[-1] == ["remove_user", "bob"]
    before = history(run_koog, "bob")

    refused = run_koog("rollback", "-s", "bob", "--latest", "--yes", env=tool_env)
    assert refused.returncode == 2
    assert "create_user(bob)" in refused.stderr and "--force" in refused.stderr
    assert history(run_koog, "bob") == before

    forced = run_koog("rollback", "-s", "bob", "--latest", "--yes", "--force", env=tool_env)
    assert forced.returncode == 0, forced.stderr
    restored = history(run_koog, "bob")
    note = restored[-1]
    assert note["meta"]["kind"] == "note" and "create_user(bob)" in note["content"]
    assert tool_log(tool_env) == [["create_user", "bob"], ["remove_user", "bob"]]
    # Compression keeps the note.
    server.enqueue({"content": "summary of it all"})
    assert run_koog("compress", "-s", "bob").returncode == 0
    kinds = [m.get("meta", {}).get("kind") for m in history(run_koog, "bob")]
    assert "note" in kinds and "summary" in kinds


def test_streams_answered_with_json_or_nothing(
    run_koog: Run, server: FakeOpenAIServer, data_dir: Path
) -> None:
    server.enqueue({"json": True, "content": "a whole JSON answer"})
    ok = run_koog("chat", "-s", "js", "hi")
    assert ok.returncode == 0 and ok.stdout == "a whole JSON answer\n"
    assert history(run_koog, "js")[-1]["content"] == "a whole JSON answer"
    # An empty stream gets a second opinion: the same request without streaming.
    server.enqueue({"empty_stream": True}, {"content": "asked again, whole"})
    again = run_koog("chat", "-s", "js", "anything?")
    assert again.returncode == 0 and again.stdout == "asked again, whole\n", again.stderr
    assert [r.get("stream") for r in server.chat_requests[-2:]] == [True, None]
    before = snapshot(data_dir / "sessions")
    server.enqueue({"empty_stream": True}, {"content": ""})
    empty = run_koog("chat", "-s", "js", "anything more?")
    assert empty.returncode == 1 and "empty reply, streamed and not" in empty.stderr
    assert snapshot(data_dir / "sessions") == before


def test_a_stream_cut_without_a_finish_reason_is_a_failed_turn(
    backend: str, run_koog: Run, server: FakeOpenAIServer
) -> None:
    """llama.cpp ends a stream in flight with [DONE] and no finish chunk: the partial text
    was shown, but nothing is stored as if the reply were whole."""
    assert run_koog("chat", "-s", "cut", "first").returncode == 0
    before = history(run_koog, "cut")
    server.enqueue({"content": "one two three four five six", "cut_after": 3})
    cut = run_koog("chat", "-s", "cut", "tell me more")
    assert cut.returncode == 1
    assert cut.stdout.startswith("one two three"), cut.stdout  # what arrived was shown
    assert "ended the stream before the reply was complete" in cut.stderr
    assert history(run_koog, "cut") == before


def test_servers_that_reject_stream_options_get_one_retry(
    run_koog: Run, server: FakeOpenAIServer
) -> None:
    server.reject_stream_options = True
    result = run_koog("chat", "-s", "so", "hello")
    assert result.returncode == 0 and result.stdout == "echo: hello\n"
    sent = server.chat_requests
    assert len(sent) == 2 and "stream_options" in sent[0] and "stream_options" not in sent[1]


def test_request_parameters(
    run_koog: Run, server: FakeOpenAIServer, configure: Callable[[str], Run]
) -> None:
    run_koog("chat", "-s", "p", "defaults")
    assert "temperature" not in server.chat_requests[-1]
    # Unset, the server decides; a server on this machine (the test server) gets a cap.
    assert server.chat_requests[-1]["max_tokens"] == 4096
    run = configure(
        '[llm]\ntemperature = 0.2\nmax_tokens = 99\nreasoning_effort = "low"\n'
        "[llm.extra_body]\ntop_k = 5\nmin_p = 0.1\n"
    )
    assert run("chat", "-s", "p", "configured").returncode == 0
    sent = server.chat_requests[-1]
    assert sent["temperature"] == 0.2 and sent["max_tokens"] == 99
    assert sent["reasoning_effort"] == "low"
    assert sent["top_k"] == 5 and sent["min_p"] == 0.1


def memory_config(configure: Callable[[str], Run], on_error: str = "warn") -> Run:
    return configure(
        f'[long_term_memory]\non_error = "{on_error}"\n'
        '[long_term_memory.embeddings]\nmodel = "test-embed"\n'
        "[long_term_memory.ingestion]\nenabled = true\n"
    )


def test_ingestion_failure_keeps_the_turn_and_retries_later(
    server: FakeOpenAIServer, configure: Callable[[str], Run]
) -> None:
    run_koog = memory_config(configure)
    server.embedding_faults.extend([500])
    first = run_koog("chat", "-s", "in", "the blue door")
    assert first.returncode == 0 and first.stdout == "echo: the blue door\n"
    assert first.stderr.count("koog: warning:") == 1 and "ingestion failed" in first.stderr
    assert history(run_koog, "in")[-1]["content"] == "echo: the blue door"
    assert "interrupted" not in run_koog("chat", "-s", "in", "second").stderr
    listed = json.loads(run_koog("memory", "list", "--json").stdout)
    contents = sorted(r["content"] for r in listed)
    assert contents == sorted(["the blue door", "echo: the blue door", "second", "echo: second"])
    run_koog("chat", "-s", "in", "third")
    assert len(json.loads(run_koog("memory", "list", "--json").stdout)) == 6


def test_ingestion_failure_with_fail_exits_1_but_the_turn_is_complete(
    server: FakeOpenAIServer, configure: Callable[[str], Run]
) -> None:
    run_koog = memory_config(configure, "fail")
    server.embedding_faults.extend([500])
    result = run_koog("chat", "-s", "ff", "stored anyway")
    assert result.returncode == 1
    assert history(run_koog, "ff")[-1]["content"] == "echo: stored anyway"
    assert "interrupted" not in run_koog("chat", "-s", "ff", "next").stderr


def test_retrieval_failure_answers_without_memory_or_fails(
    run_koog: Run, server: FakeOpenAIServer, configure: Callable[[str], Run]
) -> None:
    assert run_koog("memory", "add", "deploys are blue-green").returncode == 0
    config = (
        '[long_term_memory.retrieval]\nenabled = true\n[long_term_memory.embeddings]\nmodel = "e"\n'
    )
    server.embedding_faults.extend([500])
    warned = configure(config)("chat", "-s", "rt", "how do we deploy")
    assert warned.returncode == 0 and warned.stderr.count("koog: warning:") == 1
    assert "retrieval failed" in warned.stderr
    server.embedding_faults.extend([500])
    requests = len(server.chat_requests)
    run = configure('[long_term_memory]\non_error = "fail"\n' + config)
    failed = run("chat", "-s", "rt", "how do we deploy")
    assert failed.returncode == 1 and len(server.chat_requests) == requests


@pytest.mark.parametrize("fault", ["-inf", "dim"])
def test_bad_vectors_are_refused(
    server: FakeOpenAIServer, configure: Callable[[str], Run], data_dir: Path, fault: str
) -> None:
    run_koog = configure('[long_term_memory.embeddings]\nmodel = "test-embed"\n')
    assert run_koog("memory", "add", "a first record").returncode == 0
    db = data_dir / "memory.sqlite3"
    count = sqlite3.connect(db).execute("SELECT COUNT(*) FROM records").fetchone()[0]
    server.embedding_faults.append(fault)
    result = run_koog("memory", "add", "a bad vector")
    assert result.returncode == 1 and "nothing was written" in result.stderr
    assert sqlite3.connect(db).execute("SELECT COUNT(*) FROM records").fetchone()[0] == count


def test_tool_needing_approval_is_refused_without_a_terminal(
    run_koog: Run, server: FakeOpenAIServer, tool_env: dict[str, str]
) -> None:
    config = Path(tool_env["KOOG_CONFIG"])
    config.write_text(config.read_text().replace('remove_user"\n', 'remove_user"\nask = true\n', 1))
    server.enqueue({"tool_calls": [call("create_user", "c1", name="eve")]}, {"content": "ok"})
    result = run_koog("chat", "-s", "ask", "make eve", env=tool_env)
    assert result.returncode == 0
    assert tool_log(tool_env) == []
    told = [m["content"] for m in server.chat_requests[-1]["messages"] if m["role"] == "tool"]
    assert "approval" in told[0] and "not made" in told[0]


def test_redaction_covers_every_file(
    server: FakeOpenAIServer, configure: Callable[[str], Run], data_dir: Path
) -> None:
    run_koog = configure(
        "[[chat_memory.preprocessors]]\n"
        "type = \"redact\"\npattern = '[\\w.+-]+@[\\w-]+\\.[\\w.-]+'\n"
        "[long_term_memory.ingestion]\nenabled = true\n"
    )
    result = run_koog("chat", "-s", "rd", "mail me at ada@example.org please")
    assert result.returncode == 0
    # The request of the turn is sent as typed; nothing written keeps the address.
    assert "ada@example.org" in server.chat_requests[-1]["messages"][-1]["content"]
    run_koog("memory", "add", "ada@example.org likes tea")
    for path in data_dir.rglob("*"):
        if path.is_file():
            assert b"ada@example.org" not in path.read_bytes(), path
    assert "[REDACTED]" in history(run_koog, "rd")[-1]["content"]


def test_system_prompt_is_per_turn(run_koog: Run) -> None:
    run_koog("chat", "-s", "sp", "one")
    run_koog("chat", "-s", "sp", "two", "--system", "Answer in French.")
    run_koog("chat", "-s", "sp", "three")
    shown = [(m["role"], m["content"]) for m in history(run_koog, "sp")]
    assert shown == [
        ("system", "You are a helpful assistant."),
        ("user", "one"),
        ("assistant", "echo: one"),
        ("system", "Answer in French."),
        ("user", "two"),
        ("assistant", "echo: two"),
        ("system", "You are a helpful assistant."),
        ("user", "three"),
        ("assistant", "echo: three"),
    ]


def test_a_reply_cut_at_the_length_limit_is_stored_saying_so(
    run_koog: Run, server: FakeOpenAIServer
) -> None:
    server.enqueue({"content": "the first half of a long", "finish_reason": "length"})
    done = run_koog("chat", "-s", "len", "write a lot")
    assert done.returncode == 0 and done.stdout == "the first half of a long\n"
    [reply] = [m for m in history(run_koog, "len") if m["role"] == "assistant"]
    assert reply["meta"]["finish_reason"] == "length"
    shown = run_koog("history", "show", "-s", "len").stdout
    assert "[assistant (cut at the length limit)] the first half of a long" in shown
    why = run_koog("why", "-s", "len").stdout
    assert "the reply: cut at the length limit (finish_reason length)" in why
