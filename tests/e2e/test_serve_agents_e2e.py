"""The coding agents people use most, for real, in front of `koog serve` (issue 32,
shared/AGENT_CLIENTS.md): OpenAI Codex CLI (Responses API), Claude Code (Anthropic
Messages) and opencode (chat completions, and Responses), installed from npm at pinned
versions, run headless with HOME in a temp folder and the test server as the upstream.

Each agent has one plain turn, then a memory record is added with `koog memory add`, then
a continued turn (`resume --last`, `--continue`) with one tool round trip that the agent
itself runs. Its conversation must be one koog session holding its user turns and the
tool exchange; the record must reach the upstream and be named in X-Koog-Memory-Used;
`koog why` explains the turn and `koog chat -s` continues it from the terminal."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.openai_server import FakeOpenAIServer, text_of
from tests.support import npm, readme_agents
from tests.support.relay import relaying
from tests.support.serving import KoogServe

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
Run = Callable[..., subprocess.CompletedProcess[str]]

PINS = ("@openai/codex@0.171.0", "@anthropic-ai/claude-code@2.1.197", "opencode-ai@1.18.33")
HOME = npm.HOME
AGENT_TIMEOUT = 120
SECRET = "the deploy key is swordfish-42"
TOOL_OUTPUT = "koog-tool-ran"


@pytest.fixture(scope="session")
def agents() -> Path:
    """The folder whose `node_modules/.bin` holds codex, claude and opencode."""
    return npm.installed(PINS, "koog-test-agents")


@dataclass
class Agent:
    """How to run one agent: its two turns, and the name of its shell tool."""

    name: str
    prefix: str
    tool: str  # the agent's own tool the upstream calls
    arguments: dict[str, Any]

    def first(self, bin_dir: Path, home: Path, url: str) -> list[str]:
        raise NotImplementedError

    def again(self, bin_dir: Path, home: Path, url: str) -> list[str]:
        raise NotImplementedError

    def env(self, home: Path, url: str) -> dict[str, str]:
        return {}


class Codex(Agent):
    def __init__(self) -> None:
        super().__init__("codex", "codex-", "exec_command", {"cmd": f"echo {TOOL_OUTPUT}"})

    def setup(self, home: Path, url: str) -> None:
        """The README's block as pasted (its web_search tool offered: koog leaves it out
        of what it sends upstream), and what an offline machine needs besides."""
        (home / "codex").mkdir(parents=True)
        (home / "codex" / "config.toml").write_text(
            "check_for_update_on_startup = false\n"
            + readme_agents.codex_config(url)
            + "[analytics]\nenabled = false\n"
            "[features]\nplugins = false\nremote_plugin = false\napps = false\n"
        )

    def env(self, home: Path, url: str) -> dict[str, str]:
        return {"CODEX_HOME": str(home / "codex"), "KOOG_KEY": "sk-test"}

    def first(self, bin_dir: Path, home: Path, url: str) -> list[str]:
        return [str(bin_dir / "codex"), "exec", "--skip-git-repo-check", "say pong"]

    def again(self, bin_dir: Path, home: Path, url: str) -> list[str]:
        return [
            str(bin_dir / "codex"), "exec", "--skip-git-repo-check", "resume", "--last",
            "run echo about the deploy",
        ]  # fmt: skip


class ClaudeCode(Agent):
    def __init__(self) -> None:
        super().__init__(
            "claude", "claude-", "Bash", {"command": f"echo {TOOL_OUTPUT}", "description": "echo"}
        )

    def setup(self, home: Path, url: str) -> None:
        return

    def env(self, home: Path, url: str) -> dict[str, str]:
        return {
            **readme_agents.claude_env(url),  # the README's line
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1",
        }

    def first(self, bin_dir: Path, home: Path, url: str) -> list[str]:
        return [str(bin_dir / "claude"), "-p", "say pong", "--output-format", "json"]

    def again(self, bin_dir: Path, home: Path, url: str) -> list[str]:
        return [
            str(bin_dir / "claude"), "-p", "run echo about the deploy", "--continue",
            "--allowedTools", "Bash(echo:*)", "--output-format", "json",
        ]  # fmt: skip


class Opencode(Agent):
    def __init__(self, package: str) -> None:
        super().__init__(
            "opencode",
            "opencode-",
            "bash",
            {"command": f"echo {TOOL_OUTPUT}", "description": "echo"},
        )
        self.package = package

    def setup(self, home: Path, url: str) -> None:
        """The README's opencode.json (its `npm` package as this variant names it, as the
        README says to choose), and what an offline machine needs besides."""
        folder = home / ".config" / "opencode"
        folder.mkdir(parents=True)
        config = readme_agents.opencode_config(url)
        config["provider"]["koog"]["npm"] = self.package
        extra = {"autoupdate": False, "share": "disabled", "small_model": config["model"]}
        (folder / "opencode.json").write_text(json.dumps({**config, **extra}))

    def env(self, home: Path, url: str) -> dict[str, str]:
        off = ("MODELS_FETCH", "AUTOUPDATE", "LSP_DOWNLOAD", "SHARE", "DEFAULT_PLUGINS")
        return {
            **{f"OPENCODE_DISABLE_{name}": "1" for name in off},
            "OPENCODE_PURE": "1",
            "npm_config_registry": "http://127.0.0.1:9/",
        }

    def first(self, bin_dir: Path, home: Path, url: str) -> list[str]:
        return [str(bin_dir / "opencode"), "run", "say pong"]

    def again(self, bin_dir: Path, home: Path, url: str) -> list[str]:
        return [str(bin_dir / "opencode"), "run", "--continue", "run echo about the deploy"]


AGENTS = {
    "codex": Codex,
    "claude-code": ClaudeCode,
    "opencode-chat": lambda: Opencode("@ai-sdk/openai-compatible"),
    "opencode-responses": lambda: Opencode("@ai-sdk/openai"),
}


def _started(env: dict[str, str], tmp_path: Path) -> tuple[KoogServe, Path, Path]:
    """A koog serve for the agent (its log in serve.log), the agent's home and work folder."""
    served = KoogServe(env, log=tmp_path / "serve.log").start()
    home, work = tmp_path / "agent-home", tmp_path / "agent-work"
    home.mkdir()
    work.mkdir()
    return served, home, work


