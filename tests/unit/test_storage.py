"""File history store and transcript: atomic, private, revision-checked, never overwrite
what they cannot read."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from koogcli.adapters.file_history import FileHistoryStore
from koogcli.adapters.file_transcript import FileTranscriptStore
from koogcli.adapters.paths import DataDir
from koogcli.core.errors import ConflictError, CorruptDocumentError, UnknownFormatError
from koogcli.core.messages import ToolCall, assistant, tool_result, user
from koogcli.core.names import SessionName

S = SessionName("work")


@pytest.fixture
def store(tmp_path: Path) -> FileHistoryStore:
    return FileHistoryStore(DataDir(tmp_path / "data"))


def test_round_trip_keeps_every_field(store: FileHistoryStore) -> None:
    msgs = [
        user("hi"),
        assistant(None, [ToolCall("c1", "create_user", '{"name": "Alex"}')]),
        tool_result("c1", "create_user", "ok"),
    ]
    store.store(S, msgs)
    assert store.load(S) == msgs
    raw = json.loads(store.data.session_file(S).read_text())
    assert (raw["format"], raw["version"], raw["revision"]) == ("koog.chat-history", 1, 1)


def test_files_are_0600_and_folders_0700(store: FileHistoryStore) -> None:
    store.store(S, [user("x")])
    path = store.data.session_file(S)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(store.data.root.stat().st_mode) == 0o700


def test_revision_conflict_writes_nothing(store: FileHistoryStore) -> None:
    store.write(S, [user("a")], expected_revision=0)
    before = store.data.session_file(S).read_bytes()
    with pytest.raises(ConflictError):
        store.write(S, [user("b")], expected_revision=0)
    assert store.data.session_file(S).read_bytes() == before


def test_no_temp_files_left_behind(store: FileHistoryStore) -> None:
    for i in range(3):
        store.store(S, [user(str(i))])
    assert sorted(p.name for p in store.data.sessions_dir.iterdir()) == ["work.json"]


@pytest.mark.parametrize(
    "content, error",
    [
        ("not json at all", CorruptDocumentError),
        (
            '{"format": "koog.chat-history", "version": 99, "revision": 1, "messages": []}',
            UnknownFormatError,
        ),
        ('{"format": "other", "version": 1, "revision": 1, "messages": []}', UnknownFormatError),
        (
            '{"format": "koog.chat-history", "version": 1, "revision": 1, "messages": [{"role": "x"}]}',
            CorruptDocumentError,
        ),
        ("[1, 2]", CorruptDocumentError),
    ],
)
def test_unreadable_document_raises_and_is_never_overwritten(
    store: FileHistoryStore, content: str, error: type[Exception]
) -> None:
    path = store.data.session_file(S)
    path.parent.mkdir(parents=True)
    path.write_text(content)
    with pytest.raises(error) as info:
        store.load(S)
    assert str(path) in info.value.message  # type: ignore[attr-defined]
    assert info.value.exit_code == 3  # type: ignore[attr-defined]
    with pytest.raises(error):
        store.store(S, [user("overwrite?")])
    assert path.read_text() == content


def test_transcript_appends_and_skips_a_torn_last_line(tmp_path: Path) -> None:
    transcript = FileTranscriptStore(DataDir(tmp_path))
    transcript.append(S, [user("one"), assistant("two")], "t1")
    path = transcript.data.transcript_file(S)
    with path.open("a") as handle:
        handle.write('{"id": "x", "role": "us')
    assert [m.text for m in transcript.read(S)] == ["one", "two"]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_paths_never_leave_the_data_dir(tmp_path: Path) -> None:
    data = DataDir(tmp_path / "d")
    assert data.session_file(SessionName("a.b")).parent == data.root / "sessions"
