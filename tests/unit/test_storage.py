"""File history store and transcript: atomic, private, revision-checked, never overwrite
what they cannot read."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from koogcli.adapters.files.history import FileHistoryStore
from koogcli.adapters.paths import DataDir
from koogcli.core.errors import ConflictError, CorruptDocumentError, UnknownFormatError
from koogcli.core.messages import ToolCall, assistant, tool_result, user
from koogcli.core.names import SessionName
from tests.support.damage import damaged

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
    store.write(S, msgs, None)
    assert store.read(S).messages == msgs
    raw = json.loads(store.data.session_file(S).read_text())
    assert (raw["format"], raw["version"], raw["revision"]) == ("koog.chat-history", 2, 1)


def test_files_are_0600_and_folders_0700(store: FileHistoryStore) -> None:
    store.write(S, [user("x")], None)
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
        store.write(S, [user(str(i))], None)
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
        store.read(S)
    assert str(path) in info.value.message  # type: ignore[attr-defined]
    assert info.value.exit_code == 3  # type: ignore[attr-defined]
    with pytest.raises(error):
        store.write(S, [user("overwrite?")], None)
    assert path.read_text() == content


def test_transcript_appends_and_names_rows_that_are_no_message(tmp_path: Path) -> None:
    from koogcli.adapters.sql.sqlite import SqliteDatabase
    from koogcli.adapters.sql.transcript import SqlTranscriptStore

    db = SqliteDatabase(tmp_path / "koog.sqlite3")
    transcript = SqlTranscriptStore(db)
    transcript.append(S, [user("one"), assistant("two")], "t1")
    with db.transaction() as cur:  # a damaged row
        cur.execute(
            "INSERT INTO transcript (session, turn_id, body) VALUES (%s, 't2', '{')", [S.value]
        )
    transcript.append(S, [user("three")], "t3")
    assert [m.text for m in transcript.read(S)] == ["one", "two", "three"]
    assert transcript.unreadable(S) == [3]
    assert [turn for _m, turn in transcript.entries(S)] == ["t1", "t1", "t3"]
    assert stat.S_IMODE((tmp_path / "koog.sqlite3").stat().st_mode) == 0o600


def test_paths_never_leave_the_data_dir(tmp_path: Path) -> None:
    data = DataDir(tmp_path / "d")
    assert data.session_file(SessionName("a.b")).parent == data.root / "sessions"


TRICKY = [
    user('first, "messages": [ looks like the key\nand spans lines'),
    assistant("reply with ]}\nand a line that is only ]}"),
    user("ünïcode \u2028 separator"),
    assistant(None, [ToolCall("c1", "create_user", '{"name": "Alex"}')]),
    tool_result("c1", "create_user", "ok"),
    assistant("last"),
]


@pytest.mark.parametrize("count", [0, 1, 3, 6, 50])
def test_tail_reads_the_last_messages_from_the_end(store: FileHistoryStore, count: int) -> None:
    store.write(S, TRICKY, None)
    assert store.tail(S, count) == (TRICKY[-count:] if count else [])


def test_tail_of_long_history_reads_across_chunks(store: FileHistoryStore) -> None:
    messages = [user(f"message {i} " + "x" * 300) for i in range(2000)]
    store.write(S, messages, None)
    assert store.tail(S, 900) == messages[-900:]


@pytest.mark.parametrize("shape", ["no summary", "indented"])
def test_documents_without_the_summary_are_read_whole(store: FileHistoryStore, shape: str) -> None:
    from koogcli.adapters.codec.documents import dump_history

    path = store.data.session_file(S)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = dump_history(S.value, 4, "2026-01-01T00:00:00+00:00", TRICKY, summary=False)
    if shape == "indented":
        text = json.dumps(json.loads(text), indent=2)
    path.write_text(text)
    assert store.tail(S, 2) == TRICKY[-2:]
    [info] = store.sessions()
    assert (info.messages, info.revision, info.preview) == (6, 4, TRICKY[0].text)


def test_listing_reads_the_summary(store: FileHistoryStore) -> None:
    store.write(S, TRICKY, None)
    store.write(SessionName("empty"), [], None)
    infos = {i.name: i for i in store.sessions()}
    assert (infos["work"].messages, infos["work"].revision) == (6, 1)
    assert infos["work"].preview == TRICKY[0].text
    assert (infos["empty"].messages, infos["empty"].preview) == (0, "")
    raw = json.loads(store.data.session_file(S).read_text())
    assert (raw["message_count"], raw["preview"]) == (6, TRICKY[0].text)


def test_digests_from_the_documents_lines_equal_the_computed_ones(
    store: FileHistoryStore,
) -> None:
    from koogcli.adapters import digests as message_digests

    store.write(S, TRICKY, None)
    data = store.data.session_file(S).read_bytes()
    loaded = FileHistoryStore(store.data).read(S).messages
    message_digests.forget()
    assert message_digests.remember_lines(data, loaded)
    from_lines = [message_digests.digest(m) for m in loaded]
    message_digests.forget()
    computed = [message_digests.digest(m) for m in loaded]
    assert from_lines == computed
    assert len(set(computed)) == len(TRICKY)


def test_a_document_of_another_shape_gives_no_digests(store: FileHistoryStore) -> None:
    from koogcli.adapters import digests as message_digests

    store.write(S, TRICKY, None)
    loaded = store.read(S).messages
    shuffled = json.loads(store.data.session_file(S).read_text())
    shuffled["messages"].reverse()
    text = json.dumps(shuffled, indent=None)  # one line: not one message per line
    assert not message_digests.remember_lines(text.encode(), loaded)
    lines = store.data.session_file(S).read_bytes().split(b"\n")
    lines[1], lines[2] = lines[2], lines[1]  # right shape, wrong order
    assert not message_digests.remember_lines(b"\n".join(lines), loaded)


def test_the_check_by_hand_accepts_only_what_the_schema_accepts() -> None:
    """Short reads (`history show --last 5`) skip pydantic; they must not let through a
    message the full validation refuses, nor read one differently."""
    from pydantic import ValidationError

    from koogcli.adapters.codec.documents import parse_messages
    from koogcli.adapters.codec.schema import MESSAGES

    good = {"id": "m1", "role": "assistant", "content": "hi", "created_at": "2026-01-01"}
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    fields = [*good, "tool_call_id", "name", "meta", "tool_calls"]
    inner = ["id", "type", "function", "function.name", "function.arguments"]
    cases = [
        good,
        *damaged(good, fields),
        *damaged({**good, "meta": {"kind": "note"}}, fields),
        *damaged({**good, "tool_calls": [call]}, [f"tool_calls.0.{f}" for f in inner]),
    ]
    accepted = 0
    for case in cases:
        try:
            expected = [m.to_dict() for m in parse_messages(MESSAGES.validate_python([case]), "x")]
        except (ValidationError, CorruptDocumentError):
            with pytest.raises(CorruptDocumentError, match=r"invalid message at messages\.0"):
                parse_messages([case], "x")
            continue
        accepted += 1
        assert [m.to_dict() for m in parse_messages([case], "x")] == expected, case
    assert 20 < accepted < len(cases) - 100  # both kinds were tried


def _long_history(count: int) -> list:
    return [user(f"q{i}") if i % 2 == 0 else assistant(f"a{i}") for i in range(count)]


def test_a_new_process_takes_the_digests_a_fold_wrote_instead_of_hashing_lines(
    store: FileHistoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    from koogcli.adapters import digests as message_digests

    store.write(S, _long_history(message_digests.CACHE_MIN_MESSAGES), None)
    cache = store.data.sessions_dir / "work.digests"
    assert cache.exists()
    message_digests.forget()  # as in a new process

    def hashing_lines(*_args: object) -> bool:
        raise AssertionError("the document's lines were hashed")

    monkeypatch.setattr(message_digests, "remember_lines", hashing_lines)
    loaded = FileHistoryStore(store.data).read(S).messages
    extended = [*loaded, user("new")]
    taken = message_digests.digests(extended)
    message_digests.forget()
    assert taken == [message_digests.digest(m) for m in extended]  # as computed from JSON


@pytest.mark.parametrize(
    "damage", ["another document", "a digest changed", "torn", "count", "not hex, checked"]
)
def test_digests_of_another_document_or_damaged_are_not_taken(
    store: FileHistoryStore, damage: str
) -> None:
    from koogcli.adapters import digests as message_digests

    count = message_digests.CACHE_MIN_MESSAGES
    cache = store.data.sessions_dir / "work.digests"
    store.write(S, _long_history(count), None)
    data = cache.read_bytes()
    if damage == "another document":  # whole and checked, but written for the history before
        store.write(S, [user("other"), *_long_history(count)[1:]], None)
    elif damage == "a digest changed":
        data = data.replace(data[-24:], b"0" * 24)
    elif damage == "torn":
        data = data[: len(data) // 2]
    elif damage == "not hex, checked":  # a right checksum over bytes koog never writes
        import hashlib

        header, rest = data.split(b"\n", 1)
        rest = rest[:-24] + "é".encode() * 12
        check = hashlib.sha256(rest).hexdigest()[:16].encode()
        data = header[:-16] + check + b"\n" + rest
    else:
        header, rest = data.split(b"\n", 1)
        data = header.replace(f" {count} ".encode(), f" {count - 1} ".encode()) + b"\n" + rest
    cache.write_bytes(data)
    message_digests.forget()
    loaded = FileHistoryStore(store.data).read(S).messages
    taken = message_digests.digests(loaded)
    message_digests.forget()
    assert taken == [message_digests.digest(m) for m in loaded]


def test_digests_go_with_their_session(store: FileHistoryStore) -> None:
    from koogcli.adapters import digests as message_digests

    store.write(S, _long_history(message_digests.CACHE_MIN_MESSAGES), None)
    folder = store.data.sessions_dir
    store.rename(S, SessionName("moved"))
    assert sorted(p.name for p in folder.iterdir()) == ["moved.digests", "moved.json"]
    store.write(SessionName("moved"), [user("short now")], None)
    assert sorted(p.name for p in folder.iterdir()) == ["moved.json"]
    store.write(SessionName("moved"), _long_history(message_digests.CACHE_MIN_MESSAGES), None)
    store.delete(SessionName("moved"))
    assert list(folder.iterdir()) == []


def test_a_document_edited_after_its_digests_were_written_is_checked(
    store: FileHistoryStore,
) -> None:
    """Only the very bytes koog wrote skip validation: an edit is found and named."""
    from koogcli.adapters import digests as message_digests

    history = _long_history(message_digests.CACHE_MIN_MESSAGES)
    store.write(S, history, None)
    path = store.data.session_file(S)
    assert FileHistoryStore(store.data).read(S).messages == history
    path.write_bytes(path.read_bytes().replace(b'"role": "assistant"', b'"role": "robot"', 1))
    with pytest.raises(CorruptDocumentError, match=r"messages\.1\.role"):
        FileHistoryStore(store.data).read(S)


@pytest.mark.slow  # over 2 s
def test_reading_a_session_again_and_again_keeps_one_copy_of_it(store: FileHistoryStore) -> None:
    """A REPL reads its session every turn; what one reading knew (the digests of its
    messages) must not keep every earlier reading's messages alive."""
    import gc
    import tracemalloc

    from koogcli.adapters import digests as message_digests

    store.write(S, _long_history(2000), None)
    message_digests.forget()
    reader = FileHistoryStore(store.data)
    reader.read(S)  # the first reading, and what stays of it
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        reader.read(S)
        gc.collect()
        one = tracemalloc.get_traced_memory()[0] - base
        for _ in range(4):
            reader.read(S)
        gc.collect()
        many = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
        message_digests.forget()
    assert many < 2 * max(one, 1 << 19), (one, many)


