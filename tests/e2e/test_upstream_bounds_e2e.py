"""An upstream's answer is read within bounds (issue 51, acceptance 5): JSON nested 3,000 or
100,000 levels deep, a reply trickled past `[llm] turn_timeout_seconds`, and one 40 MiB
server-sent-event line are each a clear error (a 502 from `koog serve`, one line and exit 1
from `koog chat`), never a 500, a traceback or "internal error"; the turn fails and nothing
of it is stored; the 40 MiB line is refused holding at most 100 MB. On every upstream
protocol, through the client protocol that passes through to it and through chat
completions (translated)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import KOOG_BIN
from tests.fakes.openai_server import FakeOpenAIServer
from tests.support.limit_probes import peak_rss_mib
from tests.support.serving import KoogServe

pytestmark = pytest.mark.e2e

Run = Callable[..., subprocess.CompletedProcess[str]]
WIRES = ["chat", "responses", "messages"]
BODIES: dict[str, tuple[str, dict[str, object]]] = {
    "chat": (
        "/chat/completions",
        {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]},
    ),
    "messages": (
        "/messages",
        {"model": "claude", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]},
    ),
    "responses": ("/responses", {"model": "gpt-4o-mini", "input": "hi", "store": False}),
}
TRICKLE = {"content": " ".join(["slowly"] * 60), "chunk_delay": 0.1}  # six seconds


def _env(isolated: Path, server: FakeOpenAIServer, wire: str) -> dict[str, str]:
    path = isolated / f"{wire}.toml"
    path.write_text(
        f'[llm]\nmodel = "up"\nbase_url = "{server.base_url}"\nwire_api = "{wire}"\n'
        "max_retries = 0\ntimeout_seconds = 5\nturn_timeout_seconds = 0.5\n"
    )
    return {"KOOG_CONFIG": str(path), "ANTHROPIC_API_KEY": "upstream-key", "KOOG_MODEL": ""}


def _ask(serve: KoogServe, protocol: str, stream: bool, session: str) -> Any:
    import httpx2

    path, body = BODIES[protocol]
    return httpx2.post(
        serve.url + path,
        json={**body, "stream": stream},
        headers={"anthropic-version": "2023-06-01", "X-Koog-Session": session},
        timeout=60,
    )


def _said(run_koog: Run, env: dict[str, str], session: str) -> list[tuple[str, str]]:
    shown = run_koog("history", "show", "-s", session, "--json", env=env)
    if shown.returncode == 2:  # never stored: no such session
        return []
    assert shown.returncode == 0, shown.stderr
    return [(m["role"], m["content"]) for m in json.loads(shown.stdout) if m["role"] != "system"]


def _failed_cleanly(done: subprocess.CompletedProcess[str], says: str) -> None:
    """`koog chat`'s failure: exit 1, one error line (and a hint), no traceback."""
    assert done.returncode == 1, done.stderr
    lines = done.stderr.splitlines()
    assert lines[0].startswith("koog: error: ") and says in lines[0], done.stderr
    assert all(line.startswith("koog: ") for line in lines), done.stderr
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr


def _protocols(wire: str) -> list[str]:
    """The client protocol passed through to `wire`, and chat completions (translated)."""
    return [wire] if wire == "chat" else [wire, "chat"]


@pytest.mark.parametrize("wire", WIRES)
def test_deep_json_from_an_upstream_is_a_clear_error_and_stores_nothing(
    koog_env: dict[str, str], server: FakeOpenAIServer, isolated: Path, run_koog: Run, wire: str
) -> None:
    env = _env(isolated, server, wire)
    log = isolated / "serve.log"
    started = KoogServe({**koog_env, **env}, log=log).start()
    try:
        for levels in (3_000, 100_000):
            for protocol in _protocols(wire):
                for stream in (False, True):
                    server.enqueue({"content": "deep", "deep": levels})
                    answer = _ask(started, protocol, stream, "deep")
                    where = (levels, protocol, stream, answer.text[:300])
                    assert answer.status_code == 502, where
                    assert "nested deeper than 128 levels" in answer.text, where
    finally:
        assert started.stop() == 0
    assert "Traceback" not in log.read_text() and "internal error" not in log.read_text()
    assert _said(run_koog, env, "deep") == []
    assert run_koog("chat", "-s", "cli", "first", env=env).returncode == 0
    for levels in (3_000, 100_000):
        server.enqueue({"content": "deep", "deep": levels})
        _failed_cleanly(run_koog("chat", "-s", "cli", "deeper", env=env), "nested deeper")
    assert _said(run_koog, env, "cli") == [("user", "first"), ("assistant", "echo: first")]