def _run(agent: Agent, command: list[str], home: Path, work: Path, url: str) -> str:
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "TMPDIR": str(home),
        "LANG": "C.UTF-8",
        **agent.env(home, url),
    }
    done = subprocess.run(
        command,
        cwd=work,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=AGENT_TIMEOUT,
    )
    assert done.returncode == 0, (command, done.stdout[-2000:], done.stderr[-3000:])
    return done.stdout


def _config(tmp_path: Path) -> Path:
    config = tmp_path / "serve.toml"
    config.write_text('[long_term_memory.retrieval]\nenabled = true\nmode = "fulltext"\n')
    return config


# Each agent on one backend, the backends alternating: what is stored is the serve tests'
# on both backends; here each agent's wire and placement, once (an agent run is ~15 s).
ON_BACKENDS = [(name, ("postgresql", "files")[i % 2]) for i, name in enumerate(AGENTS)]


@pytest.mark.parametrize(("which", "backend"), ON_BACKENDS, indirect=["backend"])
def test_a_coding_agents_conversation_is_one_koog_session_with_memory(
    which: str,
    backend: str,
    agents: Path,
    koog_env: dict[str, str],
    server: FakeOpenAIServer,
    run_koog: Run,
    tmp_path: Path,
) -> None:
    agent: Agent = AGENTS[which]()  # type: ignore[operator]
    env = {**koog_env, "KOOG_CONFIG": str(_config(tmp_path))}
    served, home, work = _started(env, tmp_path)
    try:
        with relaying(served.url) as (url, seen):
            agent.setup(home, url)  # type: ignore[attr-defined]
            _run(agent, agent.first(agents, home, url), home, work, url)
            added = run_koog("memory", "add", SECRET, "--json", env=env)
            assert added.returncode == 0, added.stderr
            record = json.loads(added.stdout)["id"]
            server.enqueue(
                {
                    "tool_calls": [
                        {
                            "id": "call_t1",
                            "name": agent.tool,
                            "arguments": json.dumps(agent.arguments),
                        }
                    ]
                }
            )
            _run(agent, agent.again(agents, home, url), home, work, url)
    finally:
        assert served.stop() == 0
    turns = [
        r
        for r in seen
        if r["path"].split("?")[0].endswith(("/responses", "/messages", "/completions"))
    ]
    listed = [s["session"] for s in json.loads(run_koog("history", "list", "--json").stdout)]
    assert len(listed) == 1 and listed[0].startswith(agent.prefix), (listed, seen)
    [session] = listed
    assert {r["answered"] for r in turns if r["answered"]} == {session}
    history = json.loads(run_koog("history", "show", "-s", session, "--json").stdout)
    said = [text_of(m.get("content")) for m in history if m["role"] == "user"]
    for prompt in ("say pong", "run echo about the deploy"):
        assert sum(prompt in text for text in said) == 1, (prompt, said)
    calls = [c for m in history for c in m.get("tool_calls") or []]
    assert [c["function"]["name"] for c in calls] == [agent.tool]
    results = [text_of(m.get("content")) for m in history if m["role"] == "tool"]
    assert len(results) == 1 and TOOL_OUTPUT in results[0], results
    assert history[-1]["role"] == "assistant"
    # Memory: the record reached the upstream with the continued turn, and koog said so.
    assert any(SECRET in json.dumps(r["messages"]) for r in server.chat_requests)
    assert any(record in (r["memory"] or "") for r in turns)
    why = run_koog("why", "-s", session)
    assert why.returncode == 0 and record[:8] in why.stdout, why.stdout
    # The terminal continues it.
    chat = run_koog("chat", "-s", session, "from the terminal")
    assert chat.returncode == 0 and chat.stdout == "echo: from the terminal\n", chat.stderr
    if which == "codex":  # the README's config offers web_search: answered, left out
        assert "left-out=web_search" in (tmp_path / "serve.log").read_text()


