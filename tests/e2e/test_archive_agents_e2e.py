"""The archive on the agents' own stores (issue 54): Claude Code, Codex and opencode from
npm, and llm from PyPI, run straight against the test server, write their histories as
they do for people; `koog history import --from` keeps each conversation as one koog
session, once, and then only what is new, also after the source deleted it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import KOOG_BIN
from tests.e2e.test_serve_agents_e2e import AGENTS, PINS, Agent, _run
from tests.e2e.test_serve_clients_e2e import client_python  # noqa: F401 (llm's environment)
from tests.fakes.openai_server import FakeOpenAIServer, text_of
from tests.support import npm
from tests.support.serving import KoogServe

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
Run = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="module")
def agents() -> Path:
    return npm.installed(PINS, "koog-test-agents")


def _direct(server: FakeOpenAIServer) -> str:
    return server.base_url.removesuffix("/v1")


def _homes(tmp_path: Path) -> tuple[Path, Path]:
    """The agent's HOME and its working folder."""
    home, work = tmp_path / "agent-home", tmp_path / "agent-work"
    home.mkdir()
    work.mkdir()
    return home, work


def _session(run_koog: Run, source: str) -> dict[str, Any]:
    listed = json.loads(run_koog("history", "list", "--source", source, "--json").stdout)
    assert len(listed) == 1, listed
    return dict(listed[0])


def _said(run_koog: Run, session: str, role: str = "user") -> list[str]:
    shown = json.loads(run_koog("history", "show", "-s", session, "--json").stdout)
    return [text_of(m.get("content")) for m in shown if m["role"] == role]


def _imported(run_koog: Run, source: str, *paths: Path) -> dict[str, Any]:
    done = run_koog("history", "import", "--from", source, *map(str, paths), "--json")
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def test_claude_code_is_kept_once_grows_and_outlives_its_transcript(
    agents: Path, server: FakeOpenAIServer, run_koog: Run, tmp_path: Path
) -> None:
    agent: Agent = AGENTS["claude-code"]()  # type: ignore[operator]
    home, work = _homes(tmp_path)
    url = _direct(server)
    notes = work / "notes.txt"
    write = {"file_path": str(notes), "content": "the deploy is friday\n"}
    server.enqueue(
        {"tool_calls": [{"id": "toolu_w1", "name": "Write", "arguments": json.dumps(write)}]}
    )
    bin_claude = str(agents / "claude")
    allowed = ["--allowedTools", "Read,Write,Edit", "--output-format", "json"]
    _run(agent, [bin_claude, "-p", "write the deploy notes", *allowed], home, work, url)
    assert notes.read_text() == "the deploy is friday\n"
    _run(
        agent, [bin_claude, "-p", "and the rollback plan", "--continue", *allowed], home, work, url
    )
    store = home / ".claude"

    first = _imported(run_koog, "claude-code", store)
    assert len(first["sessions"]["new"]) == 1 and first["skipped"] == []
    listed = _session(run_koog, "claude-code")
    name = listed["session"]
    assert name.startswith("claude-") and listed["origin"]["cwd"] == str(work)
    prompts = _said(run_koog, name)
    for prompt in ("write the deploy notes", "and the rollback plan"):
        assert prompts.count(prompt) == 1, prompts
    shown = json.loads(run_koog("history", "show", "-s", name, "--json").stdout)
    calls = [c for m in shown for c in m.get("tool_calls") or []]
    assert [c["function"]["name"] for c in calls] == ["Write"]
    results = [m for m in shown if m["role"] == "tool"]
    assert [r["tool_call_id"] for r in results] == [calls[0]["id"]]
    # Thinking and its signature are kept beside the reply, never in the text.
    assert not any("signature" in text_of(m.get("content")) for m in shown)

    again = _imported(run_koog, "claude-code", store)
    assert again["messages"] == 0 and again["files"]["unchanged"] == 1, again

    _run(agent, [bin_claude, "-p", "and who signs off", "--continue", *allowed], home, work, url)
    grown = _imported(run_koog, "claude-code", store)
    assert grown["sessions"] == {"new": [], "grown": [name]}, grown
    assert _said(run_koog, name).count("and who signs off") == 1

    for transcript in (store / "projects").rglob("*.jsonl"):
        transcript.unlink()
    _imported(run_koog, "claude-code", store)
    assert _session(run_koog, "claude-code")["session"] == name
    for prompt in ("write the deploy notes", "rollback plan", "signs off"):
        found = json.loads(run_koog("history", "search", prompt, "--json").stdout)
        assert any(f["session"] == name for f in found), (prompt, found)


