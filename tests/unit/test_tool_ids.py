"""Tool-call identity (SPEC §5.15): ids unique within a session, results following calls."""

from __future__ import annotations

from koogcli.core.messages import Message, ToolCall, assistant, tool_result, user
from koogcli.core.tool_ids import MINTED_LENGTH, distinct, identify, ids_in, normalise


def call(call_id: str | None, name: str = "f") -> ToolCall:
    return ToolCall(call_id, name, "{}")


def test_unique_server_ids_are_kept() -> None:
    calls = (call("call_abc"), call("call_def"))
    assert identify(calls, lambda _id: False) == calls


def test_taken_repeated_and_missing_ids_get_new_ones() -> None:
    out = identify((call("call_0"), call("call_0"), call(""), call(None)), {"call_0"}.__contains__)
    ids = [c.id for c in out]
    assert len(set(ids)) == 4 and "call_0" not in ids
    assert all(i is not None and len(i) == MINTED_LENGTH and i.isalnum() for i in ids)


def test_a_repeated_id_in_one_message_keeps_the_first() -> None:
    out = identify((call("edit:22"), call("edit:22")), lambda _id: False)
    assert out[0].id == "edit:22" and out[1].id != "edit:22"


def test_results_follow_their_renamed_calls_in_order() -> None:
    history: list[Message] = [
        user("go"),
        assistant(None, [call("x", "a"), call("x", "b")]),
        tool_result("x", "a", "result a"),
        tool_result("x", "b", "result b"),
        assistant(None, [call("x", "c")]),
        tool_result("x", "c", "result c"),
        assistant(None, [call(None, "d")]),
        tool_result(None, "d", "result d"),
    ]
    out = normalise(history)
    calls = [c for m in out for c in m.tool_calls]
    results = [m for m in out if m.role == "tool"]
    assert len({c.id for c in calls}) == 4
    assert [r.tool_call_id for r in results] == [c.id for c in calls]
    assert [r.text for r in results] == ["result a", "result b", "result c", "result d"]
    assert ids_in(out) == {c.id for c in calls}


def test_a_history_with_distinct_ids_is_sent_as_it_is() -> None:
    history = [assistant(None, [call("a")]), tool_result("a", "f", "ok")]
    assert distinct(history) == history
    assert distinct(history)[0] is history[0]
