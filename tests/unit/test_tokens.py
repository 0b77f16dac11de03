"""The token estimate: what it counts, and calibration from a session's own answers."""

from __future__ import annotations

from koogcli.core import tokens
from koogcli.core.messages import Message, ToolCall, assistant, user


def test_longer_and_stranger_text_costs_more() -> None:
    assert tokens.text_tokens("") == 0
    assert tokens.text_tokens("deploy") == 1
    assert tokens.text_tokens("internationalization") > tokens.text_tokens("deploy")
    assert tokens.text_tokens("1234567") == 3  # digits in threes
    assert tokens.text_tokens("a == b;") == 5  # each symbol counts
    assert tokens.text_tokens("развертывание") > tokens.text_tokens("deployment")
    assert tokens.text_tokens("部署失败") >= 3


def test_messages_count_framing_and_tool_calls() -> None:
    plain = assistant("ok")
    calling = assistant("ok", [ToolCall("c1", "search", '{"q": "deploy"}')])
    assert tokens.message_tokens(plain) == tokens.PER_MESSAGE + 1
    assert tokens.message_tokens(calling) > tokens.message_tokens(plain) + 5
    assert tokens.request_tokens([]) == tokens.PER_REQUEST


def answered(model: str, reported: int, estimate: int) -> Message:
    usage = {"prompt_tokens": reported, "completion_tokens": 1, "total_tokens": reported + 1}
    meta: dict[str, object] = {"model": model, "usage": usage, "estimate": estimate}
    return Message(role="assistant", content="a", meta=meta)


def test_calibration_comes_from_the_newest_answer_of_the_same_model() -> None:
    history = [user("q"), answered("m", 300, 200), user("q"), answered("other", 50, 100)]
    scale = tokens.calibration(history, "m")
    assert scale.calibrated and scale.ratio == 1.5 and scale.scale(100) == 150
    assert tokens.calibration(history, "other").ratio == 0.5
    unknown = tokens.calibration(history, "new-model")
    assert not unknown.calibrated and unknown.scale(100) == 100
    # An answer without usage (a server that reports none) calibrates nothing.
    bare = Message(role="assistant", content="a", meta={"model": "m"})
    assert tokens.calibration([*history, bare], "m").ratio == 1.5


def test_compression_carries_the_calibration_on_its_summary() -> None:
    before = [user("q"), answered("m", 300, 200), user("q2"), answered("n", 90, 100)]
    summary = Message(role="assistant", content="sum", meta={"kind": "summary"})
    after = tokens.carry(before, [user("q"), summary])
    assert after[-1].meta == {"kind": "summary", "calibration": {"m": 1.5, "n": 0.9}}
    assert tokens.calibration(after, "m").ratio == 1.5
    # Compressed again: the carried ratios carry on.
    again = tokens.carry(after, [Message(role="assistant", content="s2", meta={"kind": "facts"})])
    assert tokens.calibration(again, "n").ratio == 0.9
    assert tokens.carry([user("q")], [summary]) == [summary]  # nothing to carry


def test_a_replys_own_count_is_used_unless_it_cannot_be_its_text() -> None:
    text = "| a | b |\n|---|---|\n| 1 | 2 |"
    raw = tokens.content_tokens(Message(role="assistant", content=text))
    counted = Message(role="assistant", content=text, meta={"usage": {"completion_tokens": 20}})
    assert tokens.reply_tokens(counted) == 20
    # A reasoning model counts its hidden reasoning as completion tokens: not this text's.
    reasoned = Message(role="assistant", content=text, meta={"usage": {"completion_tokens": 900}})
    assert tokens.reply_tokens(reasoned) is None
    assert tokens.Calibration(2.0, True).message(reasoned) == tokens.PER_MESSAGE + 2 * raw


def test_the_ratio_is_learned_from_what_the_known_parts_leave() -> None:
    answer = Message(
        role="assistant",
        content="ok",
        meta={"model": "m", "usage": {"prompt_tokens": 130}, "estimate": 50, "estimate_known": 30},
    )
    scale = tokens.calibration([answer], "m")
    assert scale.calibrated and scale.ratio == 2.0  # (130 - 30) / 50
