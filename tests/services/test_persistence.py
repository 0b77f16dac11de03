"""Turns as checkpointed steps, tools, resume and rollback over real files with a fake model.

Koog's persistence cases 37-44 (KOOG_SEMANTICS §5.2), translated to koog's turn steps.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from koogcli.core.errors import ModelError, TurnCancelledError, UnknownFormatError, UsageError
from koogcli.core.messages import ToolCall
from koogcli.core.model_port import Completion
from koogcli.core.names import SessionName
from koogcli.services import checkpoints, rollback, turn
from tests.fakes.chat_model import FakeChatModel, ProcessDeath, calls, mortal
from tests.support.stored import roll

pytestmark = pytest.mark.usefixtures("backend")

S = SessionName("p")


def ask(ctx: Any, text: str) -> Any:
    return turn.run_turn(ctx, turn.TurnRequest(S, text))


def steps(ctx: Any) -> list[str]:
    return [
        c.step if c.kind == "step" else c.kind
        for c in ctx.checkpoints.headers(S)
        if c.kind != "restore"
    ]


def test_case37_no_checkpoints_runs_from_the_start(make_ctx: Callable[..., Any]) -> None:
    ctx = make_ctx()
    assert turn.resume_turn(ctx, S) is None
    assert ask(ctx, "hello").reply == "echo: hello"
    assert steps(ctx) == ["load", "model:1", "store", "tombstone"]


def test_tool_loop_and_schemas(
    make_ctx: Callable[..., Any], fake_model: FakeChatModel, tools: Callable[[], list[list[str]]]
) -> None:
    fake_model.enqueue(calls(("create_user", {"name": "Alex"})), "Alex exists now")
    ctx = make_ctx()
    result = ask(ctx, "make Alex")
    assert result.reply == "Alex exists now"
    assert tools() == [["create_user", "Alex"]]
    assert [t["function"]["name"] for t in fake_model.requests[0].tools] == [
        "create_user",
        "lookup",
    ]
    second = fake_model.requests[1].messages
    assert (second[-1].role, second[-1].text) == ("tool", "created Alex")
    assert steps(ctx) == ["load", "model:1", "tool:1.1", "model:2", "store", "tombstone"]
    assert [m.role for m in ctx.history.read(S).messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]


def test_tool_errors_and_bad_arguments_go_back_to_the_model(
    make_ctx: Callable[..., Any], fake_model: FakeChatModel, tools: Callable[[], list[list[str]]]
) -> None:
    bad = Completion(
        "", (ToolCall("c1", "create_user", '{"name": '), ToolCall("c2", "missing", "{}"))
    )
    fake_model.enqueue(bad, "sorry about that")
    result = ask(make_ctx(), "go")
    assert result.reply == "sorry about that"
    results = [m.text for m in fake_model.requests[1].messages if m.role == "tool"]
    assert results[0].startswith("Error: invalid arguments for create_user")
    assert "no tool named 'missing'" in results[1]
    assert tools() == []


def test_max_tool_rounds_forces_a_text_answer(
    make_ctx: Callable[..., Any],
    fake_model: FakeChatModel,
    tools: Any,
    write_config: Callable[[str], Path],
    tmp_path: Path,
) -> None:
    config = (tmp_path / "config.toml").read_text()
    write_config("[chat]\nmax_tool_rounds = 2\n" + config)
    fake_model.enqueue(*[calls(("lookup", {"city": "Seville"}))] * 2, "final")
    assert ask(make_ctx(), "loop").reply == "final"
    assert [bool(r.tools) for r in fake_model.requests] == [True, True, False]


def test_case40_crash_after_third_tool_resumes_without_rerunning(
    make_ctx: Callable[..., Any], fake_model: FakeChatModel, tools: Callable[[], list[list[str]]]
) -> None:
    ctx = mortal(make_ctx())
    fake_model.enqueue(
        calls(("lookup", {"city": "Seville"})),
        calls(("lookup", {"city": "Lisbon"})),
        calls(("lookup", {"city": "Cebu"})),
        ProcessDeath(),
    )
    with pytest.raises(ProcessDeath):
        ask(ctx, "who sailed around the world?")
    last = ctx.checkpoints.headers(S)[-1]
    assert last.step == "tool:3.1" and "Ferdinand Magellan" in (last.output or "")
    full = ctx.checkpoints.get(S, last.id)
    assert [m.role for m in full.messages] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
        "tool",
    ]
    assert ctx.history.read(S).messages == []
    fake_model.enqueue("Magellan")
    resumed = turn.resume_turn(ctx, S)
    assert (
        resumed is not None and resumed.reply == "Magellan" and resumed.resumed_after == "tool:3.1"
    )
    assert len(tools()) == 3
    assert ctx.history.read(S).messages[-1].text == "Magellan"


def test_case38_resume_after_model_step_does_not_call_the_model_for_it(
    make_ctx: Callable[..., Any], fake_model: FakeChatModel, tools: Callable[[], list[list[str]]]
) -> None:
    ctx = mortal(make_ctx())
    fake_model.enqueue(calls(("create_user", {"name": "Ada"})), ProcessDeath())
    with pytest.raises(ProcessDeath):
        ask(ctx, "make Ada")
    # Drop the tool step so the latest checkpoint is the first model step.
    tool_step = ctx.checkpoints.headers(S)[-1]
    ctx.checkpoints.delete(S, tool_step.id)
    fake_model.enqueue("Ada is in")
    requests_before = len(fake_model.requests)
    result = turn.resume_turn(ctx, S)
    assert result is not None and result.reply == "Ada is in"
    assert len(fake_model.requests) == requests_before + 1  # only the request after the tool
    assert tools() == [["create_user", "Ada"], ["create_user", "Ada"]]


def test_case41_success_leaves_a_tombstone_and_the_next_run_starts_fresh(
    make_ctx: Callable[..., Any],
) -> None:
    ctx = make_ctx()
    ask(ctx, "one")
    assert ctx.checkpoints.headers(S)[-1].kind == "tombstone"
    assert turn.resume_turn(ctx, S) is None
    ask(ctx, "two")
    assert steps(ctx)[-4:] == ["load", "model:1", "store", "tombstone"]


def test_case42_failed_run_is_closed_and_leaves_no_restore_point(
    make_ctx: Callable[..., Any], fake_model: FakeChatModel
) -> None:
    """§5.10 departs from Koog here: an API error is a failed turn, not an interrupted one."""
    ctx = make_ctx()
    fake_model.enqueue(ModelError("first try fails"))
    with pytest.raises(ModelError) as info:
        ask(ctx, "try")
    assert "--resume" not in (info.value.hint or "")
    assert steps(ctx) == ["load", "tombstone"]
    assert ctx.checkpoints.headers(S)[-1].reason == "failed"
    assert turn.interrupted(ctx, S) is None and checkpoints.list_(ctx, S) == []


def test_case42_died_run_resumes_and_adds_one_checkpoint(
    make_ctx: Callable[..., Any], fake_model: FakeChatModel
) -> None:
    ctx = mortal(make_ctx())
    fake_model.enqueue(ProcessDeath())
    with pytest.raises(ProcessDeath):
        ask(ctx, "try")
    assert steps(ctx) == ["load"]
    fake_model.enqueue("Second try successful")
    assert turn.resume_turn(ctx, S).reply == "Second try successful"  # type: ignore[union-attr]
    assert steps(ctx) == ["load", "model:1", "store", "tombstone"]
    assert turn.resume_turn(ctx, S) is None


def test_case44_step_checkpoints_record_model_parameters(
    make_ctx: Callable[..., Any], tools: Any
) -> None:
    ctx = make_ctx(KOOG_TEMPERATURE="0.42")
    ask(ctx, "hi")
    step = [c for c in ctx.checkpoints.headers(S) if c.kind == "step"][-1]
    details = ctx.checkpoints.get(S, step.id).details
    assert details["temperature"] == 0.42
    assert details["tools"] == ["create_user", "lookup"]
    assert details["rounds"] == 1 and details["model"] == "gpt-4o-mini"


def test_case43_rollback_runs_compensating_tools_newest_first(
    make_ctx: Callable[..., Any], fake_model: FakeChatModel, tools: Callable[[], list[list[str]]]
) -> None:
    ctx = make_ctx()
    fake_model.enqueue(calls(("create_user", {"name": "user-1"})), "ok")
    ask(ctx, "one")
    ckpt = checkpoints.create(ctx, S, "ckpt-1")
    fake_model.enqueue(
        calls(("create_user", {"name": "user-2"})), calls(("create_user", {"name": "user-3"})), "ok"
    )
    ask(ctx, "two more")
    before = ctx.history.read(S).messages
    result = roll(ctx, S, checkpoints.find(ctx, "ckpt-1", S), True)
    assert tools()[-2:] == [["remove_user", "user-3"], ["remove_user", "user-2"]]
    assert ctx.history.read(S).messages == list(ckpt.messages)
    assert result.messages_before == len(before) and not result.failed
    # The rollback took a restore point first; --latest would bring back a history that
    # claims user-2 and user-3 exist, so it is refused unless forced, and then says so.
    undo = rollback.choose(ctx, S, None, latest=True)
    with pytest.raises(UsageError, match=r"create_user\(user-2\), create_user\(user-3\)"):
        roll(ctx, S, undo, compensate=False)
    assert ctx.history.read(S).messages == list(ckpt.messages)
    forced = roll(ctx, S, undo, compensate=False, force=True)
    restored = ctx.history.read(S).messages
    assert restored[:-1] == before and restored[-1].meta["kind"] == "note"
    assert forced.note is not None and "user-3" in forced.note.text
    assert tools()[-1] == ["remove_user", "user-2"]  # no compensation on --latest


def test_failing_compensation_is_reported_and_the_rest_still_run(
    make_ctx: Callable[..., Any], fake_model: FakeChatModel, tools: Callable[[], list[list[str]]]
) -> None:
    ctx = make_ctx()
    ask(ctx, "hello")
    ckpt = checkpoints.create(ctx, S, None)
    fake_model.enqueue(
        calls(
            ("create_user", {"name": "Fine"}),
            ("create_user", {"name": "Broken"}),
            ("lookup", {"city": "Rome"}),
        ),
        "ok",
    )
    ask(ctx, "three")
    result = roll(ctx, S, ckpt, compensate=True)
    outcomes = [(c.call.name, c.outcome.error if c.outcome else None) for c in result.compensations]
    assert outcomes == [("lookup", None), ("create_user", True), ("create_user", False)]
    assert tools()[-2:] == [["remove_user", "Broken"], ["remove_user", "Fine"]]
    assert ctx.history.read(S).messages == list(ckpt.messages)


def test_cancelled_turn_is_not_resumable(
    make_ctx: Callable[..., Any], fake_model: FakeChatModel
) -> None:
    ctx = make_ctx()
    fake_model.enqueue(KeyboardInterrupt())
    with pytest.raises(TurnCancelledError):
        ask(ctx, "stop")
    assert steps(ctx)[-1] == "tombstone" and turn.resume_turn(ctx, S) is None


def test_abandon_keeps_the_restore_point(
    make_ctx: Callable[..., Any], fake_model: FakeChatModel
) -> None:
    ctx = mortal(make_ctx())
    fake_model.enqueue(ProcessDeath())
    with pytest.raises(ProcessDeath):
        ask(ctx, "x")
    assert turn.abandon(ctx, S) is not None
    assert turn.interrupted(ctx, S) is None
    assert [c.reason for c in checkpoints.list_(ctx, S)] == ["turn"]


def test_restore_points_before_clear_and_import(make_ctx: Callable[..., Any]) -> None:
    from koogcli.services import history

    ctx = make_ctx()
    ask(ctx, "keep me")
    before = ctx.history.read(S).messages
    history.clear(ctx, S)
    roll(ctx, S, rollback.choose(ctx, S, None, True), compensate=False)
    assert ctx.history.read(S).messages == before
    history.import_(ctx, S, "[]", "<x>", replace=True)
    assert [c.reason for c in checkpoints.list_(ctx, S)][:3] == ["import", "rollback", "clear"]


def test_unknown_version_refuses_resume_and_rollback(
    make_ctx: Callable[..., Any], fake_model: FakeChatModel, backend: str
) -> None:
    ctx = mortal(make_ctx())
    fake_model.enqueue(ProcessDeath())
    with pytest.raises(ProcessDeath):
        ask(ctx, "x")
    with ctx.checkpoints.db.transaction() as cur:  # as a newer koog would have written them
        cur.execute("UPDATE checkpoints SET format_version = 7")
    with pytest.raises(UnknownFormatError):
        turn.resume_turn(ctx, S)
    restore = checkpoints.list_(ctx, S)[0]
    assert not restore.readable
    with pytest.raises(UnknownFormatError):
        roll(ctx, S, restore, compensate=False)


def test_persistence_disabled_takes_no_checkpoints(
    make_ctx: Callable[..., Any], write_config: Callable[[str], Path]
) -> None:
    write_config("[persistence]\nenabled = false\n")
    ctx = make_ctx()
    assert ask(ctx, "hi").checkpoint is None
    assert ctx.checkpoints.headers(S) == []


def test_imported_tool_calls_are_not_compensated_unless_asked(
    make_ctx: Callable[..., Any], tools: Callable[[], list[list[str]]]
) -> None:
    from koogcli.services import history

    ctx = make_ctx()
    ask(ctx, "hello")
    point = checkpoints.create(ctx, S, "before-import")
    doc = [
        {
            "id": "a1",
            "role": "assistant",
            "content": None,
            "created_at": "2026-01-01T00:00:00Z",
            "tool_calls": [
                {
                    "id": "imp1",
                    "type": "function",
                    "function": {"name": "create_user", "arguments": '{"name": "Imp"}'},
                }
            ],
        },
        {
            "id": "t1",
            "role": "tool",
            "content": "created Imp",
            "created_at": "2026-01-01T00:00:01Z",
            "tool_call_id": "imp1",
            "name": "create_user",
        },
    ]
    history.import_(ctx, S, json.dumps(doc), "<test>")
    done = roll(ctx, S, checkpoints.find(ctx, "before-import", S), True)
    assert [c.status for c in done.compensations] == ["left in place"] and tools() == []
    assert "history import" in done.compensations[0].reason
    history.import_(ctx, S, json.dumps(doc), "<test>")
    again = roll(ctx, S, point, True, compensate_imported=True)
    # The second import's call is another call: "imp1" is taken in this session (§5.15).
    [undone] = again.compensations
    assert undone.call.name == "create_user" and undone.call.id != "imp1"
    assert tools() == [["remove_user", "Imp"]]


@pytest.mark.files_only
def test_a_turn_syncs_what_it_keeps_and_not_its_step_checkpoints(
    make_ctx: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    from koogcli.core.names import SessionName
    from koogcli.services.turn import TurnRequest, run_turn

    ctx = make_ctx()
    run_turn(ctx, TurnRequest(SessionName("sync"), "first"))
    synced: list[str] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    run_turn(ctx, TurnRequest(SessionName("sync"), "second"))
    # Documents are synced as their temp file (.NAME.PID.TOKEN.tmp) before the rename.
    names = [
        name[1:].rsplit(".", 3)[0] if name.startswith(".") and name.endswith(".tmp") else name
        for name in (path.rsplit("/", 1)[-1] for path in synced)
    ]
    # The history (its append log) is synced before the turn counts as stored; checkpoints
    # and the transcript are commits to koog.sqlite3's write-ahead log (synchronous=NORMAL:
    # a killed process loses none of them).
    assert names == ["sync.log"], names
    assert len(ctx.checkpoints.headers(SessionName("sync"))) >= 2 + 2 + 3 * 2


@pytest.mark.files_only  # PostgreSQL stores the history itself as rows too
def test_each_turn_adds_only_its_own_messages_to_the_checkpoint_objects(
    make_ctx: Callable[..., Any],
) -> None:
    """A new process finds the stored history's message rows by their digests: the rows
    grow by what each turn adds, not by the history again."""
    from koogcli.adapters import digests as message_digests
    from koogcli.services.turn import TurnRequest, run_turn

    session = SessionName("grow")
    counts = []
    for text in ("one", "two", "three", "four"):
        message_digests.forget()  # as in a new process
        ctx = make_ctx()
        run_turn(ctx, TurnRequest(session, text))
        found = ctx.checkpoints.db.rows(
            "SELECT count(*) FROM messages WHERE session = %s", [session.value]
        )
        counts.append(int(found[0][0]))
    # The stored system prompt first reaches a checkpoint in the second turn's restore point.
    assert [b - a for a, b in itertools.pairwise(counts)] == [3, 2, 2]


def test_a_turn_that_ends_while_it_is_looked_at_is_not_interrupted(
    make_ctx: Callable[..., Any],
) -> None:
    """Its step was read before its tombstone was stored, its owner looked at after the
    process ended: a second read sees the tombstone (found with 4 x 25 concurrent turns)."""
    ctx = mortal(make_ctx())  # owners read as gone, as once the process has ended
    ask(ctx, "done")
    real = ctx.checkpoints
    reads = []

    class FirstReadBeforeTheTombstone:
        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

        def headers(self, session: SessionName) -> list[Any]:
            reads.append(session)
            found = real.headers(session)
            return [c for c in found if c.kind != "tombstone"] if len(reads) == 1 else found

    ctx.storage.checkpoints = FirstReadBeforeTheTombstone()
    assert turn.interrupted(ctx, S) is None
    assert len(reads) == 2