NATIVE = [("claude-code", "messages"), ("codex", "responses")]


@pytest.mark.parametrize(("which", "wire"), NATIVE)
def test_an_agent_on_its_own_providers_protocol_passes_through_to_one_session(
    which: str,
    wire: str,
    agents: Path,
    koog_env: dict[str, str],
    server: FakeOpenAIServer,
    run_koog: Run,
    tmp_path: Path,
) -> None:
    """Claude Code to a Messages upstream, Codex to a Responses one (SPEC §6): the agent's
    requests go upstream as they came, with the memory record appended; one session holds
    the conversation and the tool call; the terminal continues it over the same protocol."""
    agent: Agent = AGENTS[which]()  # type: ignore[operator]
    config = tmp_path / "native.toml"
    config.write_text(
        f'[llm]\nmodel = "upstream-model"\nwire_api = "{wire}"\n'
        '[long_term_memory.retrieval]\nenabled = true\nmode = "fulltext"\n'
    )
    env = {**koog_env, "KOOG_CONFIG": str(config), "ANTHROPIC_API_KEY": "sk-up", "KOOG_MODEL": ""}
    served, home, work = _started(env, tmp_path)
    try:
        agent.setup(home, served.url)  # type: ignore[attr-defined]
        _run(agent, agent.first(agents, home, served.url), home, work, served.url)
        added = run_koog("memory", "add", SECRET, "--json", env=env)
        assert added.returncode == 0, added.stderr
        call = {"id": "call_t1", "name": agent.tool, "arguments": json.dumps(agent.arguments)}
        server.enqueue({"tool_calls": [call]})
        _run(agent, agent.again(agents, home, served.url), home, work, served.url)
    finally:
        assert served.stop() == 0
    upstream = [r for r in server.requests if r.get("_path", "").endswith(f"/v1/{wire}")]
    assert upstream and not server.chat_requests
    assert not [e for e in server.native_log if "rejected" in e]
    assert any(SECRET in json.dumps(r) for r in upstream)  # the record went with a question
    listed = [
        s["session"] for s in json.loads(run_koog("history", "list", "--json", env=env).stdout)
    ]
    assert len(listed) == 1 and listed[0].startswith(agent.prefix), listed
    [session] = listed
    history = json.loads(run_koog("history", "show", "-s", session, "--json", env=env).stdout)
    said = [text_of(m.get("content")) for m in history if m["role"] == "user"]
    for prompt in ("say pong", "run echo about the deploy"):
        assert sum(prompt in text for text in said) == 1, (prompt, said)
    calls = [c for m in history for c in m.get("tool_calls") or []]
    assert [c["function"]["name"] for c in calls] == [agent.tool]
    results = [text_of(m.get("content")) for m in history if m["role"] == "tool"]
    assert len(results) == 1 and TOOL_OUTPUT in results[0], results
    chat = run_koog("chat", "-s", session, "from the terminal", env=env)
    assert chat.returncode == 0 and chat.stdout == "echo: from the terminal\n", chat.stderr
    assert server.requests[-1]["_path"].endswith(f"/v1/{wire}")


