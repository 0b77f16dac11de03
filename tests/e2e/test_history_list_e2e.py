"""`koog history list --limit N`: serve clients and one-shots make many sessions; the N
most recently used are listed (issue 46, smaller items)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import forked_run_koog

pytestmark = pytest.mark.e2e

run_koog = pytest.fixture(name="run_koog")(forked_run_koog)


def test_history_list_limit_keeps_the_most_recently_used(
    run_koog: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    for name in ("first", "second", "third"):
        assert run_koog("chat", "-s", name, "hi").returncode == 0
    assert run_koog("chat", "-s", "first", "again").returncode == 0  # now the newest
    shown = json.loads(run_koog("history", "list", "--limit", "2", "--json").stdout)
    assert [s["session"] for s in shown] == ["first", "third"]
    table = run_koog("history", "list", "--limit", "1").stdout
    assert "first" in table and "third" not in table
    assert run_koog("history", "list", "--limit", "0").returncode == 2


def test_a_tool_that_cannot_be_imported_names_no_session(
    run_koog: Callable[..., subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    """A one-shot in a new session says the session's name; not for one that a broken
    `[[tools]]` entry stops before it exists (issue 46, smaller items)."""
    config = tmp_path / "tools.toml"
    config.write_text('[[tools]]\ncallable = "no_such_module_here:f"\n')
    done = run_koog("chat", "hi", env={"KOOG_CONFIG": str(config)})
    assert done.returncode == 2 and "no_such_module_here" in done.stderr
    assert "session " not in done.stderr
    assert json.loads(run_koog("history", "list", "--json").stdout) == []
