"""`koog why` (SPEC §5.17): what shaped a reply, recorded with it and unchanged by later
turns and compression; on both backends."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.openai_server import FakeOpenAIServer

pytestmark = pytest.mark.e2e

Run = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def run_koog(
    forked_koog: Callable[..., subprocess.CompletedProcess[str]], tmp_path: Path
) -> Callable[..., subprocess.CompletedProcess[str]]:
    """koog with retrieval on; `windowed=True` adds a window of 3 messages (set up after
    the session grew, so the window has something to cut besides the summary)."""
    common = (
        "[llm]\ncontext_tokens = 100000\n"
        '[long_term_memory.retrieval]\nenabled = true\nmode = "fulltext"\n'
    )
    plain, windowed = tmp_path / "plain.toml", tmp_path / "windowed.toml"
    plain.write_text(common)
    windowed.write_text(common + '[[chat_memory.preprocessors]]\ntype = "window"\nsize = 3\n')

    def run(*args: str, windowed_config: bool = False) -> subprocess.CompletedProcess[str]:
        return forked_koog(*args, env={"KOOG_CONFIG": str(windowed if windowed_config else plain)})

    return run


def _ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_why_names_the_cut_the_summary_and_the_records_and_keeps_saying_it(
    backend: str, run_koog: Run, server: FakeOpenAIServer
) -> None:
    server.responder = _brief_summaries
    records = [
        _ok(run_koog("memory", "add", text)).strip()
        for text in ("the zeppelin hangar is north", "zeppelin lift comes from helium")
    ]
    for word in ("alpha", "beta", "gamma"):
        _ok(run_koog("chat", "-s", "w", word))
    _ok(run_koog("compress", "-s", "w", "--strategy", "whole"))
    for word in ("delta",):
        _ok(run_koog("chat", "-s", "w", word))
    history = json.loads(_ok(run_koog("history", "show", "-s", "w", "--json")))
    [summary] = [m for m in history if m.get("meta", {}).get("kind") == "summary"]
    _ok(run_koog("chat", "-s", "w", "where is the zeppelin", windowed_config=True))

    shown = json.loads(_ok(run_koog("why", "-s", "w", "--json")))
    turn = shown["turn"]
    assert (turn, shown["turns"]) == (5, 5)
    [window] = shown["preprocessors"]
    assert window["kind"] == "window"
    cut = window["before"] - window["after"]
    assert cut > 0 and len(window["removed"]) == min(cut, 5)
    stored_ids = {m["id"] for m in history}
    assert set(window["removed"]) <= stored_ids  # it names messages of the history it cut
    assert shown["summary"]["id"] == summary["id"]
    assert shown["summary"]["strategy"] == "whole"
    got = {r["id"]: r["score"] for r in shown["memory"]["records"]}
    assert set(got) == set(records) and all(s > 0 for s in got.values())
    assert shown["memory"]["mode"] == "fulltext" and shown["memory"]["namespace"] == "default"
    assert shown["limit"] == 100000 and 0 < shown["estimate"] < 100000
    words = _ok(run_koog("why", "-s", "w"))
    assert f"summary in effect: {summary['id'][:8]} (summary, whole" in words
    assert "window removed" in words and "2 records from default by fulltext" in words

    _ok(run_koog("chat", "-s", "w", "one more"))
    _ok(run_koog("compress", "-s", "w", "--strategy", "whole"))
    again = json.loads(_ok(run_koog("why", "-s", "w", "--turn", str(turn), "--json")))
    assert {**again, "turns": None} == {**shown, "turns": None}
    assert again["turns"] == 6

    missing = run_koog("why", "-s", "w", "--turn", "9")
    assert missing.returncode == 2 and "has 6 turns" in missing.stderr
    nosuch = run_koog("why", "-s", "nosuch")
    assert nosuch.returncode == 2 and "no session named 'nosuch'" in nosuch.stderr


def _brief_summaries(body: dict[str, Any]) -> dict[str, Any]:
    """A summary shorter than what it summarises; anything else the echo."""
    last = str(body["messages"][-1]["content"])
    if "conversation_to_summarize" in last:
        return {"content": "They said three words."}
    return {"content": f"echo: {last}"}


def test_after_a_rollback_why_names_the_reply_in_effect_with_rollbacks_turn_numbers(
    backend: str, run_koog: Run, server: FakeOpenAIServer
) -> None:
    """Turns are numbered one way (the transcript's): rollback says which turn it undoes,
    `why` then explains the reply in effect, and `why --turn` of the undone turn says it
    was rolled back. A compression in between changes no number."""
    from tests.fakes.summaries import short_summaries

    server.responder = short_summaries
    for word in ("one", "two", "three", "four"):
        _ok(run_koog("chat", "-s", "rb", f"turn {word}"))
    _ok(run_koog("compress", "-s", "rb", "--strategy", "whole"))
    _ok(run_koog("chat", "-s", "rb", "turn five"))
    undone = run_koog("rollback", "-s", "rb", "--latest", "--yes")
    assert undone.returncode == 0, undone.stderr
    assert "turn 5 " in undone.stdout + undone.stderr, undone.stdout + undone.stderr
    shown = _ok(run_koog("why", "-s", "rb"))
    assert shown.startswith("turn 4 of 5 in rb"), shown
    assert "rolled back" not in shown
    gone = _ok(run_koog("why", "-s", "rb", "--turn", "5"))
    assert gone.startswith("turn 5 of 5 in rb"), gone
    assert "rolled back: a rollback at" in gone and "it is not in effect" in gone
    as_json = json.loads(_ok(run_koog("why", "-s", "rb", "--turn", "5", "--json")))
    assert as_json["rolled_back"] and as_json["turn"] == 5
    assert json.loads(_ok(run_koog("why", "-s", "rb", "--json")))["rolled_back"] is None
    # The next turn is turn 6 everywhere; the search numbering agrees.
    _ok(run_koog("chat", "-s", "rb", "turn six"))
    assert _ok(run_koog("why", "-s", "rb")).startswith("turn 6 of 6 in rb")
    found = json.loads(_ok(run_koog("history", "search", "six", "-s", "rb", "--json")))
    assert {f["turn"] for f in found} == {6}
    undone = run_koog("rollback", "-s", "rb", "--latest", "--yes")
    assert "turn 6 " in undone.stdout + undone.stderr


SHOUT = '''
def shout(text: str) -> str:
    """Upper-case text."""
    return text.upper()
'''


def test_a_cancelled_turn_is_never_explained_as_answered(
    tmp_path: Path, koog_env: dict[str, str], server: FakeOpenAIServer
) -> None:
    """Turn 2 is cancelled after a tool round (its tool call's request is recorded), turn
    3 while its reply streams: `why` explains turn 1, the last answered, and says that
    the later ones were cancelled; `--turn 2` says so too."""
    import signal

    from tests.conftest import KOOG_BIN
    from tests.support import tool_logs

    env = {
        **koog_env,
        **tool_logs.tool_env(
            tmp_path, "why_tools", SHOUT, '[[tools]]\ncallable = "why_tools:shout"\n'
        ),
    }

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [KOOG_BIN, *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=30,
            stdin=subprocess.DEVNULL,
        )

    def cancelled(prompt: str) -> None:
        child = subprocess.Popen(
            [KOOG_BIN, "chat", "-s", "c", prompt],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        assert child.stdout is not None
        child.stdout.read(5)  # the reply has started
        child.send_signal(signal.SIGINT)
        child.stdout.read()
        assert child.wait(20) == 130

    slow = {"chunks": [f"chunk{i} " for i in range(200)], "chunk_delay": 0.02}
    server.enqueue({"content": "the first answer"})
    assert run("chat", "-s", "c", "first").returncode == 0
    call = {"id": "s1", "name": "shout", "arguments": {"text": "hey"}}
    server.enqueue({"tool_calls": [call]}, slow)
    cancelled("second, with a tool")
    server.enqueue(slow)
    cancelled("third")
    shown = json.loads(_ok(run("why", "-s", "c", "--json")))
    assert (shown["turn"], shown["turns"]) == (1, 3)
    assert shown["cancelled_turns"] == [2, 3]
    words = _ok(run("why", "-s", "c"))
    assert words.startswith("turn 1 of 3 in c"), words
    assert "turns 2-3 were cancelled before their replies; there is nothing to explain" in words
    second = run("why", "-s", "c", "--turn", "2")
    assert second.returncode == 2
    assert "turn 2 of 'c' was cancelled before its reply" in second.stderr, second.stderr


def test_failed_turns_have_no_number(
    run_koog: Callable[..., subprocess.CompletedProcess[str]], server: FakeOpenAIServer
) -> None:
    """Issue 52: turns that failed (the server refused them) counted, so three answered
    turns read `turn 5 of 5` and `--turn 2` explained nothing; now a failed turn's words
    stay in the transcript with no number, and turns count the answered ones."""
    for text in ("one", "two", "three", "four", "five"):
        if text in ("two", "four"):
            server.enqueue({"status": 400, "message": "the server refuses this"})
        done = run_koog("chat", "-s", "n", text)
        assert done.returncode == (1 if text in ("two", "four") else 0), done.stderr
    last = json.loads(run_koog("why", "-s", "n", "--json").stdout)
    assert (last["turn"], last["turns"]) == (3, 3), last
    second = json.loads(run_koog("why", "-s", "n", "--turn", "2", "--json").stdout)
    shown = json.loads(run_koog("history", "show", "-s", "n", "--json").stdout)
    [three] = [m for m in shown if m["content"] == "echo: three"]
    assert second["reply"]["id"] == three["id"], second
    [hit] = json.loads(run_koog("history", "search", "four", "--json").stdout)
    assert hit["turn"] is None, hit
    assert "failed turn" in run_koog("history", "search", "four").stdout
    assert "turn 3" in run_koog("history", "search", "five").stdout