@pytest.mark.parametrize("wire", WIRES)
def test_a_trickling_reply_ends_at_the_turn_deadline_and_stores_nothing(
    koog_env: dict[str, str], server: FakeOpenAIServer, isolated: Path, run_koog: Run, wire: str
) -> None:
    """Each piece comes well within `timeout_seconds` (5 s); the reply would take six
    seconds; `turn_timeout_seconds = 0.5` ends it."""
    env = _env(isolated, server, wire)
    assert run_koog("chat", "-s", "slow", "first", env=env).returncode == 0
    server.enqueue(TRICKLE)
    began = time.monotonic()
    done = run_koog("chat", "-s", "slow", "take your time", env=env)
    took = time.monotonic() - began
    _failed_cleanly(done, "did not finish the reply within 0.5s")
    assert took < 4, took
    assert _said(run_koog, env, "slow") == [("user", "first"), ("assistant", "echo: first")]
    started = KoogServe({**koog_env, **env}, log=isolated / "serve.log").start()
    try:
        server.enqueue(TRICKLE)
        began = time.monotonic()
        answer = _ask(started, wire, True, "slow-serve")
        took = time.monotonic() - began
    finally:
        assert started.stop() == 0
    assert took < 4, took
    assert "did not finish the reply within 0.5s" in answer.text, answer.text[-500:]
    assert _said(run_koog, env, "slow-serve") == []


def _peak_of_chat(env: dict[str, str], *args: str) -> tuple[int, str, float]:
    """Run `koog chat`: its exit code, its stderr and its peak resident set in MiB (its
    VmHWM, read until it exits: the rusage of a child counts its parent's pages too)."""
    err = Path(env["KOOG_DATA_DIR"]).parent / "huge.err"
    peak = 0.0
    with open(os.devnull, "w") as out, open(err, "w") as errors:
        proc = subprocess.Popen([KOOG_BIN, "chat", *args], env=env, stdout=out, stderr=errors)
        while proc.poll() is None:
            with contextlib.suppress(OSError):  # gone between the poll and the read
                peak = max(peak, peak_rss_mib(proc.pid))
            time.sleep(0.002)
        proc.wait(60)
    return proc.returncode, err.read_text(), peak


@pytest.mark.parametrize("wire", WIRES)
def test_a_40_mib_event_line_is_refused_within_bounded_memory(
    koog_env: dict[str, str], server: FakeOpenAIServer, isolated: Path, run_koog: Run, wire: str
) -> None:
    env = {**koog_env, **_env(isolated, server, wire)}
    huge = {"content": "a b c", "huge_line": 40 << 20}
    server.enqueue(huge)
    code, stderr, peak = _peak_of_chat(env, "-s", "huge", "hello")
    assert code == 1 and "sent an event larger than 16 MiB" in stderr, stderr
    assert "Traceback" not in stderr
    assert peak <= 100, peak
    assert _said(run_koog, env, "huge") == []
    started = KoogServe(env, log=isolated / "serve.log").start()
    try:
        assert started.proc is not None
        server.enqueue(huge)
        answer = _ask(started, wire, True, "huge-serve")
        served_peak = peak_rss_mib(started.proc.pid)
    finally:
        assert started.stop() == 0
    assert "sent an event larger than 16 MiB" in answer.text, answer.text[-500:]
    assert served_peak <= 100, served_peak
    assert _said(run_koog, env, "huge-serve") == []
