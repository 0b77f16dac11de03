"""`koog history list --limit N`: serve clients and one-shots make many sessions; the N
most recently used are listed (issue 46, smaller items)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable

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
