"""`koog history import --from` on stores made in each tool's documented shape: the
ChatGPT and Claude.ai exports (with a branch the person left), a Claude Code transcript
with a rewind, damaged lines of every kind, and an older llm `logs.db` (issue 54)."""

from __future__ import annotations

import json
import sqlite3
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

Koog = Callable[..., Any]
pytestmark = pytest.mark.usefixtures("backend")  # a team's PostgreSQL holds it as files do


def _said(koog: Koog, session: str) -> list[tuple[str, str]]:
    shown = json.loads(koog("history", "show", "-s", session, "--json").stdout)
    return [(m["role"], m["content"]) for m in shown]


def _listed(koog: Koog, *args: str) -> list[dict[str, Any]]:
    return list(json.loads(koog("history", "list", "--json", *args).stdout))


def _node(nid: str, parent: str | None, role: str | None, text: str, children: list[str]) -> Any:
    message = (
        None
        if role is None
        else {
            "id": nid,
            "author": {"role": role},
            "content": {"content_type": "text", "parts": [text]},
            "create_time": 1764900000.0,
        }
    )
    return {"id": nid, "message": message, "parent": parent, "children": children}


def test_a_chatgpt_export_keeps_the_visible_branch_and_the_edited_one_as_a_fork(
    koog: Koog, isolated: Path
) -> None:
    mapping = {
        "root": _node("root", None, None, "", ["u1"]),
        "u1": _node("u1", "root", "user", "plan a trip to Lisbon", ["a1"]),
        "a1": _node("a1", "u1", "assistant", "Three days: Alfama, Belém, Sintra.", ["u2", "u2b"]),
        "u2": _node("u2", "a1", "user", "make it four days", ["a2"]),
        "a2": _node("a2", "u2", "assistant", "Add Cascais on day four.", []),
        "u2b": _node("u2b", "a1", "user", "make it two days", ["a2b"]),
        "a2b": _node("a2b", "u2b", "assistant", "Skip Sintra.", []),
    }
    export = [
        {
            "id": "c-1",
            "title": "Lisbon",
            "create_time": 1764900000.0,
            "update_time": 1764900100.0,
            "mapping": mapping,
            "current_node": "a2b",
        }
    ]
    folder = isolated / "export"
    folder.mkdir()
    with zipfile.ZipFile(folder / "chatgpt.zip", "w") as archive:
        archive.writestr("conversations.json", json.dumps(export))
    done = koog("history", "import", "--from", "chatgpt", str(folder / "chatgpt.zip"), "--json")
    assert done.exit_code == 0, done.stderr
    assert json.loads(done.stdout)["forks"] == 1
    assert _said(koog, "chatgpt-c-1") == [
        ("user", "plan a trip to Lisbon"),
        ("assistant", "Three days: Alfama, Belém, Sintra."),
        ("user", "make it two days"),
        ("assistant", "Skip Sintra."),
    ]
    fork = next(s for s in _listed(koog) if s["forked_from"])
    assert fork["forked_from"] == {"session": "chatgpt-c-1", "at": 2}
    assert _said(koog, fork["session"])[2:] == [
        ("user", "make it four days"),
        ("assistant", "Add Cascais on day four."),
    ]
    again = koog("history", "import", "--from", "chatgpt", str(folder / "chatgpt.zip"), "--json")
    assert json.loads(again.stdout)["messages"] == 0


