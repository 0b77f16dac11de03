"""koog against a local server as llama.cpp's behaves (the test server's `llamacpp`
profile, ENDPOINT_QUIRKS.md): a small context that nobody configured, streamed overflow
answered with an empty 200, tool-call fragments repeating their fields, validation errors
as 500s. Every turn of a long session must still complete."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import forked_run_koog
from tests.fakes.openai_server import OVERFLOW_PROFILES, FakeOpenAIServer, text_of

pytestmark = pytest.mark.e2e
# Sessions of dozens of turns: koog processes forked from the zygote (tests/conftest.py).
run_koog = pytest.fixture(name="run_koog")(forked_run_koog)

Run = Callable[..., subprocess.CompletedProcess[str]]
WORDS = [
    "the",
    "harbour",
    "master",
    "counted",
    "boats",
    "along",
    "the",
    "northern",
    "quay",
    "while",
    "gulls",
    "argued",
    "over",
    "nets",
    "and",
    "a",
    "ferry",
    "from",
    "the",
    "islands",
    "waited",
    "for",
    "the",
    "tide",
    "to",
    "turn",
    "before",
    "it",
    "could",
    "dock",
]


def _summaries_short(body: dict[str, Any]) -> dict[str, Any]:
    """A summary request gets a short summary; anything else the echo."""
    messages = body.get("messages", [])
    if any("faithful summaries" in text_of(m.get("content")) for m in messages):
        return {"content": "Summary: the user described the harbour at length."}
    last = next(text_of(m.get("content")) for m in reversed(messages) if m["role"] == "user")
    return {"content": f"echo: {last}"}


def test_a_30_turn_session_on_a_2048_token_server_with_no_context_size_completes(
    backend: str, run_koog: Run, server: FakeOpenAIServer, data_dir: Path
) -> None:
    server.use_profile("llamacpp")
    server.context_limit = 2048
    server.responder = _summaries_short
    for turn in range(30):
        text = f"turn {turn}: " + " ".join(WORDS[(turn + i) % len(WORDS)] for i in range(60))
        done = run_koog("chat", "-s", "harbour", text)
        assert done.returncode == 0, (turn, done.stderr)
        assert done.stdout == f"echo: {text}\n", turn
    learned = json.loads((data_dir / "learned.json").read_text())
    assert list(learned["limits"].values()) == [{"gpt-4o-mini": 2048}]
    history = json.loads(run_koog("history", "show", "-s", "harbour", "--json").stdout)
    assert any(m.get("meta", {}).get("kind") == "summary" for m in history)
    assert history[-1]["content"].startswith("echo: turn 29:")
    # The streamed overflow was an empty 200 each time; the second opinion saw the 400.
    refused = [r for r in server.chat_requests if not r.get("stream")]
    assert refused, "no request was asked again without streaming"


def test_tools_with_tool_choice_on_a_server_that_streams_nothing_for_it(
    run_koog: Run, server: FakeOpenAIServer, isolated: Path, tmp_path: Path
) -> None:
    """llama.cpp calls no tool unless `tool_choice` is sent, and answers a streamed request
    carrying it with an empty 200: `[llm] tool_choice` sends it, and the empty stream's
    second opinion (the same request, not streamed) gets the call; the tool runs once."""
    from tests.conftest import SERVICE_TOOLS

    log = tmp_path / "tool-log.jsonl"
    (tmp_path / "local_tools.py").write_text(SERVICE_TOOLS.format(log=str(log)))
    config = isolated / "tools.toml"
    config.write_text('[llm]\ntool_choice = "auto"\n[[tools]]\ncallable = "local_tools:lookup"\n')
    server.use_profile("llamacpp")
    server.quirks.add("empty_tool_choice")
    server.enqueue(
        {"tool_calls": [{"id": "x", "name": "lookup", "arguments": {"city": "Seville"}}]},
        {"content": "He sailed from Seville."},
    )
    env = {"KOOG_CONFIG": str(config), "PYTHONPATH": str(tmp_path)}
    done = run_koog("chat", "-s", "magellan", "where did Magellan sail from?", env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "He sailed from Seville.\n"
    assert json.loads(log.read_text().splitlines()[0]) == ["lookup", "Seville"]
    assert len(log.read_text().splitlines()) == 1
    asked = [(r.get("stream"), r.get("tool_choice")) for r in server.chat_requests]
    assert asked == [(True, "auto"), (None, "auto"), (True, "auto"), (None, "auto")]


def _summaries_ramble(body: dict[str, Any]) -> dict[str, Any]:
    """A model too small to summarise: every summary runs on to the token limit."""
    messages = body.get("messages", [])
    if any("faithful summaries" in text_of(m.get("content")) for m in messages):
        return {"content": "The user the harbour the boats " * 40, "finish_reason": "length"}
    last = next(text_of(m.get("content")) for m in reversed(messages) if m["role"] == "user")
    return {"content": f"echo: {last}"}


def test_a_model_that_cannot_summarise_still_completes_every_turn_and_keeps_the_history(
    backend: str, run_koog: Run, server: FakeOpenAIServer
) -> None:
    """Each summary is cut off at its limit, so no compression can be made (none is
    stored): each turn sends the newest messages that fit, says so, and the stored
    history keeps every message; `why` names what was left out. The cut is remembered:
    later turns do not spend their time on another summary."""
    server.use_profile("llamacpp")
    server.context_limit = 2048
    server.responder = _summaries_ramble
    warned, skipped_from = 0, 10**6
    for turn in range(24):
        text = f"turn {turn}: " + " ".join(WORDS[(turn + i) % len(WORDS)] for i in range(60))
        done = run_koog("chat", "-s", "small", text)
        assert done.returncode == 0, (turn, done.stderr)
        assert done.stdout == f"echo: {text}\n", turn
        warned += "(what fits the context); the stored history is unchanged" in done.stderr
        if "automatic compression skipped" in done.stderr:
            skipped_from = min(skipped_from, len(server.chat_requests) - 1)
    assert warned >= 10
    assert "automatic compression skipped: gpt-4o-mini cut off its summaries" in done.stderr
    # Asked once and once more, shorter (each chunk); then remembered (learned.json):
    # no later turn spends its time on another summary.
    asked = [
        i
        for i, r in enumerate(server.chat_requests)
        if any("faithful summaries" in text_of(m.get("content")) for m in r["messages"])
    ]
    assert asked and asked[-1] < skipped_from, (asked, skipped_from)
    history = json.loads(run_koog("history", "show", "-s", "small", "--json").stdout)
    assert sum(m["role"] != "system" for m in history) == 48
    assert not any(m.get("meta", {}).get("kind") == "summary" for m in history)
    why = run_koog("why", "-s", "small")
    assert why.returncode == 0, why.stderr
    assert "fitted to the context, no summary removed" in why.stdout, why.stdout
    last = server.chat_requests[-1]["messages"]
    assert text_of(last[-1]["content"]).startswith("turn 23:")
    assert len(last) < 48


def test_a_local_servers_replies_are_capped_unless_configured(
    run_koog: Callable[..., subprocess.CompletedProcess[str]],
    server: FakeOpenAIServer,
    tmp_path: Path,
) -> None:
    """Issue 52: with no cap a small model streamed for minutes, then overflowed; a server
    on this machine gets max_tokens 4,096 unless [llm] max_tokens or --max-tokens says."""
    assert run_koog("chat", "--no-save", "hi").returncode == 0
    assert server.chat_requests[-1]["max_tokens"] == 4096
    assert run_koog("chat", "--no-save", "--max-tokens", "50", "hi").returncode == 0
    assert server.chat_requests[-1]["max_tokens"] == 50
    config = tmp_path / "capped.toml"
    config.write_text('[llm]\nmodel = "test-model"\nmax_tokens = 77\n')
    assert run_koog("chat", "--no-save", "hi", env={"KOOG_CONFIG": str(config)}).returncode == 0
    assert server.chat_requests[-1]["max_tokens"] == 77


@pytest.mark.parametrize("profile", OVERFLOW_PROFILES)
def test_every_local_servers_overflow_is_recovered_and_its_size_learned(
    profile: str, run_koog: Run, server: FakeOpenAIServer, data_dir: Path
) -> None:
    """Issue 52: llama-server's wording was not recognised, so a session outgrowing it was
    stuck for good. Each local server's refusal, as it sends it, is recovered from (the
    history compressed, the turn sent again), and the size it names is learned."""
    server.use_profile(profile)
    server.context_limit = 400
    server.responder = _summaries_short
    for turn in range(8):
        text = f"turn {turn}: " + " ".join(WORDS[(turn + i) % len(WORDS)] for i in range(50))
        done = run_koog("chat", "-s", "over", text)
        assert done.returncode == 0, (profile, turn, done.stderr)
    kept = data_dir / "learned.json"
    learned = json.loads(kept.read_text()).get("limits", {}) if kept.exists() else {}
    named = [v for limits in learned.values() for v in limits.values()]
    assert named == ([] if profile == "ollama" else [400]), (profile, learned)
