"""Koog's history-compression cases 23-36 (KOOG_SEMANTICS §5.2) against a scripted model."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import pytest

from koogcli.core import compression as c
from koogcli.core.errors import UsageError
from koogcli.core.messages import Message, ToolCall
from tests.fakes import summaries


def t(n: int) -> str:
    return f"2023-01-01T00:{n:02d}:00Z"


def msg(
    role: str, text: str | None, n: int, calls: Sequence[ToolCall] = (), **kw: object
) -> Message:
    return Message(role=role, content=text, created_at=t(n), tool_calls=tuple(calls), **kw)  # type: ignore[arg-type]


def S(text: str, n: int) -> Message:
    return msg("system", text, n)


def U(text: str, n: int) -> Message:
    return msg("user", text, n)


def A(text: str, n: int) -> Message:
    return msg("assistant", text, n)


def TC(n: int, call_id: str = "ID") -> Message:
    return msg("assistant", None, n, [ToolCall(call_id, "DummyTool", "Args")])


def TR(n: int, call_id: str = "ID") -> Message:
    return msg("tool", "result", n, tool_call_id=call_id, name="DummyTool")


class Scripted:
    """Answers "TLDR" to summary requests and `facts_answer` to extraction requests."""

    def __init__(self, facts_answer: str = "") -> None:
        self.prompts: list[list[Message]] = []
        self.facts_answer = facts_answer

    def ask_all(self, prompts: Sequence[Sequence[Message]]) -> list[str]:
        self.prompts += [list(p) for p in prompts]
        return ["TLDR" if c.SUMMARY_PROMPT in p[-1].text else self.facts_answer for p in prompts]

    def ask_parsed(self, questions: Sequence[c.Question]) -> list[object | None]:
        answers = self.ask_all([q.messages for q in questions])
        out: list[object | None] = []
        for question, answer in zip(questions, answers, strict=True):
            try:
                out.append(question.parse(answer))
            except c.InvalidAnswer:
                out.append(None)  # what a summarizer gives once its retries are spent
        return out


def summarised(prompt: Sequence[Message]) -> list[str]:
    """The messages a summary request wraps, as `shape` writes them."""
    return summaries.summarised(prompt[-1].text)


def shape(messages: Sequence[Message] | None) -> list[str]:
    assert messages is not None
    return [m.text if not m.tool_calls else "TC" for m in messages]


SEVEN = [S("S0", 0), U("U0", 1), A("A0", 2), S("S1", 3), U("U1", 4), A("A1", 5), S("S2", 6)]
LONG = [
    S("S0", 0),
    U("User message 0", 1),
    A("A0", 2),
    TC(3, "a"),
    TR(4, "a"),
    TC(5, "b"),
    TR(6, "b"),
    S("S1", 7),
    U("U1", 8),
    A("A1", 9),
    TC(10, "c"),
    TR(11, "c"),
    TC(12, "d"),
    TR(13, "d"),
    A("A2", 14),
    S("S2", 15),
    A("A3", 16),
    TC(17, "e"),
    TR(18, "e"),
]


def run(
    strategy: c.Strategy, history: Sequence[Message], llm: Scripted | None = None
) -> list[Message] | None:
    return strategy.compress(history, c.memory_messages(history, True), llm or Scripted())


def test_case23_whole_history() -> None:
    out = run(c.WholeHistory(), [S("S", 0), U("U", 1), A("A", 2)])
    assert shape(out) == ["S", "U", "TLDR"]
    assert out[-1].role == "assistant" and out[-1].meta == {"kind": "summary"}  # type: ignore[index]


def test_case24_trailing_tool_call_is_reattached_and_not_summarised() -> None:
    llm = Scripted()
    out = run(c.WholeHistory(), [S("S", 0), U("U", 1), A("A", 2), TC(3)], llm)
    assert shape(out) == ["S", "U", "TLDR", "TC"]
    assert "TC" not in summarised(llm.prompts[0])


def test_case25_only_the_first_user_message() -> None:
    assert shape(run(c.WholeHistory(), [S("S", 0), U("U0", 1), U("U1", 2), A("A", 3)])) == [
        "S",
        "U0",
        "TLDR",
    ]


def test_case26_sorted_by_timestamp() -> None:
    assert shape(run(c.WholeHistory(), [U("U", 0), S("S", 1), A("A", 2)])) == ["U", "S", "TLDR"]


def test_case27_every_system_message_kept() -> None:
    assert shape(run(c.WholeHistory(), SEVEN)) == ["S0", "U0", "S1", "S2", "TLDR"]


def test_case28_per_system_blocks() -> None:
    out = run(c.WholeHistoryPerSystemMessage(), SEVEN)
    assert shape(out) == ["S0", "U0", "TLDR", "S1", "U1", "TLDR", "S2", "TLDR"]


def test_case29_last_n() -> None:
    llm = Scripted()
    assert shape(run(c.FromLastNMessages(3), SEVEN, llm)) == ["S0", "U0", "S1", "S2", "TLDR"]
    assert summarised(llm.prompts[0]) == ["S0", "S1", "U1", "A1", "S2"]


def test_case30_from_timestamp() -> None:
    llm = Scripted()
    since = datetime(2023, 1, 1, 0, 7, tzinfo=UTC)
    assert shape(run(c.FromTimestamp(since), LONG, llm)) == [
        "S0",
        "User message 0",
        "S1",
        "S2",
        "TLDR",
    ]
    assert summarised(llm.prompts[0])[:2] == ["S0", "S1"]


def test_case31_chunked() -> None:
    llm = Scripted()
    assert shape(run(c.Chunked(2), SEVEN, llm)) == ["S0", "U0", "S1", "S2"] + ["TLDR"] * 4
    assert [summarised(p) for p in llm.prompts] == [
        ["S0", "U0"],
        ["A0", "S1"],
        ["U1", "A1"],
        ["S2"],
    ]
    out = run(c.Chunked(3), LONG)
    assert shape(out).count("TLDR") == 7


def test_case32_request_counts() -> None:
    pairs = [S("sys", 0)] + [m for i in range(15) for m in (U(f"q{i}", 1), A(f"a{i}", 2))]
    for strategy, expected in [
        (c.Chunked(4), 8),
        (c.WholeHistory(), 1),
        (c.FromLastNMessages(4), 1),
    ]:
        llm = Scripted()
        out = run(strategy, pairs, llm)
        assert len(llm.prompts) == expected and shape(out).count("TLDR") == expected


TOPIC = c.Concept("topic", "what the conversation is about", multiple=True)


def test_case33_fact_retrieval_multiple() -> None:
    llm = Scripted('{"facts":[{"fact":"Fact A"},{"fact":"Fact B"}]}')
    out = run(c.FactRetrieval((TOPIC,)), LONG, llm)
    assert out is not None
    assert [m.text for m in out if m.role == "system"] == ["S0", "S1", "S2"]
    assert next(m for m in out if m.role == "user").text == "User message 0"
    last = out[-1]
    assert last.role == "assistant" and last.meta == {"kind": "facts"}
    for needle in ("[CONTEXT RESTORATION]", "topic", "Fact A", "Fact B"):
        assert needle in last.text
    assert "TLDR" not in shape(out) and not any(m.tool_calls for m in out)
    prompt = llm.prompts[0]
    assert prompt[0].role == "system" and '"topic"' in prompt[0].text
    assert prompt[1].text.startswith("<conversation_to_extract_facts>\n<system>\nS0\n</system>")
    assert '<tool_result tool="DummyTool">' in prompt[1].text


def test_case34_single_fact() -> None:
    single = c.Concept("answer", "the answer")
    out = run(c.FactRetrieval((single,)), LONG, Scripted('{"fact":"Single fact"}'))
    assert out is not None and "Single fact" in out[-1].text


def test_case35_facts_keep_a_trailing_tool_call() -> None:
    out = run(
        c.FactRetrieval((TOPIC,)),
        [S("S", 0), U("U", 1), A("A", 2), TC(3)],
        Scripted('{"facts":[{"fact":"F"}]}'),
    )
    assert out is not None and out[-1].tool_calls


def test_case36_invalid_json_extracts_nothing_and_changes_nothing() -> None:
    single = c.Concept("answer", "the answer")
    assert c.parse_facts(single, "invalid json") == []
    assert c.parse_facts(TOPIC, "invalid json") == []
    assert c.parse_facts(single, '{"fact": "No facts extracted"}') == []
    history = list(LONG)
    assert run(c.FactRetrieval((single, TOPIC)), history, Scripted("invalid json")) is None
    assert history == LONG


def test_facts_fall_back_when_nothing_is_found() -> None:
    out = run(c.FactRetrieval((TOPIC,), fallback=c.WholeHistory()), SEVEN, Scripted("nope"))
    assert shape(out) == ["S0", "U0", "S1", "S2", "TLDR"]


def test_one_request_per_concept() -> None:
    llm = Scripted('{"facts":[{"fact":"x"}]}')
    run(c.FactRetrieval((TOPIC, c.Concept("people", "who is involved", True))), SEVEN, llm)
    assert len(llm.prompts) == 2


@pytest.mark.parametrize("preserve, kept", [(True, True), (False, False)])
def test_memory_messages_survive_only_when_preserved(preserve: bool, kept: bool) -> None:
    pinned = U("Here are the relevant facts from memory about [x](y...):\n- [x]: 1\n", 3)
    tagged = msg("user", "remember: the code is 42", 4, meta={"kind": "memory"})
    history = [S("S", 0), U("U", 1), A("A", 2), pinned, tagged, A("later", 5)]
    out = c.WholeHistory().compress(history, c.memory_messages(history, preserve), Scripted())
    assert (pinned in out) is kept and (tagged in out) is kept


def test_concept_parsing() -> None:
    assert c.Concept.parse("topic:what we discuss:multiple") == c.Concept(
        "topic", "what we discuss", True
    )
    assert c.Concept.parse("url:a link: with colon") == c.Concept(
        "url", "a link: with colon", False
    )
    with pytest.raises(UsageError):
        c.Concept.parse("nodescription")