def test_a_claude_ai_export_keeps_each_conversations_reply_text(koog: Koog, isolated: Path) -> None:
    export = [
        {
            "uuid": "9f1c",
            "name": "Naming",
            "created_at": "2026-11-01T10:00:00Z",
            "updated_at": "2026-11-01T10:01:00Z",
            "chat_messages": [
                {"uuid": "m1", "sender": "human", "text": "a name for a cat", "content": []},
                {
                    "uuid": "m2",
                    "sender": "assistant",
                    "text": "",
                    "content": [{"type": "text", "text": "Miso."}],
                },
            ],
        }
    ]
    path = isolated / "conversations.json"
    path.write_text(json.dumps(export))
    done = koog("history", "import", "--from", "claude-ai", str(path))
    assert done.exit_code == 0, done.stderr
    assert _said(koog, "claude-ai-9f1c") == [("user", "a name for a cat"), ("assistant", "Miso.")]
    [listed] = _listed(koog, "--source", "claude-ai")
    assert listed["source"] == "claude-ai" and listed["origin"]["id"] == "9f1c"
    assert _listed(koog, "--source", "koog") == []
    assert koog("chat", "-s", "mine", "a cat of my own").exit_code == 0

    def found(*source: str) -> list[str]:
        hits = koog("history", "search", "cat", *source, "--json").stdout
        return sorted(h["session"] for h in json.loads(hits))

    assert found("--source", "claude-ai") == ["claude-ai-9f1c"]
    assert found("--source", "koog") == ["mine", "mine"]  # the prompt and its echo
    assert found() == ["claude-ai-9f1c", "mine", "mine"]


def _line(uuid: str, parent: str | None, kind: str, content: Any, reply: str | None = None) -> str:
    """One line as Claude Code writes it; the blocks of one reply share its `reply` id."""
    message: dict[str, Any] = {"role": kind, "content": content}
    if kind == "assistant":
        message.update(id=f"msg_{reply or uuid}", model="claude-sonnet-5", type="message")
    return json.dumps(
        {
            "parentUuid": parent,
            "isSidechain": False,
            "type": kind,
            "message": message,
            "uuid": uuid,
            "timestamp": "2026-12-01T10:00:00.000Z",
            "cwd": "/work/app",
            "sessionId": "5e551011-0000-4000-8000-000000000001",
        }
    )


def _transcript(folder: Path, lines: list[str], tail: bytes = b"") -> Path:
    project = folder / "projects" / "-work-app"
    project.mkdir(parents=True, exist_ok=True)
    path = project / "5e551011-0000-4000-8000-000000000001.jsonl"
    path.write_bytes(("\n".join(lines) + "\n").encode() + tail)
    return path


NAME = "claude-5e551011-0000-4000-8000-000000000001"


def test_a_rewound_claude_code_prompt_is_a_fork_and_damage_is_named_not_shown(
    koog: Koog, isolated: Path
) -> None:
    store = isolated / "claude"
    good = [
        _line("u1", None, "user", "first question"),
        _line(
            "a1", "u1", "assistant", [{"type": "thinking", "thinking": "hm", "signature": "c2ln"}]
        ),
        _line("a1b", "a1", "assistant", [{"type": "text", "text": "first answer"}], reply="a1"),
        _line("u2", "a1b", "user", "the prompt I rewound"),
        _line("a2", "u2", "assistant", [{"type": "text", "text": "an answer left behind"}]),
        _line("u3", "a1b", "user", "the prompt I kept"),
        _line("a3", "u3", "assistant", [{"type": "text", "text": "the answer kept"}]),
    ]
    damaged = [
        good[0],
        "{not json",
        "\x1b]0;pwned\x07 not json either",
        '{"truncated": x',
        '{"a": ' + "[" * 3000 + "]" * 3000 + "}",
        '"a string"',
        json.dumps({"type": "summary", "summary": "y" * (3 << 20)}),  # 3 MB, read and passed
        *good[1:],
    ]
    _transcript(store, damaged, tail=b'{"type": "user", "uuid": "torn", "mess')
    (store / "projects" / "-work-app" / "bad-utf8.jsonl").write_bytes(b'{"a": "\xff\xfe"}\n')
    done = koog("history", "import", "--from", "claude-code", str(store), "--json")
    assert done.exit_code == 1
    report = json.loads(done.stdout)
    whys = sorted(s["why"] for s in report["skipped"])
    assert whys == sorted(
        [
            "not JSON",
            "not JSON",
            "not JSON",
            "nested too deep",
            "not a JSON object",
            "torn: no end of line",
            "not UTF-8",
        ]
    ), report["skipped"]
    assert all(s["where"].rsplit(":", 1)[-1].isdigit() for s in report["skipped"])
    assert "\x1b" not in done.stdout + done.stderr
    said = _said(koog, NAME)
    assert said == [
        ("user", "first question"),
        ("assistant", "first answer"),
        ("user", "the prompt I kept"),
        ("assistant", "the answer kept"),
    ]
    fork = next(s for s in _listed(koog) if s["forked_from"])
    assert _said(koog, fork["session"])[2:] == [
        ("user", "the prompt I rewound"),
        ("assistant", "an answer left behind"),
    ]
    shown = koog("history", "show", "-s", NAME, "--json").stdout
    assert "c2ln" not in shown  # the thinking's signature: kept beside the reply, not shown
    plain = koog("history", "import", "--from", "claude-code", str(store))
    assert plain.exit_code == 0  # nothing changed: nothing read, nothing skipped
    assert "1 unchanged" in plain.stderr or "unchanged" in plain.stderr


