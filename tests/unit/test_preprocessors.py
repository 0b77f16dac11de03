"""Preprocessors, including Koog's WindowSizePreProcessor cases 15-22 (KOOG_SEMANTICS §5.2).

OpenAI shape: a tool call is an assistant message with tool_calls, a result a `tool`
message. Koog's User message holding a result plus text (case 17) becomes a tool message
followed by a user message.
"""

from __future__ import annotations

import re

import pytest

from koogcli.core.errors import ConfigError
from koogcli.core.messages import Message, ToolCall, assistant, system, tool_result, user
from koogcli.core.preprocessors import (
    CustomPreprocessor,
    FilterPreprocessor,
    Pipeline,
    PredicateFilter,
    RedactPreprocessor,
    TokenWindowPreprocessor,
    WindowPreprocessor,
)
from koogcli.core.tokens import message_tokens


def call(call_id: str | None, name: str = "search") -> Message:
    return assistant(None, [ToolCall(call_id, name, "{}")])


def result(call_id: str | None, name: str = "search", text: str = "r") -> Message:
    return tool_result(call_id, name, text)


def window(n: int, messages: list[Message]) -> list[Message]:
    """Koog's rule: the cases run with step 1 (KOOG_SEMANTICS §1.4, koog's deviation)."""
    return WindowPreprocessor(n, step=1)(messages)


def test_case15_window_keeps_last_messages() -> None:
    msgs = [user("U1"), assistant("A2"), user("U3"), assistant("A4")]
    assert window(2, msgs) == msgs[2:]


def test_case16_window_drops_result_whose_call_fell_outside() -> None:
    msgs = [user("q"), call("1"), result("1"), assistant("a")]
    assert window(2, msgs) == [msgs[3]]
    assert window(3, msgs) == msgs[1:]


def test_case17_text_beside_an_orphaned_result_is_kept() -> None:
    msgs = [call("1"), result("1"), user("also this"), assistant("a")]
    assert [m.text for m in window(3, msgs)] == ["also this", "a"]


def test_case18_idless_calls_pair_by_tool_name() -> None:
    msgs = [user("q"), call(None, "search"), result(None, "search"), assistant("a")]
    assert window(3, msgs) == msgs[1:]
    assert window(2, msgs) == [msgs[3]]


def test_case19_results_consume_calls_fifo() -> None:
    outside, inside = call(None), call(None)
    old, new = result(None, text="old"), result(None, text="new")
    assert window(3, [outside, inside, old, new]) == [inside, new]


def test_case20_one_call_cannot_match_repeated_results() -> None:
    c, r1, r2 = call(None), result(None, text="first"), result(None, text="second")
    assert window(3, [c, r1, r2]) == [c, r1]


def test_case21_id_keys_and_name_keys_never_mix() -> None:
    c = assistant(None, [ToolCall("search", "other", "{}")])
    r = result(None, "search")
    assert window(2, [c, r]) == [c]


def test_case22_window_zero_keeps_nothing() -> None:
    assert window(0, [user("a"), assistant("b")]) == []


def test_window_keeps_tool_call_with_results() -> None:
    msgs = [user("q"), call("7"), result("7"), assistant("done")]
    assert window(3, msgs) == msgs[1:]


def test_filter_conditions_all_apply() -> None:
    msgs = [system("s"), user("hello there"), assistant("hi"), user("secret plan"), result("1")]
    f = FilterPreprocessor(
        roles=frozenset({"user", "assistant"}), min_chars=3, exclude_regex=re.compile("secret")
    )
    assert [m.text for m in f(msgs)] == ["hello there"]
    assert [m.text for m in FilterPreprocessor(max_chars=2)(msgs)] == ["s", "hi", "r"]
    inc = FilterPreprocessor(include_regex=re.compile(r"^h"))
    assert [m.text for m in inc(msgs)] == ["hello there", "hi"]


def test_redact_replaces_every_match() -> None:
    r = RedactPreprocessor(re.compile(r"[\w.+-]+@[\w-]+\.[\w.-]+"), "[REDACTED]")
    out = r([user("mail a@b.com or c.d@e.org"), assistant("none")])
    assert out[0].text == "mail [REDACTED] or [REDACTED]"
    assert out[1].text == "none"


