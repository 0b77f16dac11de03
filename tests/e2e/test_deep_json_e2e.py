"""JSON koog did not write is parsed within bounds (issue 45, acceptance 4): a client's
tool-call arguments and tool result nested 3,000 levels deep (inside strings, so the body's
own depth check passes) leave the session usable: export, rollback and the next turn all
exit 0, and the text is kept as it was sent."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAIServer
from tests.support.serving import KoogServe

pytestmark = pytest.mark.e2e

Run = Callable[..., subprocess.CompletedProcess[str]]
DEEP = "[" * 3000 + "]" * 3000
DEEP_OBJECT = '{"a":' * 3000 + "1" + "}" * 3000


def test_deep_json_in_a_clients_tool_call_and_result_leaves_the_session_usable(
    serve: KoogServe, server: FakeOpenAIServer, run_koog: Run, tmp_path: Path
) -> None:
    client = serve.client(default_headers={"X-Koog-Session": "deep"})
    tool = {
        "type": "function",
        "function": {"name": "probe", "parameters": {"type": "object", "properties": {}}},
    }
    convo = [
        {"role": "user", "content": "probe it"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "probe", "arguments": DEEP_OBJECT},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": DEEP},
    ]
    done = client.chat.completions.create(model="gpt-4o-mini", messages=convo, tools=[tool])  # type: ignore[arg-type,list-item]
    assert done.choices[0].message.content
    page = tmp_path / "deep.html"
    for args in (
        ("history", "show", "-s", "deep"),
        ("history", "export", "-s", "deep", "--format", "html", "-o", str(page)),
        ("history", "export", "-s", "deep", "--format", "markdown"),
        ("why", "-s", "deep"),
    ):
        result = run_koog(*args)
        assert result.returncode == 0, (args, result.stderr)
    assert "[[[[" in page.read_text()
    rolled = run_koog("rollback", "-s", "deep", "--latest", "--yes")
    assert rolled.returncode == 0, rolled.stderr
    again = run_koog("chat", "-s", "deep", "and now?")
    assert again.returncode == 0, again.stderr
    shown = json.loads(run_koog("history", "show", "-s", "deep", "--json").stdout)
    assert [m["content"] for m in shown if m["role"] == "user"][-1] == "and now?"


DEEP_SERVER = '''
from mcp.server.mcpserver import MCPServer

app = MCPServer("deep")


@app.tool()
def deep() -> str:
    """Answer with JSON nested 3,000 levels deep."""
    return "[" * 3000 + "]" * 3000


app.run()
'''


def test_deep_json_in_an_mcp_tool_result_leaves_the_session_usable(
    server: FakeOpenAIServer, run_koog: Run, tmp_path: Path
) -> None:
    """The same for an MCP server's result: the turn, export, rollback and the next turn
    exit 0."""
    import sys

    script = tmp_path / "deep_server.py"
    script.write_text(DEEP_SERVER)
    config = tmp_path / "deep.toml"
    config.write_text(
        f'[[mcp.servers]]\nname = "deep"\ncommand = "{sys.executable}"\nargs = ["{script}"]\n'
        "trusted = true\n"
    )
    env = {"KOOG_CONFIG": str(config)}
    server.enqueue(
        {"tool_calls": [{"id": "d1", "name": "deep__deep", "arguments": "{}"}]},
        {"content": "that was deep"},
    )
    turn = run_koog("chat", "-s", "mcpdeep", "go deep", "--yes", env=env, timeout=60)
    assert turn.returncode == 0 and turn.stdout == "that was deep\n", turn.stderr
    shown = json.loads(run_koog("history", "show", "-s", "mcpdeep", "--json", env=env).stdout)
    assert any(m["role"] == "tool" and m["content"].startswith("[[[") for m in shown)
    page = tmp_path / "deep.html"
    exported = run_koog(
        "history", "export", "-s", "mcpdeep", "--format", "html", "-o", str(page), env=env
    )
    assert exported.returncode == 0, exported.stderr
    back = run_koog("rollback", "-s", "mcpdeep", "--latest", "--yes", "--force", env=env)
    assert back.returncode == 0 and "Traceback" not in back.stderr, back.stderr
    again = run_koog("chat", "-s", "mcpdeep", "still here?", env=env)
    assert again.returncode == 0 and again.stdout == "echo: still here?\n", again.stderr
