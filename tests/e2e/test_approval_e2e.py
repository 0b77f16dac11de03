"""The tool approval question on a real terminal: one key answers it (no Enter), and
Ctrl-D declines, saying so; in the REPL and in a one-shot alike."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import KOOG_BIN
from tests.fakes.openai_server import FakeOpenAIServer
from tests.support import tool_logs
from tests.support.terminal import Terminal

pytestmark = pytest.mark.e2e
QUESTION = "run shout? [y]es / [n]o / [a]lways for shout in this session:"
SOURCE = '''
def shout(text: str) -> str:
    """Upper-case text."""
    _log("shout", text)
    return text.upper()
'''


@pytest.fixture
def env(tmp_path: Path, koog_env: dict[str, str]) -> dict[str, str]:
    tools = tool_logs.tool_env(
        tmp_path, "ask_tools", SOURCE, '[[tools]]\ncallable = "ask_tools:shout"\nask = true\n'
    )
    return {**koog_env, **tools, "PROMPT_TOOLKIT_NO_CPR": "1", "TERM": "xterm"}


def shout(server: FakeOpenAIServer, text: str, after: str) -> None:
    call = {"id": f"c-{text}", "name": "shout", "arguments": {"text": text}}
    server.enqueue({"tool_calls": [call]}, {"content": after})


def prompted(terminal: Terminal, prompt: str) -> None:
    """Until the prompt is back on the last line."""
    deadline = time.monotonic() + 20
    while terminal.lines[-1:] != [prompt]:
        assert time.monotonic() < deadline, terminal.text
        time.sleep(0.02)


def told(server: FakeOpenAIServer) -> list[str]:
    return [m["content"] for m in server.chat_requests[-1]["messages"] if m["role"] == "tool"]


def test_one_key_answers_and_ctrl_d_declines_in_the_repl(
    server: FakeOpenAIServer, env: dict[str, str]
) -> None:
    terminal = Terminal([KOOG_BIN, "chat", "-s", "keys"], env)
    try:
        terminal.wait_for("keys>")
        shout(server, "one", "after yes")
        terminal.send("go\r")
        terminal.wait_for(QUESTION)
        terminal.send("y")  # no Enter
        terminal.wait_for("after yes")
        assert QUESTION + " y" in terminal.text
        prompted(terminal, "keys>")
        shout(server, "two", "after ctrl-d")
        terminal.send("again\r")
        terminal.wait_for("two")
        terminal.send("\x04")
        terminal.wait_for("after ctrl-d")
        assert "declined (Ctrl-D)" in terminal.text
        terminal.wait_for("keys>")
        terminal.send("/exit\r")
        assert terminal.close() == 0
    finally:
        if terminal.child.poll() is None:
            terminal.child.kill()
    assert tool_logs.logged(env) == [["shout", "one"]]
    assert told(server) == ["ONE", "Error: the user declined this call of shout; it was not made."]


def test_one_key_answers_and_ctrl_d_declines_in_a_one_shot(
    server: FakeOpenAIServer, env: dict[str, str]
) -> None:
    shout(server, "one", "after yes")
    terminal = Terminal([KOOG_BIN, "chat", "-s", "once", "go"], env)
    try:
        terminal.wait_for(QUESTION)
        terminal.send("a")  # no Enter
        terminal.wait_for("after yes")
        assert terminal.close() == 0
    finally:
        if terminal.child.poll() is None:
            terminal.child.kill()
    assert QUESTION + " a" in terminal.text
    shout(server, "two", "after ctrl-d")
    terminal = Terminal([KOOG_BIN, "chat", "-s", "twice", "go"], env)
    try:
        terminal.wait_for(QUESTION)
        terminal.send("\x04")
        terminal.wait_for("after ctrl-d")
        assert terminal.close() == 0
    finally:
        if terminal.child.poll() is None:
            terminal.child.kill()
    assert "declined (Ctrl-D)" in terminal.text
    assert tool_logs.logged(env) == [["shout", "one"]]
    assert told(server) == ["Error: the user declined this call of shout; it was not made."]


def test_a_destructive_command_and_the_repl_ask_yes_or_no_with_one_key(
    server: FakeOpenAIServer, env: dict[str, str], run_koog: Callable[..., Any]
) -> None:
    """Issue 52: a [y/N] question took a whole line (Enter), and swallowed what was typed
    after it. One key answers: y clears (no Enter), Enter alone is no."""
    for name in ("kept", "gone"):
        assert run_koog("chat", "-s", name, "hello", env=env).returncode == 0
    refused = Terminal([KOOG_BIN, "history", "clear", "-s", "kept"], env)
    refused.wait_for("[y/N]:")
    refused.send("\r")
    assert refused.close() == 2 and "cancelled; nothing changed" in refused.text
    cleared = Terminal([KOOG_BIN, "history", "clear", "-s", "gone"], env)
    cleared.wait_for("[y/N]:")
    cleared.send("y")  # no Enter
    assert cleared.close() == 0, cleared.text
    repl = Terminal([KOOG_BIN, "chat", "-s", "kept"], env)
    repl.wait_for("kept>")
    repl.send("/clear\r")
    repl.wait_for("[y/N]")
    repl.send("y")  # no Enter
    repl.wait_for("cleared")
    repl.send("\x04")
    assert repl.close() == 0, repl.text
    shown = run_koog("history", "show", "-s", "kept", "--json", env=env).stdout
    assert "hello" not in shown
