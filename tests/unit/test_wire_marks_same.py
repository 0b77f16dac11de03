"""Which resent message is the stored one (SPEC §6 placement): by meaning, with what
clients change in transit ignored."""

from __future__ import annotations

from koogcli.core.messages import Message, ToolCall
from koogcli.core.wire_marks import same


def _call(arguments: str) -> Message:
    return Message(role="assistant", content=None, tool_calls=(ToolCall("t1", "Edit", arguments),))


def test_an_agent_filling_in_an_empty_default_resends_the_same_call() -> None:
    stored = _call('{"file_path": "a.txt", "old_string": "nine", "new_string": "ten"}')
    resent = _call(
        '{"replace_all": false, "file_path": "a.txt", "old_string": "nine", "new_string": "ten"}'
    )
    assert same(stored, resent)
    assert same(_call('{"a": 1}'), _call('{"a": 1, "b": null, "c": "", "d": [], "e": {}}'))


def test_a_real_argument_is_a_different_call() -> None:
    stored = _call('{"file_path": "a.txt", "old_string": "nine", "new_string": "ten"}')
    assert not same(
        stored, _call('{"file_path": "a.txt", "old_string": "nine", "new_string": "TEN"}')
    )
    assert not same(_call('{"a": 1}'), _call('{"a": 1, "replace_all": true}'))
    assert not same(_call('{"a": 1}'), _call('{"a": 1, "count": 0}'))  # 0 is a value, not false
    assert not same(Message(role="user", content=""), _call("{}"))
