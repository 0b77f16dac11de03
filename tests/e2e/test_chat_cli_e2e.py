"""`koog chat` as llm / aichat / mods users type it: the prompt as arguments, -m for the model,
a new session per call unless told otherwise, --no-save, attachments, roles, usage."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import forked_run_koog, snapshot
from tests.fakes.openai_server import FakeOpenAIServer

pytestmark = pytest.mark.e2e


# koog processes forked from the zygote (tests/conftest.py: forked_run_koog).
run_koog = pytest.fixture(name="run_koog")(forked_run_koog)


Run = Callable[..., subprocess.CompletedProcess[str]]


def users(request: dict[str, object]) -> list[str]:
    messages = request["messages"]
    assert isinstance(messages, list)
    return [m["content"] for m in messages if m["role"] == "user"]


def test_prompt_arguments_and_model_option(run_koog: Run, server: FakeOpenAIServer) -> None:
    first = run_koog("chat", "-s", "a", "hi", "there")
    assert first.returncode == 0 and first.stdout == "echo: hi there\n"
    other = run_koog("chat", "-s", "a", "-m", "other-model", "hi")
    assert other.returncode == 0
    sent = server.chat_requests[-1]
    assert sent["model"] == "other-model" and users(sent)[-1] == "hi"


def test_a_new_session_per_call_unless_continued_or_configured(
    run_koog: Run, server: FakeOpenAIServer, tmp_path: Path
) -> None:
    for _ in range(3):
        made = run_koog("chat", input="q\n")
        # The new session's name, one line on stderr, terminal or not (stdout: the reply).
        assert made.returncode == 0 and len(made.stderr.splitlines()) == 1
        assert made.stderr.startswith("koog: session ") or made.stderr.startswith("session ")
    assert [len(users(r)) for r in server.chat_requests] == [1, 1, 1]
    listed = json.loads(run_koog("history", "list", "--json").stdout)
    assert len(listed) == 3 and all(s["message_count"] == 3 for s in listed)
    names = [s["session"] for s in listed]
    assert names == sorted(names, reverse=True)  # generated names sort by creation time
    again = run_koog("chat", "-c", "again")
    assert again.returncode == 0 and users(server.chat_requests[-1]) == ["q", "again"]
    config = tmp_path / "sticky.toml"
    config.write_text('[chat]\ndefault_session = "work"\n')
    for text in ("one", "two"):
        run_koog("chat", text, env={"KOOG_CONFIG": str(config)})
    assert users(server.chat_requests[-1]) == ["one", "two"]


def test_no_save_writes_nothing(run_koog: Run, server: FakeOpenAIServer, data_dir: Path) -> None:
    run_koog("chat", "-s", "kept", "remember me")
    before = snapshot(data_dir)
    with_session = run_koog("chat", "-s", "kept", "--no-save", "what did I say?")
    assert with_session.returncode == 0
    assert users(server.chat_requests[-1]) == ["remember me", "what did I say?"]
    assert run_koog("chat", "--no-save", "fresh").returncode == 0
    # --json names the session it read, and none when it made none (issue 52).
    fresh = json.loads(run_koog("chat", "--no-save", "--json", "fresh").stdout)
    kept = json.loads(run_koog("chat", "-s", "kept", "--no-save", "--json", "again").stdout)
    assert (fresh["session"], kept["session"]) == (None, "kept")
    assert snapshot(data_dir) == before


def test_attachments(run_koog: Run, server: FakeOpenAIServer, tmp_path: Path) -> None:
    notes = tmp_path / "notes.md"
    notes.write_text("# Notes\nship on Friday\n")
    result = run_koog(
        "chat", "-s", "at", "-a", str(notes), "-a", "-", "compare", input="from stdin"
    )
    assert result.returncode == 0, result.stderr
    text = users(server.chat_requests[-1])[-1]
    assert text.startswith("compare\n\nnotes.md:\n```\n# Notes\nship on Friday\n```")
    assert text.endswith("stdin:\n```\nfrom stdin\n```")
    binary = tmp_path / "blob.bin"  # an image, PDF or audio file goes as a content part
    binary.write_bytes(b"\x00\x01\x02\x03 not media")
    requests = len(server.chat_requests)
    refused = run_koog("chat", "-s", "at", "-a", str(binary), "look")
    assert refused.returncode == 2
    assert "blob.bin is neither text nor an image, PDF or audio file" in refused.stderr
    assert len(server.chat_requests) == requests


def test_models_and_roles(run_koog: Run, server: FakeOpenAIServer, tmp_path: Path) -> None:
    listed = json.loads(run_koog("models", "--json").stdout)
    assert listed == [{"id": "test-model", "configured": False}]
    config = tmp_path / "roles.toml"
    config.write_text(
        '[roles.reviewer]\nsystem = "You review code."\nmodel = "review-model"\ntemperature = 0.1\n'
    )
    env = {"KOOG_CONFIG": str(config)}
    roles = run_koog("roles", env=env)
    assert roles.returncode == 0 and "reviewer" in roles.stdout and "review-model" in roles.stdout
    assert run_koog("chat", "-s", "r", "-r", "reviewer", "look", env=env).returncode == 0
    sent = server.chat_requests[-1]
    assert sent["model"] == "review-model" and sent["temperature"] == 0.1
    assert sent["messages"][0] == {"role": "system", "content": "You review code."}
    unknown = run_koog("chat", "-s", "r", "-r", "nobody", "look", env=env)
    assert unknown.returncode == 2 and "roles: reviewer" in unknown.stderr


def test_json_usage_and_stored_usage(run_koog: Run) -> None:
    result = run_koog("chat", "-s", "j", "hello", "--json")
    payload = json.loads(result.stdout)
    assert set(payload) == {"session", "reply", "model", "usage", "checkpoint", "finish_reason"}
    assert payload["finish_reason"] == "stop"
    assert payload["model"] == "gpt-4o-mini" and payload["usage"]["completion_tokens"] > 0
    counted = run_koog("chat", "-s", "j", "again", "-u")
    assert counted.stdout == "echo: again\n"
    assert counted.stderr.startswith("tokens: ") and " in, " in counted.stderr
    stored = json.loads(run_koog("history", "show", "-s", "j", "--format", "json").stdout)
    assert stored[-1]["meta"]["model"] == "gpt-4o-mini"
    assert stored[-1]["meta"]["usage"]["prompt_tokens"] > 0


def test_global_options_after_the_subcommand(run_koog: Run, tmp_path: Path) -> None:
    config = tmp_path / "after.toml"
    config.write_text('[llm]\nmodel = "from-config"\n')
    result = run_koog(
        "chat", "-s", "g", "hi", "--config", str(config), "--json", env={"KOOG_MODEL": ""}
    )
    assert result.returncode == 0 and json.loads(result.stdout)["model"] == "from-config"


def test_rename_delete_and_import_formats(run_koog: Run, data_dir: Path, tmp_path: Path) -> None:
    run_koog("chat", "-s", "old-name", "hello")
    run_koog("checkpoint", "create", "-s", "old-name", "--label", "mark")
    run_koog("chat", "-s", "taken", "hi")
    refused = run_koog("history", "rename", "old-name", "taken")
    assert refused.returncode == 2 and "exists already" in refused.stderr
    assert run_koog("history", "rename", "old-name", "new-name").returncode == 0
    shown = json.loads(run_koog("history", "show", "-s", "new-name", "--format", "json").stdout)
    assert [m["content"] for m in shown][1:] == ["hello", "echo: hello"]
    assert "mark" in run_koog("checkpoint", "list", "-s", "new-name").stdout
    assert run_koog("history", "show", "-s", "old-name").returncode == 2

    stale = data_dir / "sessions" / "taken.json"
    doc = json.loads(stale.read_text())
    doc["updated_at"] = "2020-01-01T00:00:00.000Z"
    stale.write_text(json.dumps(doc))
    assert run_koog("history", "delete", "--older-than", "30").returncode == 2  # needs --yes
    gone = run_koog("history", "delete", "--older-than", "30", "--yes")
    assert gone.returncode == 0 and "deleted session taken" in gone.stderr
    assert [s["session"] for s in json.loads(run_koog("history", "list", "--json").stdout)] == [
        "new-name"
    ]

    jsonl = run_koog("history", "show", "-s", "new-name", "--format", "jsonl").stdout
    assert run_koog("history", "import", "-s", "copy", "-", input=jsonl).returncode == 0
    plain = json.dumps([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}])
    assert run_koog("history", "import", "-s", "plain", "-", input=plain).returncode == 0
    copied = json.loads(run_koog("history", "show", "-s", "copy", "--format", "json").stdout)
    assert copied == shown
    imported = json.loads(run_koog("history", "show", "-s", "plain", "--format", "json").stdout)
    assert [m["content"] for m in imported] == ["hi", "yo"] and all(m["id"] for m in imported)
    assert run_koog("history", "delete", "copy", "plain", "--yes").returncode == 0
