"""Stored text is shown, never executed (SPEC §6, issues 45 and 51): a message, a reply, a
memory record, a file name a model chose and an upstream's model id holding terminal escapes
(window title, clipboard write, clear screen, a C1 CSI, a carriage return that overwrites
the line) reach the terminal written visibly from every command that shows them, and from
the spinner and the streamed reply; `--json` keeps the text as it is, JSON-escaped (C1
too); an export or a reply to a pipe is the text as it is."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from koogcli.core.messages import assistant, user
from koogcli.ui.views import recent_exchanges
from tests.conftest import KOOG_BIN
from tests.fakes.openai_server import FakeOpenAIServer
from tests.support.serving import KoogServe, http
from tests.support.terminal import Captured, run_on_terminal

pytestmark = pytest.mark.e2e

Run = Callable[..., subprocess.CompletedProcess[str]]
HOSTILE = (
    "title\x1b]0;pwned\x07 clip\x1b]52;c;cm0gLXJmIH4=\x07 clear\x1b[2J csi\x9b31m "
    "shown\r\x1b[Kforged"
)
RAW = ("\x1b", "\x07", "\x9b", "\r")
# What a terminal would act on; koog's own drawing (the spinner, rich) uses none of them.
EXECUTED = (b"\x1b]0;", b"\x1b]52;", b"\x1b[2J", "\x9b".encode(), b"\x07")
NAME = "a\x1b]0;pwned\x07\x1b]52;c;cm0gLXJmIH4=\x07\x1b[2J\x9b31mb.txt"  # a file name
SHOWN_NAME = "a^[]0;pwned^G^[]52;c;cm0gLXJmIH4=^G^[[2J\\x9b31mb.txt"


def clean(text: str) -> None:
    assert not any(c in text for c in RAW), repr(text)


def on_terminal(env: dict[str, str], *args: str) -> Captured:
    """koog with stdout on a pseudo-terminal: what it wrote there must run nothing."""
    shown = run_on_terminal([KOOG_BIN, *args], env, 160, 40, timeout=30)
    assert shown.returncode == 0, shown.stderr
    assert not any(seq in shown.raw for seq in EXECUTED), shown.raw
    return shown


def piped(env: dict[str, str], *args: str) -> bytes:
    """koog's stdout to a pipe, byte for byte."""
    done = subprocess.run([KOOG_BIN, *args], env=env, capture_output=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout


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


def test_memory_show_and_a_markdown_export_show_escapes_on_a_terminal(
    run_koog: Run, koog_env: dict[str, str], server: FakeOpenAIServer
) -> None:
    assert run_koog("chat", "-s", "esc", f"about {HOSTILE}").returncode == 0
    added = run_koog("memory", "add", f"record {HOSTILE}", "--meta", f"k=v{HOSTILE}")
    assert added.returncode == 0, added.stderr
    record = added.stdout.strip()
    export = ("history", "export", "-s", "esc", "--format", "markdown")
    for args in (("memory", "show", record), export):
        shown = on_terminal(koog_env, *args)
        assert "title^[]0;pwned^G clip^[]52;" in shown.text and "\\x9b31m" in shown.text
    assert "k = vtitle^[]0;pwned^G" in on_terminal(koog_env, "memory", "show", record).text
    clean(run_koog("memory", "show", record).stdout)  # a view of stored text, as memory list
    assert HOSTILE.encode() in piped(koog_env, *export)  # an export to a pipe: as it is


def test_models_shows_an_upstreams_hostile_id(
    run_koog: Run, koog_env: dict[str, str], server: FakeOpenAIServer
) -> None:
    server.models = ["test-model", f"evil {HOSTILE}"]
    assert "evil title^[]0;pwned^G" in on_terminal(koog_env, "models").text
    listed = run_koog("models")
    clean(listed.stdout)
    assert "evil title^[]0;pwned^G" in listed.stdout
    found = run_koog("models", "--json")
    assert "\\u009b31m" in found.stdout and "\x9b" not in found.stdout
    assert {m["id"] for m in json.loads(found.stdout)} == set(server.models)


@pytest.mark.parametrize("markdown", ["true", "false"])
def test_the_spinner_and_the_streamed_reply_show_escapes_on_a_terminal(
    markdown: str, koog_env: dict[str, str], server: FakeOpenAIServer
) -> None:
    """`koog chat -m $'x\\e]0;pwned\\a' hi`: the spinner names the model visibly, the
    reply's escapes are shown; a pipe gets the reply as it came."""
    server.enqueue({"content": f"reply {HOSTILE} end", "delay": 0.3})
    env = {**koog_env, "KOOG_MARKDOWN": markdown}
    shown = on_terminal(env, "chat", "-s", "spin", "-m", "x\x1b]0;pwned\x07", "hi")
    assert b"waiting for x^[]0;pwned^G" in shown.raw  # drawn, visibly
    assert "reply title^[]0;pwned" in shown.text and "clear^[[2J" in shown.text
    server.enqueue({"content": f"reply {HOSTILE} end"})
    assert piped(env, "chat", "-s", "pipe", "hi") == f"reply {HOSTILE} end\n".encode()


def test_json_writes_c1_controls_escaped(run_koog: Run, server: FakeOpenAIServer) -> None:
    server.enqueue({"content": f"reply {HOSTILE}"}, {"content": f"again {HOSTILE}"})
    assert run_koog("chat", "-s", "j", "hi").returncode == 0
    one = run_koog("chat", "-s", "j", "--json", "more")
    outputs = {
        "chat --json": one.stdout,
        "show --json": run_koog("history", "show", "-s", "j", "--json").stdout,
        "show jsonl": run_koog("history", "show", "-s", "j", "--format", "jsonl").stdout,
        "export": run_koog("history", "export", "-s", "j").stdout,
    }
    for name, text in outputs.items():
        assert "\\u009b31m" in text, name
        clean(text)
    assert json.loads(one.stdout)["reply"] == f"again {HOSTILE}"
    lines = outputs["show jsonl"].splitlines()
    assert [json.loads(line)["content"] for line in lines][-1] == f"again {HOSTILE}"


def test_why_and_checkpoint_list_show_a_file_name_a_model_chose(
    koog_env: dict[str, str], server: FakeOpenAIServer, isolated: Path, run_koog: Run
) -> None:
    """An agent's Write names a file whose name sets the title, writes the clipboard and
    clears the screen: `why` and `checkpoint list` name it visibly, to a terminal or not."""
    work = isolated / "work"
    work.mkdir()
    _agent_writes(koog_env, server, work / NAME)
    for args in (("why", "-s", "claude-e1"), ("checkpoint", "list", "-s", "claude-e1")):
        assert SHOWN_NAME in on_terminal(koog_env, *args).text, args
        listed = run_koog(*args)
        clean(listed.stdout)
        assert SHOWN_NAME in listed.stdout, args
    points = run_koog("checkpoint", "list", "-s", "claude-e1", "--json").stdout
    assert "\\u009b31mb.txt" in points and json.loads(points)[0]["files"] == [str(work / NAME)]


def _agent_writes(env: dict[str, str], server: FakeOpenAIServer, path: Path) -> None:
    """Claude Code through koog serve: the model calls Write on `path`, the agent writes
    it and sends the result back."""
    call = {"id": "toolu_e1", "name": "Write", "arguments": json.dumps({"file_path": str(path)})}
    server.enqueue({"tool_calls": [call]}, {"content": "Wrote it."})
    tool = {"name": "Write", "input_schema": {"type": "object", "properties": {}}}
    body: dict[str, object] = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "system": [{"type": "text", "text": f" - Primary working directory: {path.parent}"}],
        "tools": [tool],
    }
    headers = {"anthropic-version": "2023-06-01", "x-claude-code-session-id": "e1"}
    served = KoogServe(env).start()
    try:
        url = served.url.removesuffix("/v1") + "/v1/messages"
        said: list[dict[str, object]] = [{"role": "user", "content": "write it"}]
        status, reply = http("POST", url, {**body, "messages": said}, headers)
        assert status == 200, reply
        path.write_text("new\n")
        result = {"type": "tool_result", "tool_use_id": reply["content"][-1]["id"], "content": "ok"}
        said += [{"role": "assistant", "content": reply["content"]}]
        said += [{"role": "user", "content": [result]}]
        status, reply = http("POST", url, {**body, "messages": said}, headers)
        assert status == 200, reply
    finally:
        assert served.stop() == 0
