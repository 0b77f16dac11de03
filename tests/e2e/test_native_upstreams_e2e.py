"""`koog chat` speaking Anthropic Messages and the Responses API natively (issue 43,
acceptance 1): five turns with reasoning on, streamed and not, against the test server
that refuses a replayed thinking block or reasoning item that was altered or moved."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import forked_run_koog
from tests.fakes.openai_server import FakeOpenAIServer

pytestmark = pytest.mark.e2e

run_koog = pytest.fixture(name="run_koog")(forked_run_koog)

Run = Callable[..., subprocess.CompletedProcess[str]]


def _config(tmp_path: Path, server: FakeOpenAIServer, wire: str, stream: bool) -> dict[str, str]:
    path = tmp_path / "native.toml"
    path.write_text(
        f'[llm]\nmodel = "native-model"\nbase_url = "{server.base_url}"\nwire_api = "{wire}"\n'
        f'reasoning_effort = "low"\n[chat]\nstream = {str(stream).lower()}\n'
    )
    return {"KOOG_CONFIG": str(path), "ANTHROPIC_API_KEY": "anthropic-key", "KOOG_MODEL": ""}


def _five_turns(run_koog: Run, env: dict[str, str]) -> None:
    for n in range(1, 6):
        done = run_koog("chat", "-s", "native", f"question {n} about ships", env=env)
        assert done.returncode == 0, done.stderr
        assert done.stdout == f"echo: question {n} about ships\n"


@pytest.mark.parametrize("stream", [True, False])
def test_five_messages_turns_send_thinking_back_and_read_the_cache(
    run_koog: Run, server: FakeOpenAIServer, tmp_path: Path, stream: bool
) -> None:
    _five_turns(run_koog, _config(tmp_path, server, "messages", stream))
    sent = [r for r in server.requests if r.get("_path", "").endswith("/v1/messages")]
    assert len(sent) == 5 and all(r.get("rejected") is None for r in server.native_log)
    assert all(r["thinking"]["type"] == "enabled" for r in sent)
    assert all(r["_headers"]["x-api-key"] == "anthropic-key" for r in sent)
    for n, request in enumerate(sent):
        replayed = [
            b
            for m in request["messages"]
            if m["role"] == "assistant"
            for b in m["content"]
            if b["type"] == "thinking"
        ]
        assert len(replayed) == n and all(b["signature"] for b in replayed)
    reads = [e["cache_read"] for e in server.native_log]
    assert reads[0] == 0 and all(r > 0 for r in reads[1:])
    why = run_koog("why", "-s", "native", env=_config(tmp_path, server, "messages", stream))
    assert f"prompt cache: {reads[-1]:,} of" in why.stdout
    shown = json.loads(run_koog("history", "show", "-s", "native", "--json").stdout)
    assert all("signature" not in m["content"] for m in shown)


@pytest.mark.parametrize("stream", [True, False])
def test_five_responses_turns_replay_reasoning_unchanged(
    run_koog: Run, server: FakeOpenAIServer, tmp_path: Path, stream: bool
) -> None:
    env = _config(tmp_path, server, "responses", stream)
    env["OPENAI_API_KEY"] = "openai-key"
    _five_turns(run_koog, env)
    sent = [r for r in server.requests if r.get("_path", "").endswith("/v1/responses")]
    assert len(sent) == 5 and not [e for e in server.native_log if "rejected" in e]
    assert all(r["store"] is False and r["reasoning"]["effort"] == "low" for r in sent)
    assert all(r["_headers"]["authorization"] == "Bearer openai-key" for r in sent)
    first = [i for i in sent[1]["input"] if i["type"] == "reasoning"]
    assert len(first) == 1 and first[0]["encrypted_content"]
    last = [i for i in sent[-1]["input"] if i["type"] == "reasoning"]
    assert len(last) == 4 and last[0] == first[0]  # byte for byte, turn after turn
    assert all(e["cache_read"] > 0 for e in server.native_log[1:])


def test_a_messages_upstream_without_a_key_says_which_variable(
    run_koog: Run, server: FakeOpenAIServer, tmp_path: Path
) -> None:
    path = tmp_path / "keyless.toml"
    path.write_text('[llm]\nmodel = "claude-x"\nwire_api = "messages"\n')
    done = run_koog(
        "chat",
        "hello",
        env={"KOOG_CONFIG": str(path), "ANTHROPIC_API_KEY": "", "OPENAI_BASE_URL": ""},
    )
    assert done.returncode != 0 and "ANTHROPIC_API_KEY" in done.stderr
    assert "Traceback" not in done.stderr
    path.write_text('[llm]\nwire_api = "grpc"\n')
    bad = run_koog("chat", "hello", env={"KOOG_CONFIG": str(path)})
    assert bad.returncode == 2 and "wire_api" in bad.stderr
