"""Stored text is shown, never executed (SPEC §6, issue 45): a message, a reply and a memory
record holding terminal escapes (window title, clipboard write, clear screen, a C1 CSI, a
carriage return that overwrites the line) reach the terminal written visibly from every
command that shows them; `--json` keeps the text as it is, JSON-escaped."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable

import pytest

from koogcli.core.messages import assistant, user
from koogcli.ui.views import recent_exchanges
from tests.fakes.openai_server import FakeOpenAIServer

pytestmark = pytest.mark.e2e

Run = Callable[..., subprocess.CompletedProcess[str]]
HOSTILE = (
    "title\x1b]0;pwned\x07 clip\x1b]52;c;cm0gLXJmIH4=\x07 clear\x1b[2J csi\x9b31m "
    "shown\r\x1b[Kforged"
)
RAW = ("\x1b", "\x07", "\x9b", "\r")


def clean(text: str) -> None:
    assert not any(c in text for c in RAW), repr(text)


def test_no_command_writes_stored_escapes_raw(run_koog: Run, server: FakeOpenAIServer) -> None:
    done = run_koog("chat", "-s", "esc", f"about {HOSTILE} zebra")
    assert done.returncode == 0, done.stderr
    assert run_koog("memory", "add", f"record {HOSTILE} zebra").returncode == 0
    outputs = {
        "show": run_koog("history", "show", "-s", "esc"),
        "markdown": run_koog("history", "show", "-s", "esc", "--format", "markdown"),
        "transcript": run_koog("history", "show", "-s", "esc", "--transcript"),
        "list": run_koog("history", "list"),
        "search": run_koog("history", "search", "zebra"),
        "memory list": run_koog("memory", "list"),
        "memory search": run_koog("memory", "search", "zebra"),
    }
    for name, result in outputs.items():
        assert result.returncode == 0, (name, result.stderr)
        clean(result.stdout)
        clean(result.stderr)
        # The text around is shown (search shows the matching line: CR ends one there).
        assert {"list": "about", "search": "^[[Kforged zebra"}.get(name, "pwned") in result.stdout
    assert "^[]0;pwned^G" in outputs["show"].stdout
    assert "\\x9b31m" in outputs["show"].stdout and "shown^M^[[Kforged" in outputs["show"].stdout
    shown = json.loads(run_koog("history", "show", "-s", "esc", "--json").stdout)
    assert any(HOSTILE in m["content"] for m in shown)  # --json: the text as it is


def test_the_repl_opens_a_session_without_executing_its_text() -> None:
    opening = recent_exchanges([user(f"q {HOSTILE}"), assistant(f"a {HOSTILE}")], 2)
    clean(opening)
    assert "^[[2J" in opening and "shown^M^[[Kforged" in opening