def test_claude_code_compacting_stays_one_session(
    agents: Path,
    koog_env: dict[str, str],
    server: FakeOpenAIServer,
    run_koog: Run,
    tmp_path: Path,
) -> None:
    """Claude Code made to compact (a 100,000-token window compacted at 20%, long prompts):
    each compaction request is answered and not stored, the conversation after it is a
    compaction of the same session; four turns, one session (issue 44, acceptance 3)."""
    agent = ClaudeCode()
    server.responder = lambda body: {"content": "Done. " + "noted " * 40}
    served, home, work = _started(koog_env, tmp_path)
    compacting = {
        "CLAUDE_CODE_AUTO_COMPACT_WINDOW": "100000",
        "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "20",
    }
    original_env = agent.env
    agent.env = lambda home, url: {**original_env(home, url), **compacting}  # type: ignore[method-assign]
    try:
        for turn in range(1, 5):
            prompt = f"turn {turn}: tell me about harbours " + "and ships " * 3000
            command = [str(agents / "claude"), "-p", prompt, "--output-format", "json"]
            if turn > 1:
                command.insert(3, "--continue")
            _run(agent, command, home, work, served.url)
    finally:
        assert served.stop() == 0
    log = (tmp_path / "serve.log").read_text()
    assert "compacted claude-" in log, log[-2000:]
    listed = [s["session"] for s in json.loads(run_koog("history", "list", "--json").stdout)]
    assert len(listed) == 1 and listed[0].startswith("claude-"), listed
    shown = run_koog("history", "show", "-s", listed[0], "--json").stdout
    assert "Respond with TEXT ONLY" not in shown and "turn 4: tell me" in shown


def test_codex_compacting_stays_one_session_with_each_prompt_once(
    agents: Path,
    koog_env: dict[str, str],
    server: FakeOpenAIServer,
    run_koog: Run,
    tmp_path: Path,
) -> None:
    """Codex with a custom provider and `model_auto_compact_token_limit = 3000`: four turns,
    a tool call in the second; each compaction request answered and not stored, each
    continuation a compaction of the one session; every prompt found once, the tool's
    output stored, and one rollback brings back the turns the last compaction replaced
    (issue 44, acceptance 1)."""

    def answer(body: dict[str, Any]) -> dict[str, Any]:
        last = json.dumps(body["messages"][-1])
        if body.get("tools") and "turn 2:" in last:
            arguments = json.dumps({"cmd": f"echo {TOOL_OUTPUT}"})
            return {
                "tool_calls": [{"id": "call_c", "name": "exec_command", "arguments": arguments}]
            }
        return {"content": "Done. " + "noted " * 60}

    server.responder = answer
    agent = Codex()
    served, home, work = _started(koog_env, tmp_path)
    try:
        agent.setup(home, served.url)
        config = home / "codex" / "config.toml"
        config.write_text("model_auto_compact_token_limit = 3000\n" + config.read_text())
        bin_codex = str(agents / "codex")
        for turn in range(1, 5):
            prompt = f"turn {turn}: tell me about harbours " + "and ships " * 200
            resume = ["resume", "--last"] if turn > 1 else []
            command = [bin_codex, "exec", "--skip-git-repo-check", *resume, prompt]
            _run(agent, command, home, work, served.url)
    finally:
        assert served.stop() == 0
    log = (tmp_path / "serve.log").read_text()
    assert "compacted codex-" in log, log[-2000:]
    listed = [s["session"] for s in json.loads(run_koog("history", "list", "--json").stdout)]
    assert len(listed) == 1 and listed[0].startswith("codex-"), listed
    [session] = listed
    for turn in range(1, 5):
        found = json.loads(run_koog("history", "search", f"turn {turn}: tell", "--json").stdout)
        assert len([h for h in found if h["role"] == "user"]) == 1, (turn, found)
    tool = json.loads(run_koog("history", "search", TOOL_OUTPUT, "--json").stdout)
    assert [h["role"] for h in tool if h["role"] == "tool"], tool
    before = run_koog("history", "show", "-s", session, "--json").stdout
    assert run_koog("rollback", "-s", session, "--latest", "--yes").returncode == 0
    after = run_koog("history", "show", "-s", session, "--json").stdout
    assert "turn 4: tell" in before and "turn 4: tell" not in after and "turn 3: tell" in after


def test_opencode_compacting_stays_one_session(
    agents: Path,
    koog_env: dict[str, str],
    server: FakeOpenAIServer,
    run_koog: Run,
    tmp_path: Path,
) -> None:
    """opencode with a model's `limit.context` of 8000: four long turns; its summary
    request is answered and not stored, the continuation compacts the one session (issue
    44, acceptance 4)."""
    server.responder = lambda body: {"content": "Done. " + "noted " * 60}
    agent = Opencode("@ai-sdk/openai-compatible")
    served, home, work = _started(koog_env, tmp_path)
    try:
        agent.setup(home, served.url)
        config = home / ".config" / "opencode" / "opencode.json"
        settings = json.loads(config.read_text())
        [model] = settings["provider"]["koog"]["models"].values()
        model["limit"] = {"context": 8000, "output": 1000}
        config.write_text(json.dumps(settings))
        for turn in range(1, 5):
            prompt = f"turn {turn}: tell me about harbours " + "and ships " * 700
            again = ["--continue"] if turn > 1 else []
            _run(agent, [str(agents / "opencode"), "run", *again, prompt], home, work, served.url)
    finally:
        assert served.stop() == 0
    log = (tmp_path / "serve.log").read_text()
    assert "compacted opencode-" in log, log[-3000:]
    listed = [s["session"] for s in json.loads(run_koog("history", "list", "--json").stdout)]
    assert len(listed) == 1 and listed[0].startswith("opencode-"), listed