def test_a_version_1_koog_database_gains_the_session_origins_in_place(tmp_path: Path) -> None:
    import sqlite3

    from koogcli.adapters.sql.origins import SqlSessionOrigins
    from koogcli.adapters.sql.sqlite import SqliteDatabase
    from koogcli.core.names import SessionName

    path = tmp_path / "koog.sqlite3"
    SqliteDatabase(path).conn.execute("SELECT 1")  # created at the current version
    old = sqlite3.connect(path, isolation_level=None)
    old.execute("DROP TABLE session_origins")
    old.execute("DROP TABLE archive_sessions")
    old.execute("DROP TABLE archive_files")
    for trigger in ("transcript_text_in", "transcript_text_out"):
        old.execute(f"DROP TRIGGER {trigger}")
    old.execute("DROP TABLE transcript_text")
    old.execute("DROP INDEX transcript_turns")
    old.execute(
        "INSERT INTO transcript (session, turn_id, body) VALUES "
        '(\'a\', \'t1\', \'{"role": "user", "content": "an old zeppelin"}\')'
    )
    old.execute("UPDATE meta SET value = '1' WHERE key = 'version'")
    old.close()
    db = SqliteDatabase(path)
    SqlSessionOrigins(db).record(SessionName("b"), SessionName("a"), 4)
    assert SqlSessionOrigins(db).all() == {"b": ("a", 4)}
    assert db.one("SELECT value FROM meta WHERE key = 'version'") == ("5",)
    # The full-text index (versions 3 and 4) holds what the transcript held before it.
    found = db.rows("SELECT rowid FROM transcript_text WHERE transcript_text MATCH 'zeppelin'")
    assert len(found) == 1
