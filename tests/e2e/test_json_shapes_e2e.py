"""Every JSON shape the README documents is what the commands really print."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.openai_server import FakeOpenAIServer

pytestmark = pytest.mark.e2e
Run = Callable[..., subprocess.CompletedProcess[str]]
README = Path(__file__).resolve().parents[2] / "README.md"


def documented() -> dict[str, str]:
    section = README.read_text().split("## JSON output", 1)[1].split("\n## ", 1)[0]
    return dict(re.findall(r"^\| `([^`]+)` \| `([^`]+)` \|$", section, re.MULTILINE))


def check(shape: str, value: Any) -> None:
    many = shape.startswith("[")
    keys = set(re.findall(r'"(\w+)"', shape))
    items = value if many else [value]
    assert isinstance(items, list) and items, (shape, value)
    for item in items:
        assert isinstance(item, dict), (shape, item)
        if "..." in shape:
            assert keys <= set(item), (shape, sorted(item))
        else:
            assert set(item) == keys, (shape, sorted(item))


def test_documented_shapes_match_real_output(
    run_koog: Run, server: FakeOpenAIServer, tmp_path: Path, data_dir: Path
) -> None:
    config = tmp_path / "shapes.toml"
    config.write_text('[roles.helper]\nsystem = "Help."\n')

    def out(*args: str, config: Path = config) -> Any:
        result = run_koog(*args, env={"KOOG_CONFIG": str(config)})
        assert result.returncode == 0, (args, result.stderr)
        return json.loads(result.stdout)

    mcp = tmp_path / "mcp.toml"  # an MCP server from PyPI, for `koog mcp`
    mcp.write_text(
        f'[[mcp.servers]]\nname = "time"\ncommand = "{Path(sys.executable).parent}/mcp-server-time"\n'
    )

    made = out("chat", "-s", "j", "hello", "--json")
    point = out("checkpoint", "create", "-s", "j", "--json")
    out("chat", "-s", "j", "more", "--json")
    server.enqueue({"content": "a summary"})
    added = out("memory", "add", "blue doors", "--json")
    exported = tmp_path / "j.json"
    exported.write_text(json.dumps(out("history", "export", "-s", "j")))
    export = tmp_path / "claude-ai.json"  # a Claude.ai export, for `import --from`
    export.write_text(
        json.dumps(
            [{"uuid": "u1", "chat_messages": [{"uuid": "m1", "sender": "human", "text": "hi"}]}]
        )
    )
    real = {
        "chat --json": made,
        "models --json": out("models", "--json"),
        "roles --json": out("roles", "--json"),
        "history list --json": out("history", "list", "--json"),
        "history show --json": out("history", "show", "-s", "j", "--json"),
        "history export": out("history", "export", "-s", "j"),
        "history import --json": out("history", "import", "-s", "j2", str(exported), "--json"),
        "history import --from --json": out(
            "history", "import", "--from", "claude-ai", str(export), "--json"
        ),
        "checkpoint create --json": point,
        "checkpoint list --json": out("checkpoint", "list", "-s", "j", "--json"),
        "checkpoint show --json": out("checkpoint", "show", point["id"], "--json"),
        "compress --json": out("compress", "-s", "j", "--json"),
        "rollback --json": out("rollback", "-s", "j", point["id"], "--yes", "--json"),
        "memory add --json": added,
        "memory show --json": out("memory", "show", added["id"][:8], "--json"),
        "memory search --json": out("memory", "search", "blue", "--json"),
        "memory list --json": out("memory", "list", "--json"),
        "memory ingest --json": out("memory", "ingest", "-s", "j", "--json"),
        "memory forget --json": out("memory", "forget", "--where", "none=none", "--json"),
        "why --json": out("why", "-s", "j", "--json"),
        "history fork --json": out("history", "fork", "-s", "j", "--at", "1", "j-fork", "--json"),
        "memory recall --json": out("memory", "recall", "blue", "-s", "j", "--json"),
        "config show --json": out("config", "show", "--json"),
        "storage status --json": out("storage", "status", "--json"),
        "storage copy --json": out(
            "storage", "copy", "--from", str(data_dir), "--to", str(tmp_path / "to"), "--json"
        ),
        "storage prune --json": out("storage", "prune", "--older-than", "30", "--json"),
        "mcp list --json": out("mcp", "list", "--json", config=mcp),
        "mcp tools --json": out("mcp", "tools", "--json", config=mcp),
    }
    shapes = documented()
    assert set(shapes) == set(real)
    for command, shape in shapes.items():
        check(shape, real[command])
    usage = {"prompt_tokens", "completion_tokens", "total_tokens", "cached_tokens"}
    assert made["usage"] is None or set(made["usage"]) == usage
    assert real["why --json"]["usage"] is None or set(real["why --json"]["usage"]) == usage
