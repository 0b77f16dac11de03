"""End-to-end compression on the real binary against the local test server."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import forked_run_koog, snapshot
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.summaries import is_summary_request, summarised

pytestmark = pytest.mark.e2e


# koog processes forked from the zygote (tests/conftest.py: forked_run_koog).
run_koog = pytest.fixture(name="run_koog")(forked_run_koog)


Run = Callable[..., subprocess.CompletedProcess[str]]


def summarizing(body: dict[str, Any]) -> dict[str, Any]:
    """Summaries name the first message they summarise; anything else is echoed."""
    messages = body["messages"]
    if is_summary_request(messages[-1]["content"]):
        return {"content": f"summary of: {summarised(messages[-1]['content'])[0]}"}
    return {"content": f"echo: {messages[-1]['content']}"}


def history(run_koog: Run, session: str, env: dict[str, str] | None = None) -> list[dict[str, Any]]:
    shown = run_koog("history", "show", "-s", session, "--format", "json", env=env)
    return json.loads(shown.stdout)


# Long enough that a summary or a fact is shorter than what it replaces (a compression
# that would lengthen the history is refused).
ASIDE = ", asked at some length about the deploys, the rollbacks and who is on call"


def five_turns(
    run_koog: Run, session: str, env: dict[str, str] | None = None, aside: str = ""
) -> None:
    for i in range(5):
        assert run_koog("chat", "-s", session, f"question {i}{aside}", env=env).returncode == 0


def summary_requests(server: FakeOpenAIServer) -> list[list[dict[str, Any]]]:
    return [
        r["messages"]
        for r in server.chat_requests
        if is_summary_request(r["messages"][-1]["content"])
    ]


def test_whole_then_rollback_latest(run_koog: Run, server: FakeOpenAIServer) -> None:
    server.responder = summarizing
    five_turns(run_koog, "w")
    before = history(run_koog, "w")
    result = run_koog("compress", "-s", "w", "--strategy", "whole", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    after = history(run_koog, "w")
    assert len(after) < len(before) and report["after"]["message_count"] == len(after) == 3
    assert after[0] == before[0] and after[0]["role"] == "system"
    assert after[1] == before[1] and after[1]["content"] == "question 0"
    assert after[2]["meta"]["kind"] == "summary" and after[2]["content"].startswith("summary of")
    assert report["requests"] == 1 and report["after"]["tokens"] < report["before"]["tokens"]
    assert report["checkpoint"]
    undo = run_koog("rollback", "-s", "w", "--latest", "--yes")
    assert undo.returncode == 0, undo.stderr
    assert history(run_koog, "w") == before


def test_dry_run_writes_nothing(run_koog: Run, server: FakeOpenAIServer, data_dir: Path) -> None:
    server.responder = summarizing
    five_turns(run_koog, "d")
    before = snapshot(data_dir)
    result = run_koog("compress", "-s", "d", "--dry-run")
    assert result.returncode == 0
    assert "summary of" in result.stdout and "would compress d: 11 → 3 messages" in result.stderr
    assert snapshot(data_dir) == before


@pytest.fixture
def no_system(tmp_path: Path) -> dict[str, str]:
    config = tmp_path / "nosys.toml"
    config.write_text('[llm]\nsystem_prompt = ""\n')
    return {"KOOG_CONFIG": str(config)}


def test_chunked_one_request_and_summary_per_chunk(
    run_koog: Run, server: FakeOpenAIServer, no_system: dict[str, str]
) -> None:
    server.responder = summarizing
    five_turns(run_koog, "c", no_system)
    assert len(history(run_koog, "c", no_system)) == 10
    result = run_koog(
        "compress", "-s", "c", "--strategy", "chunked", "--chunk-size", "2", "--json", env=no_system
    )
    assert json.loads(result.stdout)["requests"] == 5
    chunks = sorted(summarised(r[-1]["content"])[0] for r in summary_requests(server))
    assert chunks == [f"question {i}" for i in range(5)]
    after = history(run_koog, "c", no_system)
    assert [m["content"] for m in after] == ["question 0"] + [
        f"summary of: question {i}" for i in range(5)
    ]
    assert all(m["meta"]["kind"] == "summary" for m in after[1:])


def test_last_n_sends_only_the_tail(run_koog: Run, server: FakeOpenAIServer) -> None:
    server.responder = summarizing
    five_turns(run_koog, "n")
    before = history(run_koog, "n")
    assert run_koog("compress", "-s", "n", "--strategy", "last-n", "--last", "4").returncode == 0
    [sent] = summary_requests(server)
    assert summarised(sent[-1]["content"]) == [before[0]["content"]] + [
        m["content"] for m in before[-4:]
    ]


def test_facts_one_request_per_concept_and_nothing_found_changes_nothing(
    run_koog: Run, server: FakeOpenAIServer, data_dir: Path
) -> None:
    five_turns(run_koog, "f", aside=ASIDE)
    path = data_dir / "sessions" / "f.json"
    before = path.read_bytes()
    server.reset()
    server.responder = lambda body: {"content": "I found nothing worth keeping"}
    result = run_koog(
        "compress",
        "-s",
        "f",
        "--strategy",
        "facts",
        "--concept",
        "topic:the subject",
        "--concept",
        "people:who takes part:multiple",
        "--json",
    )
    assert result.returncode == 0, result.stderr
    # Each concept asked once and re-asked compression.retries (3) times, then given up.
    assert len(server.chat_requests) == 8 and json.loads(result.stdout)["changed"] is False
    prompts = sorted({r["messages"][0]["content"] for r in server.chat_requests})
    assert '"people"' in prompts[0] and '"topic"' in prompts[1]
    assert "no valid answer for facts_about_topic after 4 requests" in result.stderr
    assert path.read_bytes() == before
    server.responder = lambda body: (
        {"content": '{"fact": "They discussed questions 0 to 4"}'}
        if '"topic"' in body["messages"][0]["content"]
        else {"content": "{}"}
    )
    assert (
        run_koog(
            "compress",
            "-s",
            "f",
            "--strategy",
            "facts",
            "--concept",
            "topic:the subject",
            "--concept",
            "people:who:multiple",
        ).returncode
        == 0
    )
    last = history(run_koog, "f")[-1]
    assert last["meta"]["kind"] == "facts" and "They discussed questions 0 to 4" in last["content"]


def test_failed_chunk_aborts_everything(
    run_koog: Run, server: FakeOpenAIServer, no_system: dict[str, str], data_dir: Path
) -> None:
    server.responder = summarizing
    five_turns(run_koog, "x", no_system)
    path = data_dir / "sessions" / "x.json"
    before = path.read_bytes()
    checkpoints_before = snapshot(data_dir / "checkpoints")

    def third_fails(body: dict[str, Any]) -> dict[str, Any]:
        if summarised(body["messages"][-1]["content"])[0] == "question 2":
            return {"status": 500, "message": "chunk three exploded"}
        return summarizing(body)

    server.responder = third_fails
    result = run_koog(
        "compress", "-s", "x", "--strategy", "chunked", "--chunk-size", "2", env=no_system
    )
    assert result.returncode == 1
    assert "chunk three exploded" in result.stderr and "Traceback" not in result.stderr
    assert path.read_bytes() == before
    assert snapshot(data_dir / "checkpoints") == checkpoints_before


@pytest.mark.parametrize("flag, survives", [([], True), (["--no-preserve-memory"], False)])
def test_memory_messages_survive_compression(
    run_koog: Run, server: FakeOpenAIServer, tmp_path: Path, flag: list[str], survives: bool
) -> None:
    server.responder = summarizing
    five_turns(run_koog, "m")
    pinned = {
        "id": "mem1",
        "role": "user",
        "created_at": "2026-11-29T12:00:00Z",
        "content": "Here are the relevant facts from memory about [deploy](how we ship...):\n"
        "- [deploy]: blue-green\n",
    }
    doc = tmp_path / "pin.json"
    doc.write_text(json.dumps([pinned]))
    assert run_koog("history", "import", "-s", "m", str(doc)).returncode == 0
    assert run_koog("compress", "-s", "m", *flag).returncode == 0
    ids = [m["id"] for m in history(run_koog, "m")]
    assert ("mem1" in ids) is survives


def test_auto_compression_before_the_model_request(
    run_koog: Run, server: FakeOpenAIServer, tmp_path: Path
) -> None:
    server.responder = summarizing
    config = tmp_path / "auto.toml"
    config.write_text("[compression]\nauto_after_messages = 3\n")
    env = {"KOOG_CONFIG": str(config)}
    for i in range(2):
        run_koog("chat", "-s", "a", f"q{i}", env=env)
    third = run_koog("chat", "-s", "a", "q2", env=env)
    assert "compressed the history (whole, 5 → 3 messages): 4 messages, over " in third.stderr
    listed = run_koog("checkpoint", "list", "-s", "a", "--json", env=env)
    reasons = [c["reason"] for c in json.loads(listed.stdout)]
    assert reasons[:2] == ["turn", "compress"]  # newest first: the turn's, then the compression's
    asked = server.chat_requests[-1]["messages"]
    assert [m["content"][:10] for m in asked] == ["You are a ", "q0", "summary of", "q2"]
    stored = history(run_koog, "a", env)
    assert [m["content"][:10] for m in stored] == [
        "You are a ",
        "q0",
        "summary of",
        "q2",
        "echo: q2",
    ]


OVERFLOW = {
    "status": 400,
    "type": "invalid_request_error",
    "code": "context_length_exceeded",
    "message": "This model's maximum context length is 8192 tokens. However, your messages "
    "resulted in 9120 tokens. Please reduce the length of the messages.",
}


def test_overflow_is_compressed_retried_and_undone_in_two_steps(
    run_koog: Run, server: FakeOpenAIServer, data_dir: Path
) -> None:
    five_turns(run_koog, "o")
    before = history(run_koog, "o")
    server.enqueue(OVERFLOW, {"content": "Summary of five questions"}, {"content": "the answer"})
    turn = run_koog("chat", "-s", "o", "next question")
    assert turn.returncode == 0, turn.stderr
    assert turn.stdout == "the answer\n"
    assert "maximum context length is 8192 tokens" in turn.stderr
    assert "Compressing the history and sending the turn again" in turn.stderr
    assert is_summary_request(server.chat_requests[-2]["messages"][-1]["content"])
    after = [m["content"] for m in history(run_koog, "o")]
    summary = "Summary of five questions"
    assert after == [before[0]["content"], "question 0", summary, "next question", "the answer"]
    listed = json.loads(run_koog("checkpoint", "list", "-s", "o", "--json").stdout)
    assert [c["reason"] for c in listed[:2]] == ["turn", "compress"]
    shown = run_koog("checkpoint", "list", "-s", "o").stdout
    assert f"{listed[1]['id']}  " in shown and "before compress" in shown
    assert run_koog("rollback", "-s", "o", "--latest", "--yes").returncode == 0
    assert [m["content"] for m in history(run_koog, "o")] == after[:3]
    assert run_koog("rollback", "-s", "o", listed[1]["id"], "--yes").returncode == 0
    assert history(run_koog, "o") == before


def test_overflow_without_automatic_compression_names_the_fix(
    run_koog: Run, server: FakeOpenAIServer, data_dir: Path, tmp_path: Path
) -> None:
    config = tmp_path / "off.toml"
    config.write_text("[compression]\nauto_at = 0\n")
    env = {"KOOG_CONFIG": str(config)}
    assert run_koog("chat", "-s", "f", "first", env=env).returncode == 0
    path = data_dir / "sessions" / "f.json"
    before = path.read_bytes()
    points = run_koog("checkpoint", "list", "-s", "f", "--json", env=env).stdout
    server.enqueue(OVERFLOW)
    turn = run_koog("chat", "-s", "f", "second", env=env)
    assert turn.returncode == 1
    assert "maximum context length is 8192 tokens" in turn.stderr
    assert "koog's estimate: ~" in turn.stderr and "koog compress -s f" in turn.stderr
    assert "Traceback" not in turn.stderr and len(turn.stderr.strip().splitlines()) <= 2
    assert path.read_bytes() == before
    assert run_koog("checkpoint", "list", "-s", "f", "--json", env=env).stdout == points
    assert len(server.chat_requests) == 2  # no compression, no second try


def test_token_window_and_history_show_tokens(
    run_koog: Run, server: FakeOpenAIServer, tmp_path: Path
) -> None:
    from koogcli.core import tokens
    from koogcli.core.messages import Message

    config = tmp_path / "budget.toml"
    config.write_text(
        "[llm]\ncontext_tokens = 4000\n"
        '[[chat_memory.preprocessors]]\ntype = "token_window"\nmax_tokens = 80\n'
    )
    env = {"KOOG_CONFIG": str(config)}
    for i in range(4):
        said = run_koog("chat", "-s", "t", f"message {i} " + "word " * 12, env=env)
        assert said.returncode == 0, said.stderr
    stored = [Message.from_dict(m) for m in history(run_koog, "t", env)]
    assert stored[0].role == "system"  # kept whatever the budget
    assert sum(tokens.message_tokens(m) for m in stored) <= 80
    assert stored[-1].text.startswith("echo: message 3")
    shown = run_koog("history", "show", "-s", "t", "--tokens", env=env)
    lines = shown.stdout.splitlines()
    assert all(re.match(r"\[\w+ ~\d+ tokens\] ", line) for line in lines[:-1]), lines
    assert re.fullmatch(r"next request: ~\d+ of 4,000 tokens \(\d+%\) for gpt-4o-mini", lines[-1])
    as_json = run_koog("history", "show", "-s", "t", "--tokens", "--json", env=env)
    assert all(isinstance(m["tokens"], int) for m in json.loads(as_json.stdout))
    assert "next request: ~" in as_json.stderr


def test_facts_step_down_when_the_server_refuses_json_schema_with_a_500(
    run_koog: Run, server: FakeOpenAIServer
) -> None:
    """llama.cpp's validation errors are HTTP 500s: one naming response_format is a
    refusal all the same, and the facts come through json_object."""
    for i in range(5):
        text = f"question {i}: how do we deploy the billing service on Fridays, step by step?"
        assert run_koog("chat", "-s", "f5", text).returncode == 0
    server.use_profile("llamacpp")
    server.reject_response_formats = {"json_schema"}
    server.responder = lambda body: {"content": '{"fact": "Billing deploys on Fridays"}'}
    done = run_koog("compress", "-s", "f5", "--strategy", "facts", "--concept", "topic:the subject")
    assert done.returncode == 0, done.stderr
    kinds = [(r.get("response_format") or {}).get("type") for r in server.chat_requests[-2:]]
    assert kinds == ["json_schema", "json_object"]
    assert "Billing deploys on Fridays" in history(run_koog, "f5")[-1]["content"]


def test_a_compression_that_would_lengthen_the_history_changes_nothing(
    run_koog: Run, server: FakeOpenAIServer, data_dir: Path
) -> None:
    five_turns(run_koog, "grow")
    before = (data_dir / "sessions" / "grow.json").read_bytes()
    server.responder = lambda body: {"content": "a summary far longer than it should be " * 40}
    done = run_koog("compress", "-s", "grow")
    assert done.returncode == 1
    assert "would make the history longer" in done.stderr and "nothing was changed" in done.stderr
    assert (data_dir / "sessions" / "grow.json").read_bytes() == before


@pytest.mark.parametrize(
    "answer",
    [
        {"content": ""},
        {"content": "", "tool_calls": [{"id": "t", "name": "lookup", "arguments": {"q": 1}}]},
        {"content": "The user asked about deplo", "finish_reason": "length"},
    ],
    ids=["no-text", "tool-call", "cut-by-length"],
)
def test_a_summary_that_is_not_a_whole_text_changes_nothing(
    run_koog: Run, server: FakeOpenAIServer, data_dir: Path, answer: dict[str, Any]
) -> None:
    """SPEC §5.19: whole, chunked and automatic compression alike; the automatic one says
    so and the person's turn goes on uncompressed (issue 52: it failed the turn, so a
    session a small model could not summarise was stuck)."""
    five_turns(run_koog, "ns", aside=ASIDE)
    before = snapshot(data_dir / "sessions")
    for strategy in ("whole", "chunked"):
        server.enqueue(*[answer] * 6)  # every chunk, and each once more after a cut
        done = run_koog("compress", "-s", "ns", "--strategy", strategy, "--chunk-size", "4")
        assert done.returncode == 1, (strategy, done.stderr)
        assert "the summary request was answered with" in done.stderr
        assert snapshot(data_dir / "sessions") == before, strategy
        server.reset()
    config = data_dir.parent / "auto.toml"
    config.write_text("[compression]\nauto_after_messages = 4\n")
    server.enqueue(answer, answer)
    turn = run_koog("chat", "-s", "ns", "one more", env={"KOOG_CONFIG": str(config)})
    assert turn.returncode == 0 and "the summary request was answered with" in turn.stderr
    assert "the turn goes on uncompressed" in turn.stderr
    stored = history(run_koog, "ns")
    assert [m["role"] for m in stored[-2:]] == ["user", "assistant"]
    assert stored[-2]["content"] == "one more"
    assert not any(m.get("meta", {}).get("kind") == "summary" for m in stored)


def test_a_summary_cut_at_the_limit_is_asked_for_once_more_shorter(
    run_koog: Run, server: FakeOpenAIServer
) -> None:
    five_turns(run_koog, "again", aside=ASIDE)
    server.enqueue(
        {"content": "The user asked about deplo", "finish_reason": "length"},
        {"content": "They asked five questions about deploys."},
    )
    done = run_koog("compress", "-s", "again", "--strategy", "whole")
    assert done.returncode == 0, done.stderr
    asked = [r["messages"][-1]["content"] for r in server.chat_requests[-2:]]
    first, second = (int(t.rsplit("at most ", 1)[1].split()[0]) for t in asked)
    assert second < first  # the second request asks for a shorter summary
    assert history(run_koog, "again")[-1]["content"] == "They asked five questions about deploys."


def test_a_single_summary_request_shows_progress_on_a_terminal_only(
    run_koog: Run, server: FakeOpenAIServer, koog_env: dict[str, str]
) -> None:
    """`whole` makes one request: on a terminal a spinner with the seconds runs while it
    does (and is gone after); through pipes nothing but the report is printed."""
    from tests.conftest import KOOG_BIN
    from tests.support.terminal import Terminal

    def slow_summaries(body: dict[str, Any]) -> dict[str, Any]:
        return {
            **summarizing(body),
            "delay": 1.5 if is_summary_request(body["messages"][-1]["content"]) else 0,
        }

    server.responder = slow_summaries
    five_turns(run_koog, "tty", aside=ASIDE)
    five_turns(run_koog, "pipe", aside=ASIDE)
    terminal = Terminal([KOOG_BIN, "compress", "-s", "tty", "--strategy", "whole"], koog_env)
    try:
        terminal.wait_for("summarising")
        terminal.wait_for("0:00:01")  # the seconds go on while the request runs
        assert terminal.close() == 0
    finally:
        if terminal.child.poll() is None:
            terminal.child.kill()
    assert "summarising" not in terminal.text  # gone once the summary is in
    assert "compressed tty" in terminal.text, terminal.text
    piped = run_koog("compress", "-s", "pipe", "--strategy", "whole")
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout == ""
    [line] = piped.stderr.splitlines()  # the report alone, no spinner frames
    assert line.startswith("compressed pipe:") and "\x1b" not in piped.stderr, piped.stderr