def test_window_then_filter_differs_from_filter_then_window() -> None:
    msgs = [user("Q1"), assistant("A1"), user("Q2"), assistant("A2"), user("Q3"), assistant("A3")]
    users = PredicateFilter(lambda m: m.role == "user")
    assert [m.text for m in Pipeline((WindowPreprocessor(2, step=1), users))(msgs)] == ["Q3"]
    assert [m.text for m in Pipeline((users, WindowPreprocessor(2, step=1)))(msgs)] == ["Q2", "Q3"]


def test_custom_preprocessor_errors_name_the_callable() -> None:
    def boom(messages: list[Message]) -> list[Message]:
        raise ValueError("bad day")

    with pytest.raises(ConfigError, match=r"'mod:boom' raised ValueError: bad day"):
        CustomPreprocessor("mod:boom", boom)([user("x")])
    with pytest.raises(ConfigError, match="returned str, not a list of Message"):
        CustomPreprocessor("mod:text", lambda ms: "nope")([user("x")])
    upper = CustomPreprocessor("mod:up", lambda ms: [m.with_content(m.text.upper()) for m in ms])
    assert upper([user("x")])[0].text == "X"


def test_a_catastrophic_pattern_fails_in_bounded_time() -> None:
    import time

    from koogcli.adapters.tools.bounded_regex import BoundedPattern
    from koogcli.core.errors import ConfigError
    from koogcli.core.messages import user
    from koogcli.core.preprocessors import RedactPreprocessor

    slow = BoundedPattern(r"(a|aa)+$", "chat_memory.preprocessors.0.pattern", timeout=0.3)
    started = time.monotonic()
    with pytest.raises(ConfigError, match=r"chat_memory\.preprocessors\.0\.pattern"):
        RedactPreprocessor(slow)([user("a" * 60 + "b")])
    assert time.monotonic() - started < 3
    fine = BoundedPattern(r"\d{4}", "k")
    assert RedactPreprocessor(fine, "#")([user("pin 1234")])[0].text == "pin #"


# --- token window -----------------------------------------------------------------------


def tw(budget: int, messages: list[Message]) -> list[Message]:
    return TokenWindowPreprocessor(budget, step_tokens=1)(messages)


def texts(messages: list[Message]) -> list[str]:
    return [m.text or "call" for m in messages]


def words(n: int, tag: str) -> str:
    return " ".join([tag] * n)


def test_token_window_keeps_the_newest_messages_that_fit() -> None:
    history = [user(words(50, "a")), assistant(words(50, "b")), user(words(50, "c"))]
    each = message_tokens(history[0])
    assert each == message_tokens(history[2])
    assert tw(2 * each, history) == history[1:]
    assert tw(2 * each - 1, history) == history[2:]
    assert tw(10_000, history) == history
    assert tw(1, history) == []
    for budget in (1, each, 2 * each, 3 * each, 10_000):
        assert sum(message_tokens(m) for m in tw(budget, history)) <= budget


def test_token_window_always_keeps_system_prompt_and_memory() -> None:
    pinned = user("Here are the relevant facts from memory about deploys:\n- blue-green")
    recalled = Message(role="user", content="pinned note", meta={"kind": "memory"})
    history = [system("be brief"), pinned, recalled, user(words(80, "old")), user("new")]
    kept = tw(sum(message_tokens(m) for m in [*history[:3], history[-1]]), history)
    assert texts(kept) == ["be brief", pinned.text, "pinned note", "new"]
    # Pinned messages count first: what is left for the rest may be nothing.
    assert texts(tw(1, history)) == ["be brief", pinned.text, "pinned note"]


def test_token_window_never_orphans_a_tool_result() -> None:
    history = [user(words(60, "q")), call("c1"), result("c1", text=words(5, "r")), user("ok")]
    tail = sum(message_tokens(m) for m in history[2:])
    kept = tw(tail, history)  # the result fits, its call does not: both go
    assert texts(kept) == ["ok"]
    with_call = tw(tail + message_tokens(history[1]), history)
    assert with_call == history[1:]


def test_token_window_runs_in_a_pipeline_after_a_filter() -> None:
    history = [user("keep " + words(30, "x")), assistant("drop me"), user("keep too")]
    only_users = FilterPreprocessor(roles=frozenset({"user"}))
    budget = message_tokens(history[2])
    assert texts(
        Pipeline((only_users, TokenWindowPreprocessor(budget, step_tokens=1)))(history)
    ) == ["keep too"]