def test_escapes_in_an_imported_prompt_are_shown_never_run(koog: Koog, isolated: Path) -> None:
    store = isolated / "claude"
    hostile = "title \x1b]0;pwned\x07 and \x1b[2J and \x9b31m colour"
    _transcript(store, [_line("u1", None, "user", hostile)])
    assert koog("history", "import", "--from", "claude-code", str(store)).exit_code == 0
    for args in (
        ("history", "list"),
        ("history", "show", "-s", NAME),
        ("history", "search", "colour"),
        ("history", "list", "--json"),
        ("history", "search", "colour", "--json"),
    ):
        done = koog(*args)
        assert done.exit_code == 0, (args, done.stderr)
        out = done.stdout + done.stderr
        assert "\x1b" not in out and "\x07" not in out and "\x9b" not in out, (args, out)


def test_a_transcript_rewritten_in_place_adds_only_what_is_new(koog: Koog, isolated: Path) -> None:
    store = isolated / "claude"
    first = [
        _line("u1", None, "user", "one"),
        _line("a1", "u1", "assistant", [{"type": "text", "text": "reply one"}]),
    ]
    _transcript(store, first)
    assert koog("history", "import", "--from", "claude-code", str(store)).exit_code == 0
    # The same conversation written again with new line ids (a tool rewrote its file),
    # and one more exchange.
    rewritten = [
        _line("x1", None, "user", "one"),
        _line("y1", "x1", "assistant", [{"type": "text", "text": "reply one"}]),
        _line("x2", "y1", "user", "two"),
        _line("y2", "x2", "assistant", [{"type": "text", "text": "reply two"}]),
    ]
    _transcript(store, rewritten)
    done = koog("history", "import", "--from", "claude-code", str(store), "--json")
    assert json.loads(done.stdout)["messages"] == 2
    assert [text for _role, text in _said(koog, NAME)] == ["one", "reply one", "two", "reply two"]


def test_dry_run_says_and_changes_nothing(koog: Koog, isolated: Path) -> None:
    store = isolated / "claude"
    _transcript(store, [_line("u1", None, "user", "one")])
    done = koog("history", "import", "--from", "claude-code", str(store), "--dry-run")
    assert done.exit_code == 0 and "would import 1 message into 1 session" in done.stderr
    assert _listed(koog) == []


