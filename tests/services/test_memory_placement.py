"""Retrieval's default placement keeps a server's prompt cache (SPEC §5 4a): each question's
records go after it and stay there, so every request starts with the previous one."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from koogcli.core.errors import KoogError
from koogcli.core.messages import Message
from koogcli.core.names import SessionName
from koogcli.services import memory
from koogcli.services.turn import TurnEvents, TurnRequest, run_turn
from tests.fakes.chat_model import FakeChatModel, calls
from tests.support.harbour import FACTS, QUESTIONS
from tests.support.stored import stored_bytes

pytestmark = pytest.mark.usefixtures("backend")

S = SessionName("cache")


def wire(messages: Sequence[Message]) -> list[str]:
    """A request as a server reads it: role, text, parts and calls of each message."""
    return [
        json.dumps(
            [m.role, m.text, m.meta.get("parts"), [c.to_dict() for c in m.tool_calls]],
            sort_keys=True,
        )
        for m in messages
    ]


def starts_with(request: Sequence[Message], previous: Sequence[Message]) -> bool:
    now, before = wire(request), wire(previous)
    return now[: len(before)] == before


@pytest.fixture
def retrieval_on(write_config: Callable[[str], Path]) -> None:
    """Retrieval with the default placement (nothing but `enabled` set)."""
    write_config('[long_term_memory.retrieval]\nenabled = true\nmode = "jaccard"\n')


@pytest.mark.usefixtures("retrieval_on")
def test_each_request_starts_with_the_previous_one_and_the_records_reach_the_model(
    make_ctx: Callable[..., Any], fake_model: FakeChatModel
) -> None:
    fake_model.answer = lambda request: "Noted."
    ctx = make_ctx()
    for fact in FACTS:
        memory.add(ctx, fact)
    for turn in range(12):
        run_turn(ctx, TurnRequest(S, QUESTIONS[turn % 4] + f" (turn {turn + 1})"))
    requests = [r.messages for r in fake_model.requests]
    for previous, request in itertools.pairwise(requests):
        assert starts_with(request, previous)
    for turn, request in enumerate(requests):
        question = request[-1]
        assert question.role == "user" and question.text.startswith(QUESTIONS[turn % 4])
        assert FACTS[turn % 4] in question.text  # the record found for it follows it
        assert request[0].text == "You are a helpful assistant."  # never edited by memory
    # `koog why` counts the records sent again after earlier questions.
    last_why = ctx.history.read(S).messages[-1].meta["why"]
    assert last_why["memory"]["earlier"] >= 11 and len(last_why["memory"]["records"]) >= 1
    # What the user sees of the session is what they said: records are looked up by id.
    assert b"lighthouse keeper is called Ada" not in stored_bytes(ctx, S)
    assert ctx.history.read(S).messages[1].text == QUESTIONS[0] + " (turn 1)"


@pytest.mark.usefixtures("retrieval_on")
def test_a_forgotten_record_leaves_later_requests(
    make_ctx: Callable[..., Any], fake_model: FakeChatModel
) -> None:
    fake_model.answer = lambda request: "Noted."
    ctx = make_ctx()
    ferry = memory.add(ctx, FACTS[0])
    run_turn(ctx, TurnRequest(S, QUESTIONS[0]))
    assert FACTS[0] in fake_model.requests[0].messages[-1].text
    memory.forget(ctx, [ferry])
    run_turn(ctx, TurnRequest(S, "And on Sundays?"))
    assert all(FACTS[0] not in m.text for m in fake_model.requests[1].messages)


def test_tool_rounds_of_a_turn_only_append(
    write_config: Callable[[str], Path],
    make_ctx: Callable[..., Any],
    fake_model: FakeChatModel,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (tmp_path / "harbour_tools.py").write_text(
        'def tide(day: str) -> str:\n    """The tide on a day."""\n    return "high at noon"\n'
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    write_config(
        '[long_term_memory.retrieval]\nenabled = true\nmode = "jaccard"\n'
        '[[tools]]\ncallable = "harbour_tools:tide"\n'
    )
    ctx = make_ctx()
    memory.add(ctx, FACTS[2])
    fake_model.enqueue(calls(("tide", {"day": "monday"})), "High at noon.")
    run_turn(ctx, TurnRequest(S, QUESTIONS[2]))
    first, second = (r.messages for r in fake_model.requests)
    assert starts_with(second, first) and len(second) == len(first) + 2
    assert FACTS[2] in first[-1].text


def test_koogs_system_placement_stays_available(
    write_config: Callable[[str], Path], make_ctx: Callable[..., Any], fake_model: FakeChatModel
) -> None:
    write_config(
        '[long_term_memory.retrieval]\nenabled = true\nmode = "jaccard"\naugmenter = "system"\n'
    )
    ctx = make_ctx()
    for fact in FACTS:
        memory.add(ctx, fact)
    run_turn(ctx, TurnRequest(S, QUESTIONS[0]))
    run_turn(ctx, TurnRequest(S, QUESTIONS[1]))
    first, second = (r.messages for r in fake_model.requests)
    assert FACTS[0] in first[0].text and FACTS[1] in second[0].text
    assert not starts_with(second, first)  # what it costs: the system prompt changed


def test_records_placed_under_another_namespace_never_reach_the_request(
    write_config: Callable[[str], Path], make_ctx: Callable[..., Any], fake_model: FakeChatModel
) -> None:
    """A record placed while retrieval searched one namespace (a serve token's) is not sent
    once the request's retrieval searches another."""
    fake_model.answer = lambda request: "Noted."
    write_config('[long_term_memory.retrieval]\nenabled = true\nnamespace = "alice"\n')
    ctx = make_ctx()
    memory.add(ctx, "Alice's bank PIN is 4921", namespace="alice")
    run_turn(ctx, TurnRequest(S, "What is the bank PIN?"))
    assert "4921" in fake_model.requests[0].messages[-1].text
    write_config('[long_term_memory.retrieval]\nenabled = true\nnamespace = "bob"\n')
    run_turn(make_ctx(), TurnRequest(S, "And what does Bob like?"))
    assert all("4921" not in m.text for m in fake_model.requests[1].messages)


@pytest.mark.usefixtures("retrieval_on")
def test_a_failed_search_keeps_the_earlier_questions_records(
    make_ctx: Callable[..., Any], fake_model: FakeChatModel
) -> None:
    fake_model.answer = lambda request: "Noted."
    ctx = make_ctx()
    memory.add(ctx, FACTS[0])
    run_turn(ctx, TurnRequest(S, QUESTIONS[0]))
    warnings: list[str] = []

    def broken(query: Any) -> Any:
        raise KoogError("the memory store is unreachable")

    ctx.long_term_memory.search = broken
    events = TurnEvents(on_warning=warnings.append)
    run_turn(ctx, TurnRequest(S, "And on Sundays?"), events)
    first, second = (r.messages for r in fake_model.requests)
    assert starts_with(second, first) and FACTS[0] in second[1].text
    assert second[-1].text == "And on Sundays?"
    assert warnings and "retrieval failed" in warnings[0]


@pytest.mark.usefixtures("retrieval_on")
def test_placed_records_count_in_the_messages_size(
    make_ctx: Callable[..., Any], fake_model: FakeChatModel
) -> None:
    """A window of tokens, a budget and automatic compression measure the records sent
    after each question, not only what the user typed."""
    from koogcli.core.tokens import request_tokens

    fake_model.answer = lambda request: "Noted."
    ctx = make_ctx()
    for fact in FACTS:
        memory.add(ctx, fact)
    run_turn(ctx, TurnRequest(S, QUESTIONS[1]))
    stored = ctx.history.read(S).messages
    sent = fake_model.requests[0].messages
    assert request_tokens(stored[:-1]) == request_tokens(sent)  # counted once, either way
    bare = [replace(m, meta={}) for m in stored]
    assert request_tokens(stored) > request_tokens(bare) + 10


def _stateless(ctx: Any, said: list[Message]) -> None:
    from koogcli.services.turn.placement import Exchange, SessionGate, exchange
    from koogcli.services.turn.request import ClientOptions

    exchange(ctx, SessionGate(5), Exchange(None, tuple(said), ClientOptions()))


@pytest.mark.usefixtures("retrieval_on")
def test_a_request_naming_no_session_gets_its_questions_records_back_until_forgotten(
    make_ctx: Callable[..., Any], fake_model: FakeChatModel
) -> None:
    """Issue 53: nothing is stored, yet the first question comes back with its records in
    the next request (by its digest), only the new question is searched, and a record
    forgotten leaves every later request."""
    from koogcli.core.messages import assistant, user

    fake_model.answer = lambda request: "Noted."
    ctx = make_ctx()
    ferry = memory.add(ctx, FACTS[0])
    memory.add(ctx, FACTS[1])
    said = [user(QUESTIONS[0])]
    _stateless(ctx, said)
    said += [assistant("Noted."), user(QUESTIONS[1])]
    _stateless(ctx, said)
    first, second = fake_model.requests
    assert starts_with(second.messages, first.messages)
    assert FACTS[0] in second.messages[-3].text and FACTS[1] in second.messages[-1].text
    assert ctx.history.names() == []
    memory.forget(ctx, [ferry])
    said += [assistant("Noted."), user("And on Sundays?")]
    _stateless(ctx, said)
    assert all(FACTS[0] not in m.text for m in fake_model.requests[2].messages)
    assert FACTS[1] in fake_model.requests[2].messages[-3].text  # the other stays in place


def test_a_stateless_questions_records_stay_in_their_namespace(
    write_config: Callable[[str], Path], make_ctx: Callable[..., Any], fake_model: FakeChatModel
) -> None:
    """Placements are remembered per namespace: a token searching another never gets them."""
    from koogcli.core.messages import assistant, user

    fake_model.answer = lambda request: "Noted."
    write_config('[long_term_memory.retrieval]\nenabled = true\nnamespace = "alice"\n')
    ctx = make_ctx()
    memory.add(ctx, "Alice's bank PIN is 4921", namespace="alice")
    said = [user("What is the bank PIN?")]
    _stateless(ctx, said)
    assert "4921" in fake_model.requests[0].messages[-1].text
    write_config('[long_term_memory.retrieval]\nenabled = true\nnamespace = "bob"\n')
    _stateless(make_ctx(), [*said, assistant("Noted."), user("And Bob?")])
    assert all("4921" not in m.text for m in fake_model.requests[1].messages)