@pytest.mark.parametrize("which", ["codex", "opencode-chat"])
def test_codex_and_opencode_conversations_are_one_session_each(
    which: str, agents: Path, server: FakeOpenAIServer, run_koog: Run, tmp_path: Path
) -> None:
    agent: Agent = AGENTS[which]()  # type: ignore[operator]
    home, work = _homes(tmp_path)
    url = _direct(server)
    agent.setup(home, url)  # type: ignore[attr-defined]
    _run(agent, agent.first(agents, home, url), home, work, url)
    _run(agent, agent.again(agents, home, url), home, work, url)
    tool = "codex" if which == "codex" else "opencode"
    store = home / "codex" if tool == "codex" else home / ".local" / "share" / "opencode"
    done = _imported(run_koog, tool, store)
    assert done["skipped"] == [], done
    name = _session(run_koog, tool)["session"]
    assert name.startswith(agent.prefix)
    prompts = " | ".join(_said(run_koog, name))
    for prompt in ("say pong", "run echo about the deploy"):
        assert prompts.count(prompt) == 1, prompts
    assert "environment_context" not in prompts
    assert _imported(run_koog, tool, store)["messages"] == 0


@pytest.mark.timeout(900)  # the clients' environment may be made first
def test_llm_logs_are_one_session(
    client_python: Path,  # noqa: F811 (the fixture imported above)
    server: FakeOpenAIServer,
    run_koog: Run,
    tmp_path: Path,
) -> None:
    user = tmp_path / "llm-user"
    user.mkdir()
    model = [{"model_id": "local", "model_name": "gpt-4o-mini", "api_base": server.base_url}]
    (user / "extra-openai-models.yaml").write_text(json.dumps(model))
    env = {**os.environ, "LLM_USER_PATH": str(user)}
    for argv in (["-m", "local", "name a colour"], ["-c", "and another one"]):
        done = subprocess.run(
            [str(client_python.parent / "llm"), *argv],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
    _imported(run_koog, "llm", user / "logs.db")
    name = _session(run_koog, "llm")["session"]
    assert _said(run_koog, name) == ["name a colour", "and another one"]


def test_a_claude_code_conversation_through_koog_serve_is_not_imported_twice(
    agents: Path, koog_env: dict[str, str], run_koog: Run, tmp_path: Path
) -> None:
    agent: Agent = AGENTS["claude-code"]()  # type: ignore[operator]
    served = KoogServe(koog_env, log=tmp_path / "serve.log").start()
    home, work = _homes(tmp_path)
    try:
        _run(agent, agent.first(agents, home, served.url), home, work, served.url)
        _run(agent, agent.again(agents, home, served.url), home, work, served.url)
    finally:
        assert served.stop() == 0
    [listed] = json.loads(run_koog("history", "list", "--json").stdout)
    before = listed["message_count"]
    done = _imported(run_koog, "claude-code", home / ".claude")
    assert done["sessions"]["new"] == [], done
    [after] = json.loads(run_koog("history", "list", "--json").stdout)
    assert after["session"] == listed["session"] and after["source"] == "claude-code"
    prompts = " | ".join(_said(run_koog, listed["session"]))
    for prompt in ("say pong", "run echo about the deploy"):
        assert prompts.count(prompt) == 1, (prompt, prompts, before, after)


def test_watch_imports_a_new_turn_and_ends_cleanly_on_ctrl_c(
    agents: Path, server: FakeOpenAIServer, koog_env: dict[str, str], run_koog: Run, tmp_path: Path
) -> None:
    agent: Agent = AGENTS["codex"]()  # type: ignore[operator]
    home, work = _homes(tmp_path)
    url = _direct(server)
    agent.setup(home, url)  # type: ignore[attr-defined]
    _run(agent, agent.first(agents, home, url), home, work, url)
    watching = subprocess.Popen(
        [
            KOOG_BIN,
            "history",
            "import",
            "--from",
            "codex",
            str(home / "codex"),
            "--watch",
            "--json",
        ],
        env=koog_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert watching.stdout is not None
        json.loads(watching.stdout.readline())  # the first pass
        _run(agent, agent.again(agents, home, url), home, work, url)
        added = time.monotonic()
        # A pass may meet the rollout mid-write (a torn last line, read again next pass):
        # the turn is in by the first pass that says the session grew with both lines.
        while True:
            line = json.loads(watching.stdout.readline())
            waited = time.monotonic() - added
            assert waited < 15, (waited, line)
            if line["sessions"]["grown"]:
                break
        prompts = " | ".join(_said(run_koog, line["sessions"]["grown"][0]))
        deadline = time.monotonic() + 15
        while "run echo about the deploy" not in prompts and time.monotonic() < deadline:
            time.sleep(0.2)
            prompts = " | ".join(_said(run_koog, line["sessions"]["grown"][0]))
        assert "run echo about the deploy" in prompts, prompts
    finally:
        watching.send_signal(signal.SIGINT)
        _out, err = watching.communicate(timeout=30)
    assert watching.returncode == 0, err
    assert "Traceback" not in err


def _rollout_lines(session: str, prompts: list[str]) -> str:
    """A Codex rollout in Codex's own shape (as the agent's test above writes one)."""
    lines = [
        {
            "timestamp": "2026-12-05T07:44:10.960Z",
            "type": "session_meta",
            "payload": {"id": session, "cwd": "/work/app", "cli_version": "0.171.0"},
        },
    ]
    for n, prompt in enumerate(prompts):
        lines += [
            {
                "timestamp": f"2026-12-05T07:45:{n:02d}.000Z",
                "type": "response_item",
                "payload": {
                    "type": "message",
                    "id": f"msg_u{n}",
                    "role": "user",
                    "content": [{"type": "input_text", "text": prompt}],
                },
            },
            {
                "timestamp": f"2026-12-05T07:45:{n:02d}.500Z",
                "type": "response_item",
                "payload": {
                    "type": "message",
                    "id": f"msg_a{n}",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": f"done: {prompt}"}],
                },
            },
        ]
    return "".join(json.dumps(line) + "\n" for line in lines)


def test_serve_imports_the_configured_sources_as_they_change(
    koog_env: dict[str, str], run_koog: Run, tmp_path: Path
) -> None:
    codex_home = tmp_path / "codex-home"
    rollout = codex_home / "sessions" / "2026" / "12" / "05"
    rollout.mkdir(parents=True)
    session = "01a24529-18ad-7bd2-905b-ed23caeed646"
    path = rollout / f"rollout-2026-12-05T07-44-10-{session}.jsonl"
    path.write_text(_rollout_lines(session, ["first prompt"]))
    config = tmp_path / "serve.toml"
    config.write_text('[archive]\nsources = ["codex"]\ninterval_seconds = 0.5\n')
    env = {**koog_env, "KOOG_CONFIG": str(config), "CODEX_HOME": str(codex_home)}
    served = KoogServe(env, log=tmp_path / "serve.log").start()

    def said() -> list[str]:
        shown = run_koog("history", "show", "-s", f"codex-{session}", "--json", env=env)
        if shown.returncode != 0:
            return []
        return [text_of(m.get("content")) for m in json.loads(shown.stdout) if m["role"] == "user"]

    def waited_for(prompts: list[str]) -> float:
        start = time.monotonic()
        while said() != prompts:
            assert time.monotonic() - start < 15, (said(), (tmp_path / "serve.log").read_text())
            time.sleep(0.2)
        return time.monotonic() - start

    try:
        waited_for(["first prompt"])
        path.write_text(_rollout_lines(session, ["first prompt", "second prompt"]))
        assert waited_for(["first prompt", "second prompt"]) < 15
    finally:
        assert served.stop() == 0
    log = (tmp_path / "serve.log").read_text()
    assert "Traceback" not in log, log


def test_a_claude_code_subagent_is_a_session_beside_its_conversation(
    agents: Path, server: FakeOpenAIServer, run_koog: Run, tmp_path: Path
) -> None:
    agent: Agent = AGENTS["claude-code"]()  # type: ignore[operator]
    home, work = _homes(tmp_path)
    task = {
        "description": "look",
        "prompt": "look around the folder",
        "subagent_type": "general-purpose",
    }
    server.enqueue(
        {"tool_calls": [{"id": "toolu_t1", "name": "Task", "arguments": json.dumps(task)}]}
    )
    command = [str(agents / "claude"), "-p", "delegate a look", "--allowedTools", "Task"]
    _run(agent, [*command, "--output-format", "json"], home, work, _direct(server))
    done = _imported(run_koog, "claude-code", home / ".claude")
    assert done["skipped"] == [] and len(done["sessions"]["new"]) == 2, done
    main, sub = sorted(done["sessions"]["new"])
    assert sub.startswith(main + "~agent-")
    assert _said(run_koog, main) == ["delegate a look"]
    assert _said(run_koog, sub) == ["look around the folder"]