def test_an_older_llm_logs_db_is_read(koog: Koog, isolated: Path) -> None:
    path = isolated / "logs.db"
    db = sqlite3.connect(path)
    db.executescript(
        "CREATE TABLE conversations (id TEXT PRIMARY KEY, name TEXT, model TEXT);"
        "CREATE TABLE responses (id TEXT PRIMARY KEY, model TEXT, prompt TEXT, system TEXT,"
        " prompt_json TEXT, options_json TEXT, response TEXT, response_json TEXT,"
        " conversation_id TEXT, duration_ms INTEGER, datetime_utc TEXT);"
        "INSERT INTO conversations VALUES ('01old', 'haiku', 'gpt-4o');"
        "INSERT INTO responses VALUES ('r1', 'gpt-4o', 'a haiku', NULL, NULL, NULL,"
        " 'autumn moon', NULL, '01old', 5, '2025-03-01T10:00:00');"
        "INSERT INTO responses VALUES ('r2', 'gpt-4o', 'another', NULL, NULL, NULL,"
        " 'winter rain', NULL, '01old', 5, '2025-03-01T10:01:00');"
    )
    db.commit()
    db.close()
    assert koog("history", "import", "--from", "llm", str(path)).exit_code == 0
    assert [t for _r, t in _said(koog, "llm-01old")] == [
        "a haiku",
        "autumn moon",
        "another",
        "winter rain",
    ]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("--from", "nosuch"), "unknown source 'nosuch'"),
        (("--from", "chatgpt"), "name the chatgpt export"),
        (("--from", "codex", "/nonexistent/codex"), "no such file or folder"),
        (("--from", "codex", "-s", "x"), "--from names its own sessions"),
        (("--from", "all", "somewhere"), "--from all reads each tool's own place"),
    ],
)
def test_bad_sources_are_usage_errors(
    koog: Koog, isolated: Path, args: tuple[str, ...], words: str
) -> None:
    done = koog("history", "import", *args)
    assert done.exit_code == 2 and words in done.stderr, done.stderr


