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


def test_an_agent_session_reads_as_the_person_wrote_it(
    run_koog: Callable[..., subprocess.CompletedProcess[str]],
    koog_env: dict[str, str],
    server: object,
) -> None:
    """Issue 52: `history list` previews the person's prompt, not the `<system-reminder>`
    Claude Code put before it; `history show` folds the agent's 100-line system prompt to
    one line, and `--system` shows it whole."""
    from tests.support.serving import KoogServe, http

    served = KoogServe(koog_env).start()
    system = "You are Claude Code.\n" + "\n".join(f"Rule {i}: be careful." for i in range(100))
    said = ["<system-reminder>\nContext the agent adds.\n</system-reminder>", "fix the test"]
    body = {
        "model": "m",
        "max_tokens": 9,
        "system": system,
        "tools": [{"name": "Bash", "input_schema": {"type": "object"}}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": t} for t in said]}],
    }
    headers = {"x-claude-code-session-id": "s1", "anthropic-version": "1"}
    try:
        status, _ = http("POST", served.url.removesuffix("/v1") + "/v1/messages", body, headers)
        assert status == 200
    finally:
        assert served.stop() == 0
    [listed] = json.loads(run_koog("history", "list", "--json").stdout)
    assert listed["preview"] == "fix the test", listed
    shown = run_koog("history", "show", "-s", "claude-s1").stdout
    assert "Rule 50" not in shown and "(101 lines" in shown and "fix the test" in shown
    whole = run_koog("history", "show", "-s", "claude-s1", "--system").stdout
    assert "Rule 50: be careful." in whole
