"""The CLI in-process (CliRunner): history, config and the error boundary."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.chat_model import FakeChatModel


def chat(koog: Callable[..., Any], session: str, text: str) -> None:
    result = koog("chat", "-s", session, text)
    assert result.exit_code == 0, result.stderr


def test_one_shot_prints_only_the_reply(koog: Callable[..., Any]) -> None:
    result = koog("chat", "-s", "a", "hello")
    assert result.exit_code == 0
    assert result.stdout == "echo: hello\n"


def test_message_and_piped_input_are_joined(
    koog: Callable[..., Any], fake_model: FakeChatModel
) -> None:
    result = koog("chat", "-s", "a", "summarise:", input="line one\nline two\n")
    assert result.exit_code == 0
    assert fake_model.requests[0].messages[-1].text == "summarise:\n\nline one\nline two"


def test_empty_message_is_a_usage_error(koog: Callable[..., Any]) -> None:
    result = koog("chat", "-s", "a", input="")
    assert result.exit_code == 2
    assert "nothing to send" in result.stderr


def test_history_show_formats(koog: Callable[..., Any]) -> None:
    chat(koog, "h", "first")
    chat(koog, "h", "second")
    text = koog("history", "show", "-s", "h", "--last", "2")
    assert text.exit_code == 0
    assert text.stdout == "[user] second\n[assistant] echo: second\n"
    parsed = json.loads(koog("history", "show", "-s", "h", "--format", "json").stdout)
    assert [m["role"] for m in parsed] == ["system", "user", "assistant", "user", "assistant"]
    lines = koog("history", "show", "-s", "h", "--format", "jsonl").stdout.splitlines()
    assert len(lines) == 5 and json.loads(lines[1])["content"] == "first"
    md = koog("history", "show", "-s", "h", "--format", "markdown", "--last", "1").stdout
    assert md == "### assistant\n\necho: second\n"
    bad = koog("history", "show", "-s", "h", "--format", "xml")
    assert bad.exit_code == 2 and "unknown --format 'xml'" in bad.stderr


def test_unknown_session_is_exit_2(koog: Callable[..., Any]) -> None:
    result = koog("history", "show", "-s", "nope")
    assert result.exit_code == 2
    assert result.stderr.startswith("koog: error: no session named 'nope'")


def test_clear_requires_yes_without_a_terminal(koog: Callable[..., Any]) -> None:
    chat(koog, "c", "keep me")
    refused = koog("history", "clear", "-s", "c")
    assert refused.exit_code == 2 and "pass --yes" in refused.stderr
    assert "keep me" in koog("history", "show", "-s", "c").stdout
    assert koog("history", "clear", "-s", "c", "--yes").exit_code == 0
    assert koog("history", "show", "-s", "c").stdout == ""
    transcript = koog("history", "show", "-s", "c", "--transcript").stdout
    assert "keep me" in transcript


def test_delete_removes_history_and_transcript(koog: Callable[..., Any], data_dir: Path) -> None:
    chat(koog, "d", "x")
    assert koog("history", "delete", "-s", "d").exit_code == 2
    assert koog("history", "delete", "-s", "d", "--yes").exit_code == 0
    assert not (data_dir / "sessions" / "d.json").exists()
    assert not (data_dir / "transcripts" / "d.jsonl").exists()
    assert not (data_dir / "checkpoints" / "d").exists()  # its objects and their index too
    assert koog("history", "show", "-s", "d").exit_code == 2


def test_list_newest_first_with_counts_and_previews(koog: Callable[..., Any]) -> None:
    chat(koog, "one", "x")
    chat(koog, "two", "y\nmore lines")
    listed = json.loads(koog("history", "list", "--json").stdout)
    assert [(s["session"], s["message_count"], s["preview"]) for s in listed] == [
        ("two", 3, "y\nmore lines"),
        ("one", 3, "x"),
    ]
    assert listed[0]["updated_at"].endswith("Z")
    text = koog("history", "list").stdout.splitlines()
    assert text[0].split() == ["SESSION", "MESSAGES", "LAST", "USED", "FIRST", "MESSAGE"]
    assert text[1].startswith("two") and text[1].endswith("y more lines")


def test_export_import_round_trip(koog: Callable[..., Any], tmp_path: Path) -> None:
    chat(koog, "src", "remember this")
    out = tmp_path / "export.json"
    assert koog("history", "export", "-s", "src", "-o", str(out)).exit_code == 0
    result = koog("history", "import", "-s", "dst", str(out))
    assert result.exit_code == 0 and "imported 3 messages" in result.stderr
    again = koog("history", "import", "-s", "dst", str(out))
    assert "imported 0 messages" in again.stderr and "3 already present" in again.stderr
    src = json.loads(koog("history", "show", "-s", "src", "--format", "json").stdout)
    dst = json.loads(koog("history", "show", "-s", "dst", "--format", "json").stdout)
    assert src == dst
    stdin = koog("history", "import", "-s", "dst2", "-", input=out.read_text())
    assert stdin.exit_code == 0
    bad = koog("history", "import", "-s", "dst3", "-", input="{oops")
    assert bad.exit_code == 2 and "<stdin> is not valid JSON" in bad.stderr


def test_config_show_never_prints_the_key(
    koog: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-very-secret-value")
    monkeypatch.setenv("KOOG_MODEL", "env-model")
    for args in (("config", "show"), ("config", "show", "--json")):
        result = koog(*args)
        assert result.exit_code == 0
        assert "sk-very-secret-value" not in result.stdout + result.stderr
    info = json.loads(koog("config", "show", "--json").stdout)
    assert info["api_key"] == {"env": "OPENAI_API_KEY", "set": True}
    assert info["settings"]["llm"]["model"] == "env-model"
    assert info["sources"]["llm.model"] == "env KOOG_MODEL"
    assert "# llm.model <- env KOOG_MODEL" in koog("config", "show").stdout


def test_config_init_path_validate(
    koog: Callable[..., Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "cfg" / "config.toml"
    monkeypatch.setenv("KOOG_CONFIG", str(target))
    assert koog("config", "path").stdout.strip() == str(target)
    assert koog("config", "init").exit_code == 0
    assert target.stat().st_mode & 0o777 == 0o600
    assert koog("config", "init").exit_code == 2
    assert koog("config", "init", "--force").exit_code == 0
    ok = koog("config", "validate")
    assert ok.exit_code == 0 and ok.stderr.strip() == f"ok: {target}"
    bad = tmp_path / "bad.toml"
    bad.write_text("[chat]\nstrem = true\n")
    result = koog("config", "validate", str(bad))
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"koog: error: {bad}:2: unknown key 'chat.strem'",
        "koog: hint: did you mean 'stream'?",
    ]


def test_internal_errors_are_one_line_without_debug(
    koog: Callable[..., Any], fake_model: FakeChatModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KOOG_DEBUG")
    fake_model.enqueue(RuntimeError("a bug"))
    result = koog("chat", "-s", "a", "x")
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        "koog: internal error: RuntimeError: a bug",
        "koog: hint: rerun with KOOG_DEBUG=1 for a traceback, and report it",
    ]


def test_failed_compensation_exits_1_after_running_the_rest(
    koog: Callable[..., Any],
    fake_model: FakeChatModel,
    write_config: Callable[[str], Path],
    isolated: Path,
) -> None:
    from koogcli.core.messages import ToolCall
    from koogcli.core.model_port import Completion

    (isolated / "cli_undo_tools.py").write_text(
        "LOG = []\n"
        "def make(name: str) -> str:\n    '''Make.'''\n    return 'made ' + name\n"
        "def unmake(name: str) -> str:\n"
        "    if name == 'bad':\n        raise RuntimeError('stuck')\n    return 'unmade ' + name\n"
    )
    write_config(
        '[[tools]]\ncallable = "cli_undo_tools:make"\nrollback = "cli_undo_tools:unmake"\n'
    )
    assert koog("checkpoint", "create", "-s", "x").exit_code == 2  # no such session yet
    koog("chat", "-s", "x", "hello")
    checkpoint = koog("checkpoint", "create", "-s", "x").stdout.strip()
    fake_model.enqueue(
        Completion(
            "",
            (ToolCall("1", "make", '{"name": "good"}'), ToolCall("2", "make", '{"name": "bad"}')),
        ),
        "made both",
    )
    chat(koog, "x", "make two")
    result = koog("rollback", "-s", "x", checkpoint, "--yes")
    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    assert any(
        "not undone (its compensation failed): make(bad)" in line and "stuck" in line
        for line in lines
    )
    assert any("undone: make(good): unmade good" in line for line in lines)
    assert lines[-1].startswith("koog: error: 1 compensating tool call(s) failed")
    assert koog("history", "show", "-s", "x").stdout.endswith("[assistant] echo: hello\n")


def test_checkpoint_show_and_delete(koog: Callable[..., Any]) -> None:
    chat(koog, "d", "hello")
    made = koog("checkpoint", "create", "-s", "d", "--label", "keep", "--json")
    checkpoint = json.loads(made.stdout)["id"]
    shown = koog("checkpoint", "show", checkpoint[:5])
    assert shown.exit_code == 0 and "[user] hello" in shown.stdout and "keep" in shown.stdout
    assert koog("checkpoint", "delete", checkpoint).exit_code == 2
    assert koog("checkpoint", "delete", "keep", "--yes").exit_code == 0
    missing = koog("checkpoint", "show", checkpoint)
    assert missing.exit_code == 2 and f"no checkpoint '{checkpoint}'" in missing.stderr
    assert koog("rollback", "-s", "d").exit_code == 2  # neither ID nor --latest
