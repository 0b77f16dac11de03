"""MCP tool servers for real (issue 36, SPEC §5.20): the npm memory and filesystem servers
over stdio, and a streamable-HTTP server built with the `mcp` SDK behind a bearer token,
driven by the real `koog` against the test model server.

The memory server runs behind a tap (tests/support/mcp_tap.py) that logs every
`tools/call` it is sent, so a test can count how many times a delete was asked for; what
the server holds is read back through its own `read_graph` tool."""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import KOOG_BIN
from tests.fakes.openai_server import FakeOpenAIServer
from tests.support import npm
from tests.support.terminal import Terminal

pytestmark = pytest.mark.e2e
Run = Callable[..., subprocess.CompletedProcess[str]]

PINS = (
    "@modelcontextprotocol/server-memory@2026.8.31",
    "@modelcontextprotocol/server-filesystem@2026.8.31",
)
ROOT = Path(__file__).resolve().parents[2]
CREATE = "memory__create_entities"


@pytest.fixture(scope="session")
def mcp_bin() -> Path:
    return npm.installed(PINS, "koog-test-mcp")


class Memory:
    """The npm memory server behind a tap, with its own file, as koog's `memory` server."""

    def __init__(self, folder: Path, bin_dir: Path) -> None:
        self.file = folder / "graph.jsonl"
        self.taps = folder / "taps.jsonl"
        self.command = [str(bin_dir / "mcp-server-memory")]
        self.marker = str(self.file)  # in every process of this server's command line

    def server_toml(self, trusted: bool = True) -> str:
        args = ["-m", "tests.support.mcp_tap", str(self.taps), "--", *self.command]
        env = {"MEMORY_FILE_PATH": str(self.file), "PYTHONPATH": str(ROOT)}
        return (
            f'[[mcp.servers]]\nname = "memory"\ncommand = {json.dumps(sys.executable)}\n'
            f"args = {json.dumps(args)}\nenv = {_inline(env)}\n"
            f"trusted = {'true' if trusted else 'false'}\n"
        )

    def entities(self) -> set[str]:
        """What the server holds, asked through its own read_graph tool."""
        from mcp import Client
        from mcp.client.stdio import StdioServerParameters

        async def read() -> Any:
            params = StdioServerParameters(
                command=self.command[0], env={"MEMORY_FILE_PATH": str(self.file)}
            )
            async with Client(params, mode="legacy") as client:
                return await client.call_tool("read_graph", {})

        result = asyncio.run(read())
        graph = json.loads(result.content[0].text)
        return {e["name"] for e in graph["entities"]}

    def asked(self, tool: str) -> list[Any]:
        """The arguments of every call of `tool` the server was sent, in order."""
        if not self.taps.exists():
            return []
        lines = [json.loads(line) for line in self.taps.read_text().splitlines()]
        return [e["arguments"] for e in lines if e["tool"] == tool]

    def deleted(self) -> list[str]:
        return [name for args in self.asked("delete_entities") for name in args["entityNames"]]


def _inline(table: dict[str, str]) -> str:
    return "{ " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in table.items()) + " }"


UNDO = (
    "[[mcp.compensations]]\n"
    f'tool = "{CREATE}"\n'
    'compensation = "memory__delete_entities"\n'
    'arguments = { entityNames = "{{ result[*].name }}" }\n'
)


def create(ident: str, *names: str) -> dict[str, Any]:
    entities = [
        {"name": n, "entityType": "person", "observations": [f"{n} was here"]} for n in names
    ]
    return {"id": ident, "name": CREATE, "arguments": {"entities": entities}}


@pytest.fixture
def memory(tmp_path: Path, mcp_bin: Path) -> Memory:
    return Memory(tmp_path, mcp_bin)


def configured(tmp_path: Path, text: str) -> dict[str, str]:
    config = tmp_path / "mcp.toml"
    config.write_text(text)
    return {"KOOG_CONFIG": str(config)}


