"""JSON koog did not write is parsed within bounds (issue 45, acceptance 4): a client's
tool-call arguments and tool result nested 3,000 levels deep (inside strings, so the body's
own depth check passes) leave the session usable: export, rollback and the next turn all
exit 0, and the text is kept as it was sent. A forged compaction handle and an imported
file nested 3,000 or 100,000 levels deep are a 400 and one error line (issue 51,
acceptance 5; an upstream's deep JSON: test_upstream_bounds_e2e.py)."""

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


@pytest.mark.parametrize("levels", [3_000, 100_000])
def test_a_forged_compaction_handle_nested_deep_is_a_400(
    serve_files: KoogServe, levels: int
) -> None:
    """A `compaction` item carrying koog's mark and JSON nested past the bound (issue 51,
    acceptance 5): a 400 naming the item, not a 500 with a traceback."""
    import base64

    from tests.support.serving import http

    packed = base64.urlsafe_b64encode(("[" * levels + "]" * levels).encode()).decode()
    items = [
        {"type": "message", "role": "user", "content": "before"},
        {"type": "compaction", "encrypted_content": "koog-compaction.v1:" + packed},
        {"type": "message", "role": "user", "content": "after"},
    ]
    status, body = http(
        "POST",
        serve_files.url + "/responses",
        {"model": "gpt-4o-mini", "input": items},
        {"X-Koog-Session": "forged"},
    )
    assert status == 400, body
    assert body["error"]["param"] == "input[1].encrypted_content"
    assert "nested deeper than 128 levels" in body["error"]["message"]


@pytest.mark.parametrize("levels", [3_000, 100_000])
def test_importing_a_deeply_nested_file_is_one_error_line(
    run_koog: Run, tmp_path: Path, levels: int
) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text('{"messages": ' + "[" * levels + "]" * levels + "}")
    done = run_koog("history", "import", "-s", "imported", str(deep))
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        f"koog: error: {deep} holds JSON nested deeper than 128 levels\n"
        "koog: hint: expected the output of `koog history export`\n"
    )
    assert run_koog("history", "show", "-s", "imported").returncode == 2