def test_codex_on_its_built_in_provider_compacts_remotely_through_koog(
    agents: Path,
    koog_env: dict[str, str],
    server: FakeOpenAIServer,
    run_koog: Run,
    tmp_path: Path,
) -> None:
    """Codex's built-in provider aimed at koog (`openai_base_url`), compacting at 3000
    tokens: its WebSocket probe gets one 426 a run, its `compaction_trigger` koog's
    summary; three turns, each exit 0, one session (issue 44, acceptance 2)."""
    server.responder = lambda body: {"content": "Done. " + "noted " * 60}
    agent = Codex()
    served = KoogServe(koog_env, log=tmp_path / "serve.log").start()
    home, work = tmp_path / "agent-home", tmp_path / "agent-work"
    (home / "codex").mkdir(parents=True)
    work.mkdir()
    (home / "codex" / "config.toml").write_text(
        f'model = "gpt-5-codex"\nopenai_base_url = "{served.url}"\n'
        "model_auto_compact_token_limit = 3000\ncheck_for_update_on_startup = false\n"
        'web_search = "disabled"\n[analytics]\nenabled = false\n'
        "[features]\nplugins = false\nremote_plugin = false\napps = false\n"
    )
    original_env = agent.env
    agent.env = lambda home, url: {**original_env(home, url), "CODEX_API_KEY": "sk-test"}  # type: ignore[method-assign]
    try:
        for turn in range(1, 4):
            prompt = f"turn {turn}: tell me about harbours " + "and ships " * 200
            resume = ["resume", "--last"] if turn > 1 else []
            command = [str(agents / "codex"), "exec", "--skip-git-repo-check", *resume, prompt]
            _run(agent, command, home, work, served.url)  # exit 0, or it fails here
    finally:
        assert served.stop() == 0
    log = (tmp_path / "serve.log").read_text()
    assert log.count("GET /v1/responses 426") <= 3, log
    assert "compaction summary" in log and "compacted codex-" in log, log[-2000:]
    assert "Unsupported upgrade request" not in log
    listed = [s["session"] for s in json.loads(run_koog("history", "list", "--json").stdout)]
    assert len(listed) == 1 and listed[0].startswith("codex-"), listed


def test_claude_codes_read_then_edit_turn_and_the_next_stay_one_session(
    agents: Path,
    koog_env: dict[str, str],
    server: FakeOpenAIServer,
    run_koog: Run,
    tmp_path: Path,
) -> None:
    """A turn with two tool calls, Read then Edit, and the turn after it: one session,
    the file edited (issue 44, acceptance 3)."""
    agent = ClaudeCode()
    served, home, work = _started(koog_env, tmp_path)
    notes = work / "notes.txt"
    notes.write_text("the ferry leaves at nine\n")
    read = {"file_path": str(notes)}
    edit = {"file_path": str(notes), "old_string": "nine", "new_string": "ten"}
    server.enqueue(
        {"tool_calls": [{"id": "toolu_r", "name": "Read", "arguments": json.dumps(read)}]},
        {"tool_calls": [{"id": "toolu_e", "name": "Edit", "arguments": json.dumps(edit)}]},
        {"content": "Changed it to ten."},
    )
    allowed = ["--allowedTools", "Read,Write,Edit", "--output-format", "json"]
    try:
        bin_claude = str(agents / "claude")
        _run(
            agent,
            [bin_claude, "-p", "make the ferry leave at ten", *allowed],
            home,
            work,
            served.url,
        )
        assert notes.read_text() == "the ferry leaves at ten\n"
        _run(agent, [bin_claude, "-p", "thanks", "--continue", *allowed], home, work, served.url)
    finally:
        assert served.stop() == 0
    listed = [s["session"] for s in json.loads(run_koog("history", "list", "--json").stdout)]
    assert len(listed) == 1 and listed[0].startswith("claude-"), (
        listed,
        (tmp_path / "serve.log").read_text()[-2000:],
    )
    log = (tmp_path / "serve.log").read_text()
    assert "forked" not in log and "compacted" not in log, log[-2000:]
