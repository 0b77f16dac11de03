"""Optional features come with extras (issue 46): used without its extra, a feature names
the extra to install in one line, exit 2. The suite has every extra installed, so each
run here hides one module from koog, as an install without that extra would be."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import KOOG_BIN

pytestmark = pytest.mark.e2e

PYTHON = os.path.join(os.path.dirname(KOOG_BIN), "python")


def _without(module: str, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    program = (
        f"import sys; sys.modules[{module!r}] = None; sys.argv = ['koog', *{list(args)!r}]; "
        "from koogcli.cli.app import main; main()"
    )
    return subprocess.run(
        [PYTHON, "-c", program], capture_output=True, text=True, env=env, timeout=60
    )


def test_postgresql_without_its_extra_names_it(koog_env: dict[str, str]) -> None:
    env = {**koog_env, "KOOG_DATABASE_URL": "postgresql://koog@127.0.0.1:1/koog"}
    done = _without("psycopg", "history", "list", env=env)
    assert done.returncode == 2, done.stderr
    assert "pip install 'koog-cli[postgres]'" in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.splitlines()) <= 2


def test_an_mcp_server_without_its_extra_names_it(koog_env: dict[str, str], tmp_path: Path) -> None:
    config = tmp_path / "mcp.toml"
    config.write_text('[[mcp.servers]]\nname = "time"\ncommand = "mcp-server-time"\n')
    done = _without("mcp", "chat", "-s", "x", "hi", env={**koog_env, "KOOG_CONFIG": str(config)})
    assert done.returncode == 2, done.stderr
    assert "pip install 'koog-cli[mcp]'" in done.stderr and "Traceback" not in done.stderr


def test_the_chat_client_runs_without_any_extra(koog_env: dict[str, str]) -> None:
    for module in ("psycopg", "mcp", "numpy"):
        done = _without(module, "chat", "-s", f"plain-{module}", "hi", env=koog_env)
        assert done.returncode == 0, (module, done.stderr)
        assert done.stdout == "echo: hi\n"