def test_imported_turns_are_ingested_once_and_no_memory_skips_them(
    koog: Koog, isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = isolated / "koog.toml"
    config.write_text("[long_term_memory.ingestion]\nenabled = true\n")
    monkeypatch.setenv("KOOG_CONFIG", str(config))
    store = isolated / "claude"
    first = [
        _line("u1", None, "user", "the staging database is on port 6543"),
        _line("a1", "u1", "assistant", [{"type": "text", "text": "noted"}]),
    ]
    _transcript(store, first)
    assert koog("history", "import", "--from", "claude-code", str(store)).exit_code == 0

    def records() -> list[str]:
        listed = json.loads(koog("memory", "list", "--json").stdout)
        return sorted(r["content"] for r in listed)

    assert records() == ["noted", "the staging database is on port 6543"]
    grown = [*first, _line("u2", "a1", "user", "and production on 5432")]
    _transcript(store, grown)
    assert koog("history", "import", "--from", "claude-code", str(store)).exit_code == 0
    assert records() == ["and production on 5432", "noted", "the staging database is on port 6543"]

    other = isolated / "claude-other"
    (other / "projects" / "-x").mkdir(parents=True)
    moved = other / "projects" / "-x" / "5e551011-0000-4000-8000-000000000002.jsonl"
    moved.write_text(_line("v1", None, "user", "a secret never to remember") + "\n")
    done = koog("history", "import", "--from", "claude-code", str(other), "--no-memory")
    assert done.exit_code == 0
    assert "a secret never to remember" not in records()


def test_two_machines_importing_one_synced_store_make_one_session(
    koog: Koog, isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from koogcli.services import archive

    store = isolated / "claude"
    _transcript(store, [_line("u1", None, "user", "one"), _line("u2", "u1", "user", "two")])
    monkeypatch.setattr(archive, "machine", lambda: "laptop")
    assert koog("history", "import", "--from", "claude-code", str(store)).exit_code == 0
    monkeypatch.setattr(archive, "machine", lambda: "desktop")  # its own record of files
    done = koog("history", "import", "--from", "claude-code", str(store), "--json")
    assert json.loads(done.stdout)["files"]["read"] == 1  # read here for the first time
    assert json.loads(done.stdout)["messages"] == 0
    assert [s["session"] for s in _listed(koog)] == [NAME]


@pytest.mark.files_only
def test_an_import_killed_before_the_history_is_written_is_finished_next_time(
    koog: Koog, isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from koogcli.adapters.files.history import FileHistoryStore

    store = isolated / "claude"
    _transcript(store, [_line("u1", None, "user", "the cobalt plan")])
    written = FileHistoryStore.write

    def killed(*args: Any, **kwargs: Any) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(FileHistoryStore, "write", killed)
    assert koog("history", "import", "--from", "claude-code", str(store)).exit_code != 0
    monkeypatch.setattr(FileHistoryStore, "write", written)
    assert koog("history", "import", "--from", "claude-code", str(store)).exit_code == 0
    assert _said(koog, NAME) == [("user", "the cobalt plan")]
    found = json.loads(koog("history", "search", "cobalt", "--json").stdout)
    assert len(found) == 1, found  # in the transcript once


def test_a_long_import_writes_its_transcript_from_a_process_of_its_own(
    koog: Koog, isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past BACKGROUND_AFTER messages (here at once) the file backend's transcript is
    written by a child process: every prompt is still found, once, and the files are
    recorded as read only after it finished."""
    from koogcli.services import archive

    monkeypatch.setattr(archive, "BACKGROUND_AFTER", 0)
    store = isolated / "claude"
    for n in range(5):
        project = store / "projects" / f"-p{n}"
        project.mkdir(parents=True)
        lines = [
            _line(f"u{n}", None, "user", f"question quartz{n}"),
            _line(f"a{n}", f"u{n}", "assistant", [{"type": "text", "text": f"answer {n}"}]),
        ]
        (project / f"5e551011-0000-4000-8000-00000000010{n}.jsonl").write_text(
            "\n".join(lines).replace(
                NAME.removeprefix("claude-"), f"5e551011-0000-4000-8000-00000000010{n}"
            )
            + "\n"
        )
    done = koog("history", "import", "--from", "claude-code", str(store), "--json")
    assert done.exit_code == 0, done.stderr
    assert json.loads(done.stdout)["messages"] == 10
    for n in range(5):
        found = json.loads(koog("history", "search", f"quartz{n}", "--json").stdout)
        assert len(found) == 1, found
    again = json.loads(
        koog("history", "import", "--from", "claude-code", str(store), "--json").stdout
    )
    assert again["files"]["unchanged"] == 5


def test_a_rewind_after_an_import_moves_the_session_to_the_new_branch(
    koog: Koog, isolated: Path
) -> None:
    store = isolated / "claude"
    first = [
        _line("u1", None, "user", "q1"),
        _line("a1", "u1", "assistant", [{"type": "text", "text": "a1"}]),
        _line("u2", "a1", "user", "q2"),
        _line("a2", "u2", "assistant", [{"type": "text", "text": "a2"}]),
    ]
    _transcript(store, first)
    assert koog("history", "import", "--from", "claude-code", str(store)).exit_code == 0
    rewound = [
        *first,
        _line("u3", "a1", "user", "q2 edited"),
        _line("a3", "u3", "assistant", [{"type": "text", "text": "a2 edited"}]),
    ]
    _transcript(store, rewound)
    assert koog("history", "import", "--from", "claude-code", str(store)).exit_code == 0

    def forks() -> dict[str, list[str]]:
        return {
            s["session"]: [t for _r, t in _said(koog, s["session"])]
            for s in _listed(koog)
            if s["forked_from"]
        }

    assert [t for _r, t in _said(koog, NAME)] == ["q1", "a1", "q2 edited", "a2 edited"]
    assert list(forks().values()) == [["q1", "a1", "q2", "a2"]]
    # Back on the first branch: it is the session again; neither fork is mixed.
    back = [
        *rewound,
        _line("u4", "a2", "user", "q3"),
        _line("a4", "u4", "assistant", [{"type": "text", "text": "a3"}]),
    ]
    _transcript(store, back)
    assert koog("history", "import", "--from", "claude-code", str(store)).exit_code == 0
    assert [t for _r, t in _said(koog, NAME)] == ["q1", "a1", "q2", "a2", "q3", "a3"]
    assert sorted(forks().values()) == [
        ["q1", "a1", "q2", "a2"],
        ["q1", "a1", "q2 edited", "a2 edited"],
    ]
    # And the rewrite is a restore point.
    assert koog("rollback", "-s", NAME, "--latest", "--yes").exit_code == 0


def test_a_file_name_that_is_not_utf8_is_read_and_shown_safely(koog: Koog, isolated: Path) -> None:
    import os

    store = isolated / "claude"
    path = _transcript(store, [_line("u1", None, "user", "odd names")])
    odd = os.fsencode(path.parent.parent) + b"/-bad\x9bdir"
    os.mkdir(odd)
    os.rename(os.fsencode(path), odd + b"/" + os.fsencode(path.name))
    done = koog("history", "import", "--from", "claude-code", str(store), "--json")
    assert done.exit_code == 0, done.stderr
    [listed] = _listed(koog, "--source", "claude-code")
    assert "\ufffd" in listed["origin"]["file"] and listed["origin"]["file"].startswith("/")
    assert _said(koog, NAME) == [("user", "odd names")]
    again = koog("history", "import", "--from", "claude-code", str(store), "--json")
    assert json.loads(again.stdout)["files"]["unchanged"] == 1


def test_one_bad_row_of_an_llm_database_loses_only_its_message(koog: Koog, isolated: Path) -> None:
    path = isolated / "logs.db"
    db = sqlite3.connect(path)
    db.executescript(
        "CREATE TABLE threads (id TEXT PRIMARY KEY, name TEXT, tip_message_hash TEXT,"
        " forked_from TEXT, datetime_utc TEXT);"
        "CREATE TABLE turns (id TEXT PRIMARY KEY, thread_id TEXT, model TEXT, datetime_utc TEXT);"
        "CREATE TABLE messages (hash TEXT PRIMARY KEY, parent_hash TEXT, role TEXT,"
        " provider_metadata TEXT);"
        "CREATE TABLE parts (id INTEGER PRIMARY KEY, message_hash TEXT, position INTEGER,"
        " type TEXT, tool_name TEXT, text TEXT, payload TEXT);"
        "INSERT INTO threads VALUES ('t1', 'x', 'm3', NULL, '2026-12-01 10:00:00+00:00');"
        "INSERT INTO messages VALUES ('m1', NULL, 'user', NULL), ('m2', 'm1', 'assistant', NULL),"
        " ('m3', 'm2', 'user', NULL);"
        "INSERT INTO parts VALUES (1, 'm1', 0, 'text', NULL, 'kept prompt', NULL),"
        " (2, 'm2', 0, 'text', NULL, X'ff00fe', NULL),"
        " (3, 'm3', 0, 'text', NULL, CAST(X'6e6f74207574663820ff' AS TEXT), NULL);"
    )
    db.commit()
    db.close()
    done = koog("history", "import", "--from", "llm", str(path))
    assert done.exit_code == 0, done.stderr
    said = [t for _r, t in _said(koog, "llm-t1")]
    assert said[0] == "kept prompt" and said[-1] == "not utf8 \ufffd", said


def test_an_image_in_a_prompt_is_kept_as_a_part(koog: Koog, isolated: Path) -> None:
    store = isolated / "claude"
    image = {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}
    blocks = [
        {"type": "text", "text": "what is in this picture"},
        {"type": "image", "source": image},
    ]
    _transcript(store, [_line("u1", None, "user", blocks)])
    assert koog("history", "import", "--from", "claude-code", str(store)).exit_code == 0
    [shown] = json.loads(koog("history", "show", "-s", NAME, "--json").stdout)
    assert shown["content"] == "what is in this picture"
    assert shown["meta"]["parts"][1] == {
        "type": "image_url",
        "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="},
    }
