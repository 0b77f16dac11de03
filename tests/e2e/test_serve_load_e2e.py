"""`koog serve` under load and under kill -9 (SPEC §6): many clients streaming at once,
several on one session, two servers on one PostgreSQL database; nothing lost, nothing
stored twice, nothing interrupted stored as complete."""

from __future__ import annotations

import contextlib
import json
import subprocess
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import openai
import pytest

from tests.fakes.openai_server import FakeOpenAIServer
from tests.support.serving import KoogServe, http

pytestmark = pytest.mark.e2e

Run = Callable[..., subprocess.CompletedProcess[str]]


def _cli_history(run_koog: Run, name: str) -> list[tuple[str, str]]:
    done = run_koog("history", "show", "-s", name, "--json")
    assert done.returncode == 0, done.stderr
    return [(m["role"], m["content"]) for m in json.loads(done.stdout) if m["role"] != "system"]


def _history(via: KoogServe, name: str) -> list[tuple[str, str]]:
    """A session as stored, read through the server's /koog/v1 (a koog process per read
    would cost half a second each; one read per test goes through the CLI too)."""
    status, body = http("GET", f"{via.url.removesuffix('/v1')}/koog/v1/sessions/{name}")
    assert status == 200, body
    return [(m["role"], m["content"]) for m in body["messages"] if m["role"] != "system"]


def _sessions(via: KoogServe) -> list[str]:
    status, body = http("GET", f"{via.url.removesuffix('/v1')}/koog/v1/sessions")
    assert status == 200, body
    return [s["session"] for s in body]


class Client:
    """One conversation, kept as a client keeps it, streamed turn after turn."""

    def __init__(self, url: str, session: str, tag: str) -> None:
        self.api = openai.OpenAI(base_url=url, api_key="k", max_retries=0, timeout=60)
        self.session = session
        self.tag = tag
        self.convo: list[dict[str, Any]] = []
        self.last_session = ""

    def turn(self, n: int) -> None:
        self.convo.append({"role": "user", "content": f"{self.tag} turn {n}"})
        raw = self.api.chat.completions.with_raw_response.create(
            model="gpt-4o-mini",
            messages=self.convo,  # type: ignore[arg-type]
            stream=True,
            extra_headers={"X-Koog-Session": self.session},
        )
        self.last_session = raw.headers["x-koog-session"]
        text = "".join(c.choices[0].delta.content or "" for c in raw.parse() if c.choices)
        assert text == f"echo: {self.tag} turn {n}"
        self.convo.append({"role": "assistant", "content": text})

    def said(self) -> list[tuple[str, str]]:
        return [(m["role"], m["content"]) for m in self.convo]


def _drive(clients: list[Client], turns: int) -> None:
    def run(client: Client) -> None:
        for n in range(turns):
            client.turn(n)

    with ThreadPoolExecutor(len(clients)) as pool:
        for done in [pool.submit(run, c) for c in clients]:
            done.result()


def _no_duplicates(via: KoogServe) -> None:
    for name in _sessions(via):
        history = _history(via, name)
        users = [text for role, text in history if role == "user"]
        assert len(users) == len(set(users)), name


def test_ten_clients_streaming_on_ten_sessions_and_four_on_one(
    serve: KoogServe, server: FakeOpenAIServer, run_koog: Run
) -> None:
    server.default_delay = 0.01
    own = _ten_and_four(serve)
    assert _cli_history(run_koog, "s0") == own[0].said()


def _ten_and_four(serve: KoogServe) -> list[Client]:
    """Ten clients streaming 20 turns on their own sessions while four share one: each
    own session holds exactly its client's conversation, nothing is stored twice."""
    own = [Client(serve.url, f"s{i}", f"c{i}") for i in range(10)]
    shared = [Client(serve.url, "shared", f"x{i}") for i in range(4)]
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(_drive, own, 20)
        second = pool.submit(_drive, shared, 5)
        first.result()
        second.result()
    for client in own:
        assert client.last_session == client.session
        assert _history(serve, client.session) == client.said()
    # On one session, a client whose conversation another client's turn changed under it
    # goes on in a fork: the session its last reply named holds exactly its conversation.
    for client in shared:
        assert client.last_session.startswith("shared")
        assert _history(serve, client.last_session) == client.said()
    _no_duplicates(serve)
    return own


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_two_servers_on_one_postgresql_database_serve_the_same_sessions(
    backend: str, koog_env: dict[str, str], isolated: Path, run_koog: Run
) -> None:
    servers = [KoogServe(koog_env, log=isolated / f"serve{i}.log").start() for i in range(2)]
    try:
        # Each conversation's turns alternate between the two servers.
        clients = [[Client(s.url, f"both{i}", f"b{i}") for s in servers] for i in range(6)]

        def run(pair: list[Client]) -> None:
            for n in range(10):
                asking = pair[n % 2]
                asking.convo = pair[(n + 1) % 2].convo  # one conversation, two doors
                asking.turn(n)

        with ThreadPoolExecutor(6) as pool:
            for done in [pool.submit(run, pair) for pair in clients]:
                done.result()
        # One request sent through both doors at once (a client retrying elsewhere): one
        # stores it, the other answers it again in a fork; nothing is stored twice.
        twins = [Client(s.url, "twice", "t") for s in servers]
        with ThreadPoolExecutor(2) as pool:
            for done in [pool.submit(c.turn, 0) for c in twins]:
                done.result()
        assert sorted(c.last_session for c in twins) == ["twice", "twice~2"]
        one = servers[0]
        assert _history(one, "twice") == twins[0].said() == _history(one, "twice~2")
        for i, pair in enumerate(clients):
            assert _history(servers[i % 2], f"both{i}") == pair[0].said() == pair[1].said()
            assert len(pair[0].said()) == 20
        _no_duplicates(one)
    finally:
        assert [s.stop() for s in servers] == [0, 0]
    assert _cli_history(run_koog, "both0") == clients[0][0].said()


