"""What a person sees on a real terminal: a long streamed reply once in the scrollback,
a spinner while waiting that leaves nothing behind, and none of it in a pipe."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.conftest import KOOG_BIN
from tests.fakes.openai_server import FakeOpenAIServer
from tests.support.terminal import Terminal, run_on_terminal

pytestmark = pytest.mark.e2e


def long_reply(paragraphs: int) -> str:
    blocks = []
    for n in range(1, paragraphs + 1):
        words = " ".join(f"word{(n * 7 + i) % 97}" for i in range(45))
        blocks.append(f"P{n}. {words} **bold {n}**.")
        if n % 5 == 0:
            blocks.append(f"```python\ndef f{n}(x):\n    return x + {n}\n```")
        if n % 7 == 0:
            blocks.append(f"- item {n} a\n- item {n} b")
        if n == 30:  # a block taller than the screen, growing line by line
            blocks.append("```\n" + "\n".join(f"tall-{i:03d}" for i in range(70)) + "\n```")
    return "\n\n".join(blocks)


def chunks(text: str, size: int = 5) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def test_a_long_reply_on_a_terminal_is_in_the_scrollback_once(
    koog_env: dict[str, str], server: FakeOpenAIServer
) -> None:
    paragraphs = 60  # far more than the 40 rows of the terminal
    server.enqueue({"chunks": chunks(long_reply(paragraphs)), "chunk_delay": 0.0005})
    env = {**koog_env, "TERM": "xterm-256color"}
    env.pop("NO_COLOR", None)
    shown = run_on_terminal([KOOG_BIN, "chat", "-s", "r", "tell me"], env, 120, 40)
    assert shown.returncode == 0, shown.stderr
    counts = {n: shown.text.count(f"P{n}. ") for n in range(1, paragraphs + 1)}
    assert set(counts.values()) == {1}, {n: c for n, c in counts.items() if c != 1}
    tall = {i: shown.text.count(f"tall-{i:03d}") for i in range(70)}
    assert set(tall.values()) == {1}, {i: c for i, c in tall.items() if c != 1}
    assert "def f55(x):" in shown.text  # code blocks are rendered too
    assert "```" not in shown.text  # as Markdown, not as typed
    assert b"\x1b[" in shown.raw  # a terminal gets the rendering


def test_a_spinner_shows_while_waiting_and_leaves_nothing_behind(
    koog_env: dict[str, str], server: FakeOpenAIServer
) -> None:
    server.enqueue({"content": "The answer after a wait.", "delay": 1.2})
    shown = run_on_terminal([KOOG_BIN, "chat", "-s", "w", "slow one"], koog_env, 100, 30)
    assert shown.returncode == 0, shown.stderr
    assert b"waiting for" in shown.raw  # it was drawn while the server thought
    assert b"1.0s" in shown.raw  # with the seconds counting
    assert "The answer after a wait." in shown.text
    assert "waiting" not in shown.text  # and erased: nothing of it on screen or above


def test_a_pipe_gets_plain_text_and_no_spinner(
    run_koog: Callable[..., object], server: FakeOpenAIServer
) -> None:
    server.enqueue({"chunks": ["# Head\n\n", "Some **bold** text."], "delay": 0.6})
    done = run_koog("chat", "-s", "p", "question")
    assert done.returncode == 0  # type: ignore[attr-defined]
    assert done.stdout == "# Head\n\nSome **bold** text.\n"  # type: ignore[attr-defined]
    assert "waiting" not in done.stderr  # type: ignore[attr-defined]
    assert "\x1b" not in done.stdout + done.stderr  # type: ignore[attr-defined]


def repl_on_terminal(env: dict[str, str], columns: int, reflow: bool) -> Terminal:
    env = {**env, "TERM": "xterm-256color", "PROMPT_TOOLKIT_NO_CPR": "1"}
    env["KOOG_TERMINAL_REFLOWS"] = "yes" if reflow else "no"
    env.pop("NO_COLOR", None)
    terminal = Terminal([KOOG_BIN, "chat", "-s", "r"], env, columns, 40, reflow=reflow)
    terminal.wait_for("r>")
    return terminal


@pytest.mark.parametrize("reflow", [True, False], ids=["reflowing", "clipping"])
@pytest.mark.parametrize(("wide", "narrow"), [(120, 80), (80, 120)], ids=["narrower", "wider"])
def test_a_reply_streamed_while_the_window_is_resized_is_in_the_scrollback_once(
    koog_env: dict[str, str], server: FakeOpenAIServer, reflow: bool, wide: int, narrow: int
) -> None:
    """Resized mid-stream, and back, on a terminal that reflows its lines (tmux, GNOME
    Terminal, iTerm2...) and on one that clips them (xterm): every block once, and a line
    typed while the reply streams is not echoed into it but sent as the next message."""
    server.enqueue({"chunks": chunks(long_reply(12), 8), "chunk_delay": 0.004})
    terminal = repl_on_terminal(koog_env, wide, reflow)
    terminal.send("tell me\r")
    terminal.wait_for("P3.")
    terminal.send("typed ahead\r")
    terminal.resize(narrow, 40)
    terminal.wait_for("P6.")
    terminal.resize(wide, 40)
    terminal.wait_for("echo: typed ahead")
    terminal.send("\x04")
    assert terminal.close() == 0
    counts = {n: terminal.text.count(f"P{n}. ") for n in range(1, 13)}
    assert set(counts.values()) == {1}, {n: c for n, c in counts.items() if c != 1}
    assert terminal.lines.count("r> typed ahead") == 1, terminal.text
    assert terminal.text.count("typed ahead") == 2  # the prompt line and its echo reply


def test_keys_typed_while_the_spinner_waits_go_to_the_next_prompt(
    koog_env: dict[str, str], server: FakeOpenAIServer
) -> None:
    server.enqueue({"content": "The answer after a wait.", "delay": 1.2})
    terminal = repl_on_terminal(koog_env, 100, reflow=True)
    terminal.send("slow one\r")
    terminal.wait_for("waiting for")
    start = len(terminal.raw)
    terminal.send("next question")
    terminal.wait_for("The answer after a wait.")
    before_answer = bytes(terminal.raw[start:]).split(b"The answer")[0]
    assert b"next question" not in before_answer  # never echoed onto the spinner's line
    terminal.wait_for("r> next question")
    assert terminal.text.count("next question") == 1, terminal.text
    terminal.send("\x15\x04")  # Ctrl-U empties the line, Ctrl-D leaves
    assert terminal.close() == 0