def restore_points(run_koog: Run, session: str, env: dict[str, str]) -> list[dict[str, Any]]:
    listed = run_koog("checkpoint", "list", "-s", session, "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    return [c for c in json.loads(listed.stdout) if c["kind"] == "restore"]


def leftovers(marker: str) -> list[str]:
    """Processes whose command line or environment names `marker` (a server's own file)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            line = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            environ = (entry / "environ").read_bytes().decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if (marker in line or f"={marker}" in environ) and state != "Z":
            found.append(line)
    return found


def gone(marker: str, within: float = 5.0) -> list[str]:
    deadline = time.monotonic() + within
    while (left := leftovers(marker)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def test_rollback_undoes_an_mcp_call_on_the_servers_own_store(
    run_koog: Run, server: FakeOpenAIServer, memory: Memory, tmp_path: Path
) -> None:
    env = configured(tmp_path, memory.server_toml() + UNDO)
    server.enqueue({"tool_calls": [create("c1", "Ada", "Alan")]}, {"content": "two made"})
    first = run_koog("chat", "-s", "graph", "make Ada and Alan", "--yes", env=env)
    assert first.returncode == 0, first.stderr
    assert first.stdout == "two made\n"
    mark = run_koog("checkpoint", "create", "-s", "graph", "--label", "two", env=env)
    assert mark.returncode == 0, mark.stderr
    # Ada again: the server keeps the Ada it has and creates Grace only (its result says so).
    server.enqueue({"tool_calls": [create("c2", "Ada", "Grace")]}, {"content": "one more"})
    second = run_koog("chat", "-s", "graph", "and Grace", "--yes", env=env)
    assert second.returncode == 0, second.stderr
    assert memory.entities() == {"Ada", "Alan", "Grace"}
    # The model was offered the server's tools, named SERVER__TOOL.
    offered = [t["function"]["name"] for t in server.chat_requests[0]["tools"]]
    assert CREATE in offered and "memory__read_graph" in offered
    why = run_koog("why", "-s", "graph", env=env)
    assert "MCP tools offered (9): memory__create_entities" in why.stdout, why.stdout

    back = run_koog("rollback", "-s", "graph", "two", "--yes", env=env)
    assert back.returncode == 0, back.stderr
    assert 'undone: memory__create_entities([{"name": "Ada"' in back.stderr, back.stderr
    assert memory.entities() == {"Ada", "Alan"}  # the Ada made before the checkpoint stays
    assert memory.deleted() == ["Grace"]
    assert memory.asked("create_entities") == [
        create("c1", "Ada", "Alan")["arguments"],
        create("c2", "Ada", "Grace")["arguments"],
    ]
    assert gone(memory.marker) == []  # every server stopped with its koog


@pytest.mark.slow
def test_a_rollback_killed_at_random_points_deletes_each_entity_exactly_once(
    run_koog: Run, server: FakeOpenAIServer, mcp_bin: Path, tmp_path: Path
) -> None:
    rng = random.Random(36)
    for trial in range(2):
        folder = tmp_path / f"t{trial}"
        folder.mkdir()
        memory = Memory(folder, mcp_bin)
        env = configured(folder, memory.server_toml() + UNDO)
        session = f"kill{trial}"
        server.enqueue({"tool_calls": [create(f"a{trial}", "Ada", "Alan")]}, {"content": "ok"})
        assert run_koog("chat", "-s", session, "two", "--yes", env=env).returncode == 0
        server.enqueue(
            {"tool_calls": [create(f"b{trial}", "Cy")]},
            {"tool_calls": [create(f"c{trial}", "Dee")]},
            {"tool_calls": [create(f"d{trial}", "Eve")]},
            {"content": "three more"},
        )
        assert run_koog("chat", "-s", session, "three", "--yes", env=env).returncode == 0
        base = restore_points(run_koog, session, env)[0]["id"]  # newest: before turn 2
        killed = subprocess.Popen(
            [KOOG_BIN, "rollback", "-s", session, base, "--yes"],
            env={**os.environ, **env},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        # A rollback of three compensations takes ~4 s here (each starts its own server):
        # the first trial kills it during the first, the second during a later one.
        time.sleep(rng.uniform(0.4, 1.4) + trial * 1.6)
        killed.send_signal(signal.SIGKILL)
        killed.wait(10)
        again = run_koog("rollback", "-s", session, base, "--yes", env=env, timeout=90)
        assert again.returncode == 0, (trial, again.stderr)
        assert memory.entities() == {"Ada", "Alan"}, trial
        assert sorted(memory.deleted()) == ["Cy", "Dee", "Eve"], (trial, again.stderr)
        assert gone(memory.marker) == [], trial


def test_a_write_without_a_compensation_is_never_rolled_back_silently(
    run_koog: Run,
    server: FakeOpenAIServer,
    mcp_bin: Path,
    tmp_path: Path,
    koog_env: dict[str, str],
) -> None:
    files = tmp_path / "files"
    files.mkdir()
    env = configured(
        tmp_path,
        f'[[mcp.servers]]\nname = "filesystem"\ncommand = "{mcp_bin / "mcp-server-filesystem"}"\n'
        f'args = ["{files}"]\ntrusted = true\n',
    )
    note = str(files / "note.txt")
    write = {"path": note, "content": "koog was here"}
    server.enqueue(
        {"tool_calls": [{"id": "w1", "name": "filesystem__write_file", "arguments": write}]},
        {
            "tool_calls": [
                {"id": "r1", "name": "filesystem__read_text_file", "arguments": {"path": note}}
            ]
        },
        {"content": "written and read"},
    )
    done = run_koog("chat", "-s", "fs", "write a note", "--yes", env=env)
    assert done.returncode == 0, done.stderr
    assert Path(note).read_text() == "koog was here"
    base = restore_points(run_koog, "fs", env)[-1]["id"]  # the empty history
    before = run_koog("history", "show", "-s", "fs", "--json", env=env).stdout

    refused = run_koog("rollback", "-s", "fs", base, "--yes", env=env)
    assert refused.returncode == 2, refused.stderr
    assert "koog cannot undo 1 tool call(s)" in refused.stderr
    assert "filesystem__write_file(" in refused.stderr and "--force" in refused.stderr
    assert "read_text_file" not in refused.stderr  # a read-only call has nothing to undo
    assert run_koog("history", "show", "-s", "fs", "--json", env=env).stdout == before
    # On a terminal the rollback asks, naming the call it cannot undo; "no" changes nothing.
    terminal = Terminal([KOOG_BIN, "rollback", "-s", "fs", base], {**koog_env, **env})
    try:
        terminal.wait_for("[y/N]")
        question = terminal.text.replace("\n", "")
        assert "koog cannot undo 1 of them, whose effects stay: filesystem__write_file(" in question
        terminal.send("n\r")
        assert terminal.close() == 2
    finally:
        if terminal.child.poll() is None:
            terminal.child.kill()
    assert "cancelled; nothing changed" in terminal.text
    assert run_koog("history", "show", "-s", "fs", "--json", env=env).stdout == before

    forced = run_koog("rollback", "-s", "fs", base, "--yes", "--force", env=env)
    assert forced.returncode == 0, forced.stderr
    assert "left in place: filesystem__write_file(" in forced.stderr, forced.stderr
    assert "(no compensation)" in forced.stderr
    assert "left in place: filesystem__read_text_file(" in forced.stderr
    assert "(read-only)" in forced.stderr
    assert json.loads(run_koog("history", "show", "-s", "fs", "--json", env=env).stdout) == []
    assert Path(note).read_text() == "koog was here"  # said, not silently kept


def test_approval_from_annotations_read_only_runs_a_write_is_refused_off_a_terminal(
    run_koog: Run, server: FakeOpenAIServer, memory: Memory, tmp_path: Path
) -> None:
    env = configured(tmp_path, memory.server_toml())
    server.enqueue(
        {"tool_calls": [{"id": "g1", "name": "memory__read_graph", "arguments": {}}]},
        {"tool_calls": [create("g2", "Ada")]},
        {"content": "looked, and was refused"},
    )
    done = run_koog("chat", "-s", "ask", "look, then add Ada", env=env)
    assert done.returncode == 0, done.stderr
    assert memory.asked("read_graph") == [{}]  # read-only, trusted: ran without asking
    tools = json.loads(run_koog("mcp", "tools", "memory", "--json", env=env).stdout)
    asks = {t["name"]: t["asks"] for t in tools}
    assert asks["memory__read_graph"] is False and asks[CREATE] is True
    assert memory.asked("create_entities") == []  # a write, no terminal, no --yes: refused
    results = [m for m in server.chat_requests[2]["messages"] if m["role"] == "tool"]
    assert "need the user's approval" in results[1]["content"]
    assert "koog chat --yes" in results[1]["content"]
    # An untrusted server's hints are not believed: its read-only tool asks too.
    env = configured(tmp_path, memory.server_toml(trusted=False))
    server.enqueue(
        {"tool_calls": [{"id": "g3", "name": "memory__read_graph", "arguments": {}}]},
        {"content": "refused"},
    )
    assert run_koog("chat", "-s", "ask2", "look", env=env).returncode == 0
    assert memory.asked("read_graph") == [{}]


def test_a_pypi_server_read_only_and_trusted_answers_without_asking(
    run_koog: Run, server: FakeOpenAIServer, tmp_path: Path
) -> None:
    """`mcp-server-time` from PyPI: its tools say they are read-only; trusted, they run
    with no terminal and no --yes, and `koog mcp tools` shows why."""
    binary = Path(sys.executable).parent / "mcp-server-time"
    env = configured(
        tmp_path,
        f'[[mcp.servers]]\nname = "time"\ncommand = "{binary}"\ntrusted = true\n'
        'enabled_tools = ["get_current_time"]\n',
    )
    listed = run_koog("mcp", "tools", "time", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    [tool] = json.loads(listed.stdout)
    assert tool["name"] == "time__get_current_time"
    assert tool["read_only"] is True and tool["asks"] is False and tool["compensation"] is None
    server.enqueue(
        {
            "tool_calls": [
                {"id": "t1", "name": "time__get_current_time", "arguments": {"timezone": "UTC"}}
            ]
        },
        {"content": "it is now"},
    )
    done = run_koog("chat", "-s", "clock", "what time is it in UTC?", env=env)
    assert done.returncode == 0, done.stderr
    result = next(m for m in server.chat_requests[1]["messages"] if m["role"] == "tool")
    assert json.loads(result["content"])["timezone"] == "UTC"
    unknown = run_koog("mcp", "tools", "nosuch", env=env)
    assert unknown.returncode == 2 and "no MCP server named 'nosuch'" in unknown.stderr


def test_a_writing_tool_asks_in_the_repl(
    server: FakeOpenAIServer, memory: Memory, tmp_path: Path, koog_env: dict[str, str]
) -> None:
    env = {**koog_env, **configured(tmp_path, memory.server_toml())}
    server.enqueue({"tool_calls": [create("p1", "Ada")]}, {"content": "Ada added"})
    terminal = Terminal([KOOG_BIN, "chat", "-s", "repl"], env)
    try:
        terminal.wait_for("repl>")
        terminal.send("add Ada\r")
        terminal.wait_for(f"run {CREATE}? [y]es / [n]o / [a]lways")
        assert memory.asked("create_entities") == []  # nothing runs before the answer
        terminal.send("y\r")
        terminal.wait_for("Ada added")
        # /retry would take out a write koog cannot undo (no compensation): it asks first.
        terminal.send("/retry\r")
        terminal.wait_for("? [y/N]")
        question = terminal.text.replace("\n", "")
        assert (
            "koog cannot undo 1 of them, whose effects stay: memory__create_entities(" in question
        )
        terminal.send("n\r")
        terminal.wait_for("cancelled; nothing changed")
        terminal.send("/mcp\r")
        terminal.wait_for("memory__read_graph")
        assert "running" in terminal.text
        terminal.send("/exit\r")
        assert terminal.close() == 0
    finally:
        if terminal.child.poll() is None:
            terminal.child.kill()
    assert memory.entities() == {"Ada"}
    assert gone(memory.marker) == []


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[tuple[str, Path, subprocess.Popen[str]]]:
    """The SDK-built streamable-HTTP server, token "s3cret"; its `note` tool's log."""
    log = tmp_path / "notes.txt"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.support.mcp_http_server",
            "--token",
            "s3cret",
            "--log",
            str(log),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("serving "), line
    yield line.split()[1], log, proc
    proc.kill()
    proc.wait(10)


def test_a_streamable_http_server_behind_a_bearer_token(
    run_koog: Run,
    server: FakeOpenAIServer,
    http_server: tuple[str, Path, subprocess.Popen[str]],
    tmp_path: Path,
) -> None:
    url, log, proc = http_server
    env = configured(
        tmp_path,
        f'[[mcp.servers]]\nname = "web"\nurl = "{url}"\nbearer_token_env = "WEB_TOKEN"\n'
        "trusted = true\ntool_timeout_seconds = 1.5\n",
    )

    def turn(session: str, *calls: dict[str, Any], token: str = "s3cret") -> list[str]:
        server.enqueue(*({"tool_calls": [c]} for c in calls), {"content": "done"})
        start = len(server.chat_requests)
        done = run_koog("chat", "-s", session, "go", "--yes", env={**env, "WEB_TOKEN": token})
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr
        last = server.chat_requests[start + len(calls)]["messages"]
        return [m["content"] for m in last if m["role"] == "tool"]

    said = turn(
        "web",
        {"id": "h1", "name": "web__echo", "arguments": {"text": "hi"}},
        {"id": "h2", "name": "web__note", "arguments": {"text": "kept"}},
    )
    assert said == ["echo: hi", "noted: kept"]
    assert log.read_text() == "kept\n"

    # A wrong token: the server's tools cannot be listed, so none is offered, and the user
    # is told why; the turn goes on without them. (The tools listed before are kept in the
    # data dir's cache, offered without starting the server: without it, it is listed.)
    cache = Path(os.environ["KOOG_DATA_DIR"]) / "mcp-tools.json"
    assert "web" in json.loads(cache.read_text())
    cache.unlink()
    server.enqueue({"content": "without the web"})
    wrong = run_koog("chat", "-s", "web2", "go", env={**env, "WEB_TOKEN": "wrong"})
    assert wrong.returncode == 0, wrong.stderr
    assert wrong.stdout == "without the web\n"
    assert (
        "MCP server 'web' failed to start: it refused the credentials (HTTP 401; check "
        "bearer_token_env WEB_TOKEN); its tools are not offered" in wrong.stderr
    ), wrong.stderr
    assert "tools" not in server.chat_requests[-1] and "Traceback" not in wrong.stderr
    # With another server's tools offered, a call of the refused server's tool is a
    # failed call saying why, for the model and the user.
    time_server = Path(sys.executable).parent / "mcp-server-time"
    both = configured(
        tmp_path,
        Path(env["KOOG_CONFIG"]).read_text()
        + f'[[mcp.servers]]\nname = "time"\ncommand = "{time_server}"\ntrusted = true\n',
    )
    server.enqueue(
        {"tool_calls": [{"id": "h3", "name": "web__echo", "arguments": {"text": "x"}}]},
        {"content": "told"},
    )
    refused = run_koog("chat", "-s", "web5", "go", "--yes", env={**both, "WEB_TOKEN": "wrong"})
    assert refused.returncode == 0 and "Traceback" not in refused.stderr, refused.stderr
    [told] = [m["content"] for m in server.chat_requests[-1]["messages"] if m["role"] == "tool"]
    assert told.startswith("Error: web__echo: MCP server 'web' failed to start: it refused")
    assert "✗ Error: web__echo" in refused.stderr

    started = time.monotonic()
    [slow] = turn("web3", {"id": "h4", "name": "web__hang", "arguments": {}})
    assert "did not finish within 1.5s (tool_timeout_seconds)" in slow
    assert time.monotonic() - started < 20

    [dead] = turn("web4", {"id": "h5", "name": "web__die", "arguments": {}})
    assert "the MCP server 'web' stopped during the call" in dead
    assert proc.wait(10) == 9


def test_a_call_in_flight_when_koog_dies_is_in_doubt_and_runs_again_on_resume(
    run_koog: Run,
    server: FakeOpenAIServer,
    http_server: tuple[str, Path, subprocess.Popen[str]],
    tmp_path: Path,
    koog_env: dict[str, str],
) -> None:
    """The tool calls' one rule (SPEC §5.18), for MCP calls: a call that returned is never
    run again (its receipt); one killed while it ran is in doubt and runs again."""
    url, log, _ = http_server
    env = configured(
        tmp_path,
        f'[[mcp.servers]]\nname = "web"\nurl = "{url}"\nbearer_token_env = "WEB_TOKEN"\n',
    )
    env["WEB_TOKEN"] = "s3cret"
    server.enqueue(
        {"tool_calls": [{"id": "n1", "name": "web__note", "arguments": {"text": "A"}}]},
        {
            "tool_calls": [
                {"id": "n2", "name": "web__slow_note", "arguments": {"text": "B", "seconds": 1.5}}
            ]
        },
        {"content": "both kept"},
    )
    koog = subprocess.Popen(
        [KOOG_BIN, "chat", "-s", "inflight", "keep two", "--yes"],
        env={**koog_env, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while len(server.chat_requests) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.7)  # B is in flight: the server is inside its sleep
    koog.send_signal(signal.SIGKILL)
    koog.wait(10)
    time.sleep(1.5)  # the server finishes B all the same: it did have its effect
    assert log.read_text() == "A\nB\n"
    resumed = run_koog("chat", "-s", "inflight", "--resume", "--yes", env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert "both kept" in resumed.stdout
    assert log.read_text() == "A\nB\nB\n"  # A returned: never again; B was in doubt
    history = json.loads(run_koog("history", "show", "-s", "inflight", "--json", env=env).stdout)
    roles = [m["role"] for m in history if m["role"] != "system"]
    assert roles == ["user", "assistant", "tool", "assistant", "tool", "assistant"]


def test_a_server_that_cannot_start_is_a_failed_call_naming_it(
    run_koog: Run, server: FakeOpenAIServer, tmp_path: Path
) -> None:
    env = configured(
        tmp_path,
        f'[[mcp.servers]]\nname = "broken"\ncommand = {json.dumps(sys.executable)}\n'
        'args = ["-c", "import sys; sys.stderr.write(\'no API key given\\\\n\'); sys.exit(3)"]\n',
    )
    server.enqueue({"content": "carried on"})
    done = run_koog("chat", "-s", "broken", "try it", "--yes", env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "carried on\n"
    assert "MCP server 'broken' failed to start" in done.stderr
    assert "its stderr ends: no API key given" in done.stderr
    assert "Traceback" not in done.stderr
    listed = run_koog("mcp", "list", "--json", env=env)
    [info] = json.loads(listed.stdout)
    assert info["name"] == "broken" and info["state"].startswith("failed: failed to start")


def test_no_mcp_process_outlives_a_killed_koog(
    server: FakeOpenAIServer, memory: Memory, tmp_path: Path, koog_env: dict[str, str]
) -> None:
    env = {**koog_env, **configured(tmp_path, memory.server_toml())}
    server.enqueue(
        {"tool_calls": [{"id": "k1", "name": "memory__read_graph", "arguments": {}}]},
        {"delay": 30, "content": "never seen"},
    )
    koog = subprocess.Popen(
        [KOOG_BIN, "chat", "-s", "killed", "look"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while not memory.asked("read_graph") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert memory.asked("read_graph") == [{}]
    assert leftovers(memory.marker)  # the server runs while koog waits on the model
    koog.send_signal(signal.SIGKILL)
    koog.wait(10)
    assert gone(memory.marker) == []


def test_the_mcp_sdk_is_not_imported_without_a_configured_server(tmp_path: Path) -> None:
    config = tmp_path / "plain.toml"
    config.write_text('[[tools]]\ncallable = "json:dumps"\n')
    probe = (
        "import sys\nfrom koogcli.services import compose\n"
        f"ctx = compose.build(env={{'KOOG_CONFIG': {str(config)!r}, 'KOOG_DATA_DIR': {str(tmp_path)!r}}})\n"
        "assert ctx.toolbox.names() == ['dumps'], ctx.toolbox.names()\n"
        "print(sorted(m for m in sys.modules if m == 'mcp' or m.startswith('mcp.')))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "[]\n"


def test_a_turn_that_calls_no_mcp_tool_starts_no_server(
    run_koog: Run, server: FakeOpenAIServer, tmp_path: Path
) -> None:
    """The tools a server offers are kept in the data dir once listed: later turns offer
    them without starting it, and the server starts when the model calls one (issue 46,
    acceptance 3). A changed configuration lists it again."""
    time_server = Path(sys.executable).parent / "mcp-server-time"
    starts = tmp_path / "starts.log"
    wrapper = tmp_path / "time-server.sh"
    wrapper.write_text(f'#!/bin/sh\necho started >> "{starts}"\nexec "{time_server}" "$@"\n')
    wrapper.chmod(0o755)
    entry = f'[[mcp.servers]]\nname = "time"\ncommand = "{wrapper}"\ntrusted = true\n'
    env = configured(tmp_path, entry)

    def started() -> int:
        return len(starts.read_text().splitlines()) if starts.exists() else 0

    assert run_koog("chat", "-s", "lazy", "hello", env=env).returncode == 0
    assert started() == 1  # listed once: nothing was known of it
    for text in ("and again", "once more"):
        assert run_koog("chat", "-s", "lazy", text, env=env).returncode == 0
    assert started() == 1
    offered = [t["function"]["name"] for t in server.chat_requests[-1]["tools"]]
    assert "time__get_current_time" in offered
    call = {"id": "t1", "name": "time__get_current_time", "arguments": {"timezone": "UTC"}}
    server.enqueue({"tool_calls": [call]}, {"content": "it is now"})
    done = run_koog("chat", "-s", "lazy", "what time is it", "--yes", env=env)
    assert done.returncode == 0 and done.stdout == "it is now\n", done.stderr
    assert started() == 2  # started for the call
    result = [m for m in server.chat_requests[-1]["messages"] if m["role"] == "tool"]
    assert result and "UTC" in result[0]["content"]
    Path(env["KOOG_CONFIG"]).write_text(entry + 'enabled_tools = ["get_current_time"]\n')
    assert run_koog("chat", "-s", "lazy", "hi", env=env).returncode == 0
    assert started() == 3  # another configuration: listed again


def test_a_process_an_mcp_server_set_apart_with_setsid_dies_with_a_killed_koog(
    server: FakeOpenAIServer, tmp_path: Path, koog_env: dict[str, str]
) -> None:
    """A server that starts a helper in a session of its own (`setsid`: out of its process
    group): koog killed with SIGKILL mid-turn, the helper goes too (issue 45)."""
    marker = f"koog-setsid-{uuid.uuid4().hex[:8]}"
    time_server = Path(sys.executable).parent / "mcp-server-time"
    launcher = tmp_path / "launcher.sh"
    launcher.write_text(
        f"#!/bin/sh\nsetsid {sys.executable} -c 'import time; time.sleep(300)' {marker} "
        "< /dev/null > /dev/null 2>&1 &\n"
        f'exec "{time_server}" "$@"\n'
    )
    launcher.chmod(0o755)
    env = {
        **koog_env,
        **configured(tmp_path, f'[[mcp.servers]]\nname = "time"\ncommand = "{launcher}"\n'),
    }
    call = {"id": "s1", "name": "time__get_current_time", "arguments": {"timezone": "UTC"}}
    server.enqueue({"tool_calls": [call]}, {"delay": 30, "content": "never seen"})
    koog = subprocess.Popen(
        [KOOG_BIN, "chat", "-s", "setsid", "what time", "--yes"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while len(server.chat_requests) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)  # the tool ran; koog waits on the model's second answer
    assert leftovers(marker)
    koog.send_signal(signal.SIGKILL)
    koog.wait(10)
    assert gone(marker) == []
