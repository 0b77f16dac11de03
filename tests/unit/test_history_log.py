"""The session document and its append log: a turn writes about the size of what it
adds, every reader sees the same history as before, and crashes or old readers never see
a history that is not one of those written."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from koogcli.adapters.codec.documents import dump_history
from koogcli.adapters.files import history as file_history
from koogcli.adapters.files.history import FileHistoryStore
from koogcli.adapters.paths import DataDir
from koogcli.core.errors import ConflictError, CorruptDocumentError
from koogcli.core.messages import Message, assistant, user
from koogcli.core.names import SessionName

S = SessionName("log")


@pytest.fixture
def data(tmp_path: Path) -> DataDir:
    return DataDir(tmp_path / "data")


def process(data: DataDir) -> FileHistoryStore:
    """A store as a new koog process has it: nothing known yet."""
    return FileHistoryStore(data)


def turn(data: DataDir, added: list[Message], window: int | None = None) -> int:
    store = process(data)
    stored = store.read(S)
    messages = [*stored.messages, *added]
    if window is not None:
        messages = messages[-window:]
    return store.write(S, messages, expected_revision=stored.revision)


def test_a_turn_appends_to_the_log_and_leaves_the_document_alone(data: DataDir) -> None:
    turn(data, [user("first"), assistant("one")])
    document = data.session_file(S)
    before = document.read_bytes()
    turn(data, [user("second " + "x" * 1000), assistant("two")])
    log = document.with_name("log.log")
    assert document.read_bytes() == before
    assert 1000 < log.stat().st_size < 1600
    stored = process(data).read(S)
    assert [m.text for m in stored.messages][-2:] == ["second " + "x" * 1000, "two"]
    assert stored.revision == 2


def test_random_histories_read_back_the_same_everywhere(
    data: DataDir, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(file_history, "LOG_MIN_BYTES", 2000)  # fold now and then
    rng = random.Random(5)
    expected: list[Message] = []
    revision = 0
    for step in range(120):
        store = process(data)
        stored = store.read(S)
        assert stored.messages == expected, step
        assert stored.revision == revision
        kind = rng.choice(["append", "append", "append", "window", "rewrite", "clear"])
        if kind == "append":
            new = [*expected, *(user(f"m{step}.{i}") for i in range(rng.randint(0, 3)))]
        elif kind == "window":
            new = [*expected, assistant(f"w{step}")][-rng.randint(1, 6) :]
        elif kind == "rewrite":
            new = [assistant(f"summary {step}"), *expected[-2:]]
        else:
            new = []
        revision = store.write(S, new, expected_revision=stored.revision)
        expected = new
        other = process(data)
        assert other.read(S).messages == expected
        for count in (0, 1, 3, 10):
            assert other.tail(S, count) == (expected[-count:] if count else [])
        [info] = other.sessions()
        assert (info.messages, info.revision, info.problem) == (len(expected), revision, None)
        first = next((m.text for m in expected if m.role == "user"), "")
        assert info.preview == first


def test_a_torn_log_line_is_skipped_with_a_warning_and_closed_off(data: DataDir) -> None:
    turn(data, [user("a")])
    turn(data, [user("b")])
    log = data.session_file(S).with_name("log.log")
    with log.open("a") as handle:
        handle.write('{"r": 3, "b": 2, "drop": 0, "add": [{"id": "x", "ro')  # a crash
    warned: list[str] = []
    store = FileHistoryStore(data, warn=warned.append)
    assert [m.text for m in store.read(S).messages] == ["a", "b"]
    store.read(S)
    assert len(warned) == 1 and str(log) in warned[0] and "cut short by a crash" in warned[0]
    turn(data, [user("c")])  # closes the torn line off, and marks it torn
    warned.clear()
    stored = FileHistoryStore(data, warn=warned.append).read(S)
    assert [m.text for m in stored.messages] == ["a", "b", "c"]
    assert stored.revision == 3 and warned == []


def _log_lines(data: DataDir) -> list[str]:
    return data.session_file(S).with_name("log.log").read_text().splitlines()


@pytest.mark.parametrize(
    "damage, why",
    [
        (lambda line: line.replace('"add"', '"adc"', 1), "not a log entry"),
        (lambda line: line.replace('"role": "assistant"', '"role": "assistanu"'), "role"),
        (lambda line: line.replace('"r": 3', '"r": NaN'), "a number out of range"),
        (lambda line: line.replace('"r": 3', '"r": 1e400'), "a number out of range"),
        (lambda line: line.replace('"r": 3', '"r": -3'), "a number out of range"),
        (lambda line: line[:-1] + "x", "not a log entry"),
    ],
)
def test_a_damaged_complete_line_is_an_error_and_comes_back_when_repaired(
    data: DataDir, damage: Any, why: str
) -> None:
    """A complete line is never mistaken for a torn one: the turn it holds would be lost
    without a word and the next turn written on top."""
    turn(data, [user("a")])
    turn(data, [user("b")])
    turn(data, [user("c"), assistant("done")])
    log = data.session_file(S).with_name("log.log")
    good = log.read_bytes()
    lines = _log_lines(data)
    log.write_text("\n".join([*lines[:-1], damage(lines[-1])]) + "\n")
    for attempt in (lambda: process(data).read(S), lambda: turn(data, [user("d")])):
        with pytest.raises(CorruptDocumentError) as caught:
            attempt()
        assert f"{log}: line {len(lines)} is damaged" in caught.value.message
        assert why in caught.value.message
    assert "\n".join([*lines[:-1], damage(lines[-1])]) + "\n" == log.read_text()  # untouched
    log.write_bytes(good)  # repaired by hand
    assert [m.text for m in process(data).read(S).messages][-2:] == ["c", "done"]


def test_a_damaged_middle_line_is_an_error(data: DataDir) -> None:
    for text in "abc":
        turn(data, [user(text)])
    log = data.session_file(S).with_name("log.log")
    lines = _log_lines(data)
    lines[0] = lines[0].replace('"b": 1', '"b": "one"')
    log.write_text("\n".join(lines) + "\n")
    with pytest.raises(CorruptDocumentError, match="line 1 is damaged"):
        process(data).read(S)


def test_a_huge_zero_tail_is_skipped_in_bounded_memory(data: DataDir) -> None:
    import tracemalloc

    turn(data, [user("a")])
    turn(data, [user("b")])
    log = data.session_file(S).with_name("log.log")
    with log.open("ab") as handle:
        handle.truncate(log.stat().st_size + 300 * 1024 * 1024)  # zeros, as a crash leaves
    tracemalloc.start()
    try:
        history = FileHistoryStore(data, warn=lambda text: None)
        assert [m.text for m in history.read(S).messages] == ["a", "b"]
        assert [m.text for m in history.tail(S, 1)] == ["b"]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 80 * 1024 * 1024, peak


def test_a_fold_interrupted_before_the_log_is_removed_reads_the_same(data: DataDir) -> None:
    turn(data, [user("a")])
    turn(data, [user("b")])
    log = data.session_file(S).with_name("log.log")
    kept = log.read_bytes()
    store = process(data)
    stored = store.read(S)
    store.write(S, [assistant("rewritten"), *stored.messages], stored.revision)  # a fold
    assert not log.exists()
    log.write_bytes(kept)  # as if the crash came before the log was removed
    stored = process(data).read(S)
    assert [m.text for m in stored.messages] == ["rewritten", "a", "b"]
    assert stored.revision == 3


def test_a_version_1_document_is_folded_before_anything_is_logged(data: DataDir) -> None:
    path = data.session_file(S)
    path.parent.mkdir(parents=True)
    path.write_text(dump_history(S.value, 4, "2026-01-01T00:00:00+00:00", [user("old")], False))
    assert json.loads(path.read_text())["version"] == 1
    turn(data, [assistant("new")])
    assert json.loads(path.read_text())["version"] == 2  # an old koog now refuses it
    turn(data, [user("again")])
    assert path.with_name("log.log").exists()
    assert [m.text for m in process(data).read(S).messages] == ["old", "new", "again"]


def test_the_log_is_folded_once_it_grows_past_its_bound(
    data: DataDir, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(file_history, "LOG_MIN_BYTES", 3000)
    turn(data, [user("start")])
    log = data.session_file(S).with_name("log.log")
    sizes = []
    for i in range(12):
        turn(data, [user(f"{i} " + "y" * 500)])
        sizes.append(log.stat().st_size if log.exists() else 0)
    assert max(sizes) <= 3000 + 700
    assert 0 in sizes  # folded at least once
    assert len(process(data).read(S).messages) == 13


def test_a_log_that_does_not_follow_the_document_is_reported(data: DataDir) -> None:
    turn(data, [user("a")])
    turn(data, [user("b")])
    log = data.session_file(S).with_name("log.log")
    entry = json.loads(log.read_text().splitlines()[-1])
    entry.update(r=9, b=8)
    log.write_text(json.dumps(entry) + "\n")
    with pytest.raises(CorruptDocumentError, match="follows 8"):
        process(data).read(S)


def test_a_concurrent_append_is_a_conflict(data: DataDir) -> None:
    turn(data, [user("a")])
    first, second = process(data), process(data)
    one, two = first.read(S), second.read(S)
    first.write(S, [*one.messages, user("from one")], one.revision)
    with pytest.raises(ConflictError):
        second.write(S, [*two.messages, user("from two")], two.revision)


def test_rename_and_delete_take_the_log_along(data: DataDir) -> None:
    turn(data, [user("a")])
    turn(data, [user("b")])
    store = process(data)
    store.rename(S, SessionName("moved"))
    assert not data.session_file(S).with_name("log.log").exists()
    assert [m.text for m in process(data).read(SessionName("moved")).messages] == ["a", "b"]
    store.delete(SessionName("moved"))
    assert process(data).sessions() == []


def test_a_process_reads_its_own_writes_and_others_as_a_new_process_would(
    data: DataDir,
) -> None:
    """A long-lived process (serve, the REPL) keeps the history it last read or wrote and
    returns it while the document and log are as it left them: what it returns is always
    what a new process reads, after its own appends and folds and after another's writes
    or a hand edit."""
    mine, other = process(data), process(data)
    history = [user("first"), Message(role="assistant", content="one", meta={"usage": {"n": 1}})]
    mine.write(S, history, None)
    for n in range(40):  # appends, and folds once the log is full
        stored = mine.read(S)
        assert stored.messages == process(data).read(S).messages
        reply = Message(role="assistant", content=f"a{n}", meta={"n": (n, n)})  # a tuple: a list
        added = [user(f"q{n} " + "x" * 20_000), reply]
        mine.write(S, [*stored.messages, *added], stored.revision)
        if n % 7 == 3:  # another process writes in between
            theirs = other.read(S)
            other.write(S, [*theirs.messages, user(f"theirs {n}")], theirs.revision)
        fresh = process(data).read(S)
        assert (mine.read(S).messages, mine.read(S).revision) == (fresh.messages, fresh.revision)
    log = data.session_file(S).with_suffix(".log")
    if log.exists():  # a hand edit of the last line's text
        text = log.read_text()
        log.write_text(text.replace('"a39"', '"b39"'))
        assert mine.read(S).messages[-1].content == "b39"


def test_a_hand_repair_during_a_turn_is_not_hidden_by_what_the_process_knew(
    data: DataDir,
) -> None:
    """A log line repaired by hand (STORAGE.md's remedy) between a long-lived process's
    read and its append: the process's later reads, and a fold it writes, keep the repair."""
    mine = process(data)
    mine.write(S, [user("first"), assistant("second")], None)
    stored = mine.read(S)
    mine.write(S, [*stored.messages, user("third")], stored.revision)
    stored = mine.read(S)
    log = data.session_file(S).with_suffix(".log")
    log.write_text(log.read_text().replace('"third"', '"THIRD"'))  # the repair
    mine.write(S, [*stored.messages, assistant("fourth")], stored.revision)
    assert mine.read(S).messages == process(data).read(S).messages
    assert [m.content for m in mine.read(S).messages][2] == "THIRD"


def test_a_window_that_drops_most_of_the_document_writes_what_it_keeps(data: DataDir) -> None:
    """Issue 53: a window of 40 on a 2,000-message session writes the 40 as the document,
    so no later read parses the 1,960 it dropped; dropping a few only logs."""
    turn(data, [m for i in range(1000) for m in (user(f"q{i}"), assistant(f"a{i}"))])
    document = data.session_file(S)
    turn(data, [user("one more"), assistant("ok")], window=1990)  # a few dropped: logged
    assert json.loads(document.read_text())["message_count"] == 2000
    turn(data, [user("windowed"), assistant("ok")], window=40)
    written = json.loads(document.read_text())
    assert written["message_count"] == 40 and len(written["messages"]) == 40
    assert not document.with_name("log.log").exists()
    stored = process(data).read(S)
    assert [m.text for m in stored.messages][-2:] == ["windowed", "ok"]
    assert len(stored.messages) == 40 and stored.revision == 3
