"""Checkpoint rules and the checkpoint store (Koog's persistence case 45, translated), on
SQLite (the file backend's koog.sqlite3) and PostgreSQL: one implementation for both."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from koogcli.core import checkpoints as core
from koogcli.core.checkpoints import Checkpoint
from koogcli.core.errors import CorruptDocumentError, UnknownFormatError
from koogcli.core.messages import ToolCall, assistant, system, tool_result, user
from koogcli.core.names import SessionName

S = SessionName("cp")


def make(kind: str = "restore", messages: tuple = (), **kw: object) -> Checkpoint:
    return Checkpoint(
        core.new_checkpoint_id(),
        "cp",
        0,
        kind,
        "2023-01-01T00:00:00Z",  # type: ignore[arg-type]
        messages,
        **kw,
    )  # type: ignore[arg-type]


@pytest.fixture
def open_store(backend: str, make_ctx: Callable[..., Any]) -> Callable[[], Any]:
    """The backend's checkpoint store; each call as a new process opens it."""
    return lambda: make_ctx().checkpoints


@pytest.fixture
def store(open_store: Callable[[], Any]) -> Any:
    return open_store()


def _sql(store: Any, statement: str, params: list[object] | None = None) -> list[Any]:
    rows: list[Any] = store.db.rows(statement, params or [])
    return rows


def test_case45_save_two_list_latest_round_trip(store: Any) -> None:
    msgs = (system("sys"), user("hi"), assistant("hello"))
    first = store.save(make(messages=msgs, label="test-checkpoint"))
    later = store.save(
        make(
            kind="step",
            messages=msgs[:2],
            step="model:1",
            output="x",
            turn_id="t1",
            details={"temperature": 0.42},
        )
    )
    listed = store.headers(S)
    assert [c.id for c in listed] == [first.id, later.id]
    assert [c.seq for c in listed] == [0, 1]
    assert core.latest(listed).id == later.id  # type: ignore[union-attr]
    again = store.get(S, first.id)
    assert again.messages == msgs and again.label == "test-checkpoint"
    step = store.get(S, later.id)
    assert (step.step, step.output, step.turn_id, step.details) == (
        "model:1",
        "x",
        "t1",
        {"temperature": 0.42},
    )


def test_messages_are_stored_once(store: Any, open_store: Callable[[], Any]) -> None:
    history = [user(f"message {i}") for i in range(50)]
    for n in range(10, 51, 10):
        store.save(make(messages=tuple(history[:n])))
    open_store().save(make(messages=tuple(history)))  # a new process: looked up, not added
    assert _sql(store, "SELECT count(*) FROM messages WHERE session = %s", [S.value])[0][0] == 50
    assert [c.message_count for c in store.headers(S)] == [10, 20, 30, 40, 50, 50]


def test_unknown_version_is_listed_but_refused(store: Any) -> None:
    store.put(Checkpoint("newer", "cp", 7, "restore", "2023-01-01T00:00:00Z", format_version=9))
    [listed] = store.headers(S)
    assert not listed.readable and listed.format_version == 9
    with pytest.raises(UnknownFormatError, match="format version 9"):
        store.get(S, "newer")


def test_a_changed_message_row_is_never_restored(store: Any) -> None:
    saved = store.save(make(messages=(user("the real words"),)))
    _sql(store, "UPDATE messages SET body = replace(body, 'real', 'fake') RETURNING id")
    with pytest.raises(CorruptDocumentError, match="was changed after it was stored"):
        store.get(S, saved.id)


def test_prune_keeps_manual_and_newest(store: Any) -> None:
    manual = store.save(make(manual=True, label="keep"))
    autos = [store.save(make(messages=(user(f"a{i}"),))) for i in range(5)]
    steps = [store.save(make(kind="step", step="load", turn_id=f"t{i}")) for i in range(5)]
    store.prune(S, 2)
    left = {c.id for c in store.headers(S)}
    assert left == {manual.id, autos[-2].id, autos[-1].id, steps[-2].id, steps[-1].id}
    kept = _sql(store, "SELECT count(*) FROM messages WHERE session = %s", [S.value])[0][0]
    assert kept == 2  # the messages only pruned checkpoints referred to are gone


@pytest.mark.files_only
def test_the_database_is_private(store: Any, data_dir: Path) -> None:
    store.save(make(messages=(user("x"),)))
    for path in data_dir.glob("koog.sqlite3*"):
        assert os.stat(path).st_mode & 0o777 == 0o600, path


