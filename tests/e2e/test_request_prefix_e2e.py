"""What koog sends only grows (SPEC §5 4a): the real `koog` (one-shots and `koog serve`
behind the openai SDK) with retrieval on or a window configured, its upstream the local
test server; every assertion is on the requests the server received."""

from __future__ import annotations

import itertools
import json
import statistics
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.openai_server import FakeOpenAIServer
from tests.support.harbour import FACTS, QUESTIONS
from tests.support.serving import KoogServe

pytestmark = pytest.mark.e2e

Run = Callable[..., subprocess.CompletedProcess[str]]


def wire(body: dict[str, Any]) -> list[str]:
    return [json.dumps(m, sort_keys=True) for m in body["messages"]]


def shared_start(request: Sequence[str], previous: Sequence[str]) -> float:
    """The share of the previous request, in characters, that this one starts with."""
    total = sum(map(len, previous)) or 1
    kept = 0
    for now, before in zip(request, previous, strict=False):
        if now != before:
            break
        kept += len(before)
    return kept / total


def chats(server: FakeOpenAIServer) -> list[dict[str, Any]]:
    return [r for r in server.requests if r.get("_path", "").endswith("/chat/completions")]


def memory_config(path: Path, extra: str = "") -> Path:
    path.write_text(f"[long_term_memory.retrieval]\nenabled = true\n{extra}")
    return path


def test_one_shots_with_retrieval_each_start_with_the_previous_request(
    run_koog: Run, server: FakeOpenAIServer, isolated: Path
) -> None:
    env = {"KOOG_CONFIG": str(memory_config(isolated / "memory.toml"))}
    for fact in FACTS:
        assert run_koog("memory", "add", fact, env=env).returncode == 0
    server.responder = lambda body: {"content": "Noted."}
    for turn in range(12):
        done = run_koog("chat", "-s", "harbour", QUESTIONS[turn % 4], env=env)
        assert done.returncode == 0, done.stderr
    bodies = chats(server)
    assert len(bodies) == 12
    shares = [shared_start(wire(b), wire(a)) for a, b in itertools.pairwise(bodies)]
    assert statistics.median(shares) >= 0.9 and min(shares) >= 0.75, shares
    assert shares == [1.0] * 11  # in fact: every request starts with the whole previous one
    for turn, body in enumerate(bodies):
        assert FACTS[turn % 4] in body["messages"][-1]["content"]  # the records reach the model
        assert body["messages"][0] == {"role": "system", "content": "You are a helpful assistant."}


def window_config(path: Path, size: int = 8, extra: str = "") -> Path:
    path.write_text(f'[[chat_memory.preprocessors]]\ntype = "window"\nsize = {size}\n{extra}')
    return path


def _sdk_conversation(
    started: KoogServe,
    turns: int,
    system: str = "Answer like a harbour master.",
    session: str | None = "agent",
) -> None:
    client = started.client(default_headers={"X-Koog-Session": session} if session else None)
    convo: list[dict[str, Any]] = [{"role": "system", "content": system}]
    for turn in range(turns):
        convo.append({"role": "user", "content": f"{QUESTIONS[turn % 4]} (turn {turn + 1})"})
        reply = client.chat.completions.create(model="gpt-4o-mini", messages=convo)  # type: ignore[arg-type]
        convo.append({"role": "assistant", "content": reply.choices[0].message.content})


def _sessions(run_koog: Run, env: dict[str, str]) -> list[str]:
    done = run_koog("history", "list", "--json", env=env)
    assert done.returncode == 0, done.stderr
    return sorted(s["session"] for s in json.loads(done.stdout))


def test_serve_with_a_window_stores_one_session_and_sends_the_window_in_steps(
    koog_env: dict[str, str], server: FakeOpenAIServer, isolated: Path, run_koog: Run
) -> None:
    env = {"KOOG_CONFIG": str(window_config(isolated / "window.toml"))}
    server.responder = lambda body: {"content": "Aye."}
    started = KoogServe({**koog_env, **env}).start()
    try:
        _sdk_conversation(started, 16)
    finally:
        assert started.stop() == 0
    assert _sessions(run_koog, env) == ["agent"]  # one conversation, one session, no forks
    shown = run_koog("history", "show", "-s", "agent", "--json", env=env)
    stored = [m for m in json.loads(shown.stdout) if m["role"] != "system"]
    assert len(stored) == 32  # stored whole: the window shapes only what goes upstream
    bodies = chats(server)
    assert len(bodies) == 16
    for body in bodies:
        said = body["messages"]
        assert said[0] == {"role": "system", "content": "Answer like a harbour master."}
        assert len(said) - 2 <= 8  # besides the system prompt and the new question
    # From the first cut on (the window holds the stored system message too, as Koog's):
    sizes = [len(b["messages"]) for b in bodies]
    filled = next(i for i in range(1, len(sizes)) if sizes[i] < sizes[i - 1])
    kept = [
        shared_start(wire(b), wire(a)) == 1.0
        for a, b in zip(bodies[filled - 1 :], bodies[filled:], strict=False)
    ]
    assert sum(kept) / len(kept) >= 0.6, kept