@pytest.mark.parametrize("workers", [1, 2])
def test_kill_minus_nine_mid_stream_loses_no_completed_turn(
    workers: int,
    backend: str,
    koog_env: dict[str, str],
    server: FakeOpenAIServer,
    isolated: Path,
    data_dir: Path,
    run_koog: Run,
) -> None:
    served = KoogServe(koog_env, "--workers", str(workers), log=isolated / "serve.log").start()
    clients = [Client(served.url, f"k{i}", f"k{i}") for i in range(4)]
    for client in clients:
        client.turn(0)
    server.enqueue(*[{"chunks": [f"w{n} " for n in range(200)], "chunk_delay": 0.02}] * 4)
    started = threading.Barrier(5)

    def interrupted(client: Client) -> None:
        client.convo.append({"role": "user", "content": f"{client.tag} turn 1"})
        started.wait(10)
        try:
            stream = client.api.chat.completions.create(
                model="gpt-4o-mini",
                messages=client.convo,  # type: ignore[arg-type]
                stream=True,
                extra_headers={"X-Koog-Session": client.session},
            )
            for _ in stream:
                pass
        except openai.APIError:
            pass
        client.convo.pop()

    with ThreadPoolExecutor(4) as pool:
        waiting = [pool.submit(interrupted, c) for c in clients]
        started.wait(10)
        time.sleep(1.0)  # every stream is under way
        served.kill()
        for done in waiting:
            done.result()
    if backend == "files":
        for path in (data_dir / "sessions").glob("*.json"):
            json.loads(path.read_text())
    restarted = KoogServe(koog_env, log=isolated / "serve2.log").start()
    try:
        for client in clients:
            client.api = openai.OpenAI(base_url=restarted.url, api_key="k", max_retries=0)
            assert _history(restarted, client.session) == client.said()
            client.turn(1)  # the client resends; the killed turn is given up, not resumed
            assert _history(restarted, client.session) == client.said()
            assert client.last_session == client.session
    finally:
        assert restarted.stop() == 0


def _workers(supervisor: int, count: int) -> list[int]:
    """The supervisor's worker processes, once it has started `count` of them."""
    children = Path(f"/proc/{supervisor}/task/{supervisor}/children")
    deadline = time.monotonic() + 10
    while len(found := children.read_text().split()) < count and time.monotonic() < deadline:
        time.sleep(0.02)
    return [int(pid) for pid in found]


def _cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def test_two_workers_under_load_lose_nothing_and_store_nothing_twice(
    backend: str, koog_env: dict[str, str], server: FakeOpenAIServer, isolated: Path
) -> None:
    """`koog serve --workers 2`: two processes accept on one port and share the store; the
    load of the first test (ten clients on their own sessions, four on one) lands as it
    does with one process, both workers answer, and kill -9 of the supervisor takes the
    workers with it."""
    server.default_delay = 0.01
    served = KoogServe(koog_env, "--workers", "2", log=isolated / "serve.log").start()
    assert served.proc is not None
    workers = _workers(served.proc.pid, 2)
    assert len(workers) == 2 and "2 workers" in served.start_line
    before = {pid: _cpu_ticks(pid) for pid in workers}
    _ten_and_four(served)
    assert all(_cpu_ticks(pid) > before[pid] + 10 for pid in workers)  # both answered
    served.kill()
    deadline = time.monotonic() + 10
    while any(Path(f"/proc/{pid}").exists() for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [pid for pid in workers if Path(f"/proc/{pid}").exists()]


def test_workers_stop_on_ctrl_c_the_moment_they_start(koog_env: dict[str, str]) -> None:
    """Ctrl-C (SIGINT to the whole process group) right after the start line, while the
    supervisor may still be forking: every time, all of it ends within seconds (0, or 130
    when the Ctrl-C came before serving began) and no worker is left."""
    import os
    import signal

    from tests.conftest import KOOG_BIN

    for delay in (0.3, 0.0, 0.0, 0.005, 0.01, 0.02, 0.05):  # the first creates the store
        served = subprocess.Popen(
            [KOOG_BIN, "serve", "--port", "0", "--workers", "2"],
            env=koog_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            text=True,
        )
        assert served.stdout is not None and "koog serve:" in served.stdout.readline()
        time.sleep(delay)
        os.killpg(served.pid, signal.SIGINT)
        try:
            assert served.wait(10) in (0, 130)
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                try:
                    os.killpg(served.pid, 0)  # anyone left in its group?
                except ProcessLookupError:
                    break
                time.sleep(0.05)
            else:
                raise AssertionError("a serve worker outlived its supervisor")
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(served.pid, signal.SIGKILL)