def test_interrupted_turn_is_the_latest_step_without_a_tombstone() -> None:
    load = make(kind="step", step="load", turn_id="t")
    model = make(kind="step", step="model:1", turn_id="t")
    tomb = make(kind="tombstone", turn_id="t")
    numbered = [
        Checkpoint(c.id, c.session, i, c.kind, c.created_at, step=c.step)
        for i, c in enumerate([load, model])
    ]
    assert core.interrupted_turn(numbered).step == "model:1"  # type: ignore[union-attr]
    done = [*numbered, Checkpoint(tomb.id, "cp", 2, "tombstone", tomb.created_at)]
    assert core.interrupted_turn(done) is None
    assert core.interrupted_turn([]) is None


def test_case39_same_timestamp_latest_by_seq() -> None:
    a = Checkpoint("a", "cp", 0, "step", "2023-01-01T00:00:00Z", step="load")
    b = Checkpoint("b", "cp", 1, "step", "2023-01-01T00:00:00Z", step="model:1")
    assert core.latest([b, a]).id == "b"  # type: ignore[union-attr]


def test_removed_calls_are_the_later_ones_newest_first() -> None:
    base = [
        user("create alex"),
        assistant(None, [ToolCall("1", "create_user", '{"name":"Alex"}')]),
        tool_result("1", "create_user", "ok"),
    ]
    later = [
        user("two more"),
        assistant(
            None,
            [
                ToolCall("2", "create_user", '{"name":"Daniel"}'),
                ToolCall("3", "create_user", '{"name":"Maria"}'),
            ],
        ),
        tool_result("2", "create_user", "ok"),
        tool_result("3", "create_user", "ok"),
    ]
    plan = [call for call, _message in core.removed_calls(base, base + later)]
    assert [c.arguments for c in plan] == ['{"name":"Maria"}', '{"name":"Daniel"}']
    assert core.is_prefix(base, base + later) and not core.is_prefix(base, later)
    # Not an earlier state, still reported: the calls it takes out, by id.
    assert [c.id for c, _m in core.removed_calls(base, later)] == ["3", "2"]
    assert core.removed_calls(base + later, base) == []


def test_resolve_id_by_prefix() -> None:
    found = [make(), make()]
    assert core.resolve_id(found, found[0].id) == [found[0]]
    assert core.resolve_id(found, found[1].id[:6]) == [found[1]]


def test_a_long_lived_store_notices_another_process_dropping_the_session(
    store: Any, open_store: Callable[[], Any], make_ctx: Callable[..., Any]
) -> None:
    old = user("old")
    store.save(make(messages=(old,)))
    make_ctx().storage.drop_session(S)  # another process: `koog history delete`
    saved = store.save(make(messages=(old, user("new"))))
    assert [m.text for m in open_store().get(S, saved.id).messages] == ["old", "new"]


def test_compensation_journal_round_trip_and_update(
    store: Any, make_ctx: Callable[..., Any]
) -> None:
    call = ToolCall("c1", "create_user", '{"name": "bob"}')
    other = ToolCall("c2", "create_user", '{"name": "eve"}')
    store.record_compensations(
        S,
        [
            core.CompensationEntry(call, "pending", "p1", "t"),
            core.CompensationEntry(other, "pending", "p1", "t"),
        ],
    )
    store.record_compensations(S, [core.CompensationEntry(call, "running", "p1", "t2")], False)
    store.record_compensations(S, [core.CompensationEntry(call, "done", "p1", "t3")])
    entries = [(e.call, e.status, e.at) for e in store.compensations(S)]
    assert entries == [(call, "done", "t3"), (other, "pending", "t")]
    make_ctx().storage.drop_session(S)
    assert store.compensations(S) == []


def test_a_few_messages_of_a_long_session_reuse_its_rows(
    open_store: Callable[[], Any], backend: str
) -> None:
    """Issue 53: a restore point of a windowed history (a few messages) in a session whose
    older restore point holds thousands looks up only its own digests, and still takes the
    rows that exist (no message stored twice) and stores the new ones."""
    from koogcli.adapters.sql import row_map

    long = tuple(m for i in range(3000) for m in (user(f"q{i}"), assistant(f"a{i}")))
    open_store().save(make(messages=long))
    kept = (*long[-40:], user("new"))
    store = open_store()  # a new process: knows no rows
    row_map._KNOWN.clear()
    store.save(make(messages=kept))
    assert store.get(S, store.headers(S)[-1].id).messages == kept
    (count,) = _sql(store, "SELECT count(*) FROM messages WHERE session = %s", ["cp"])[0]
    assert count == 6001
    if backend == "files":
        [known] = row_map._KNOWN.values()
        assert not known.whole and len(known.ids) == 41  # only these were looked up