def test_serve_with_retrieval_keeps_the_prefix_and_the_clients_system_message(
    koog_env: dict[str, str], server: FakeOpenAIServer, isolated: Path, run_koog: Run
) -> None:
    env = {"KOOG_CONFIG": str(memory_config(isolated / "memory.toml"))}
    for fact in FACTS:
        assert run_koog("memory", "add", fact, env=env).returncode == 0
    server.responder = lambda body: {"content": "Aye."}
    started = KoogServe({**koog_env, **env}).start()
    try:
        _sdk_conversation(started, 12)
    finally:
        assert started.stop() == 0
    assert _sessions(run_koog, env) == ["agent"]
    bodies = chats(server)
    shares = [shared_start(wire(b), wire(a)) for a, b in itertools.pairwise(bodies)]
    assert statistics.median(shares) >= 0.9 and min(shares) >= 0.75, shares
    for turn, body in enumerate(bodies):
        said = body["messages"]
        assert said[0] == {"role": "system", "content": "Answer like a harbour master."}
        assert FACTS[turn % 4] in said[-1]["content"]


def test_a_plain_sdk_client_naming_no_session_keeps_its_prefix_with_retrieval(
    koog_env: dict[str, str], server: FakeOpenAIServer, isolated: Path, run_koog: Run
) -> None:
    """Issue 53: nothing is stored, yet each request starts with the previous one byte for
    byte: the records placed after a question come back with it (remembered by digest)."""
    env = {"KOOG_CONFIG": str(memory_config(isolated / "memory.toml"))}
    for fact in FACTS:
        assert run_koog("memory", "add", fact, env=env).returncode == 0
    server.responder = lambda body: {"content": "Aye."}
    started = KoogServe({**koog_env, **env}).start()
    try:
        _sdk_conversation(started, 10, session=None)
    finally:
        assert started.stop() == 0
    assert _sessions(run_koog, env) == []
    bodies = chats(server)
    assert len(bodies) == 10
    kept = [shared_start(wire(b), wire(a)) == 1.0 for a, b in itertools.pairwise(bodies)]
    assert sum(kept) >= 8, kept
    for turn, body in enumerate(bodies):  # the records reach the model
        assert FACTS[turn % 4] in body["messages"][-1]["content"]


def test_why_names_every_record_the_request_carried_with_a_window(
    run_koog: Run, server: FakeOpenAIServer, isolated: Path
) -> None:
    """Issue 53: `why --json` names the records re-sent after earlier questions as well as
    this question's, each with its text and question; the set equals what the upstream got."""
    env = {"KOOG_CONFIG": str(memory_config(isolated / "both.toml", _WINDOW_OF_6))}
    for fact in FACTS:
        assert run_koog("memory", "add", fact, env=env).returncode == 0
    listed = json.loads(run_koog("memory", "list", "--json", env=env).stdout)
    text_of = {r["id"]: r["content"] for r in listed}
    server.responder = lambda body: {"content": "Noted."}
    for turn in range(7):
        done = run_koog("chat", "-s", "harbour", QUESTIONS[turn % 4], env=env)
        assert done.returncode == 0, done.stderr
        body = json.dumps(chats(server)[-1]["messages"])
        carried = {i for i, text in text_of.items() if json.dumps(text)[1:-1] in body}
        shown = run_koog("why", "-s", "harbour", "--json", env=env)
        sent = json.loads(shown.stdout)["memory"]["sent"]
        assert {r["id"] for r in sent} == carried and len(carried) >= min(turn + 1, 2)
        for r in sent:
            assert r["text"] == text_of[r["id"]] and r["question_text"] in QUESTIONS
    words = run_koog("why", "-s", "harbour", env=env).stdout
    assert all(text_of[r["id"]][:30] in words for r in sent)


_WINDOW_OF_6 = '[[chat_memory.preprocessors]]\ntype = "window"\nsize = 6\n'
