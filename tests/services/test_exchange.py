"""Turns asked for by OpenAI clients (services/turn/placement.py, SPEC §6): what is stored when
a client resends its conversation, edits it, regenerates, or runs its own tools."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from koogcli.core.errors import UsageError
from koogcli.core.messages import Message, ToolCall, assistant, system, tool_result, user
from koogcli.core.model_port import Completion
from koogcli.core.names import SessionName
from koogcli.services.turn.placement import Exchange, SessionBusyError, SessionGate, exchange
from koogcli.services.turn.request import ClientOptions
from tests.fakes.chat_model import FakeChatModel

WORK = SessionName("work")


def _ask(
    ctx: Any, messages: list[Message], session: SessionName | None = WORK, **client: Any
) -> Any:
    return exchange(
        ctx, SessionGate(5), Exchange(session, tuple(messages), ClientOptions(**client))
    )


def _stored(ctx: Any, name: str = "work") -> list[tuple[str, str]]:
    return [
        (m.role, m.text) for m in ctx.history.read(SessionName(name)).messages if m.role != "system"
    ]


def test_a_resent_conversation_stores_only_its_new_tail(make_ctx: Callable[..., Any]) -> None:
    ctx = make_ctx()
    convo = [system("Be brief."), user("one")]
    done = _ask(ctx, convo)
    assert (done.session, done.result.reply, done.forked_from) == ("work", "echo: one", None)
    convo += [assistant("echo: one"), user("two")]
    _ask(ctx, convo)
    assert _stored(ctx) == [
        ("user", "one"),
        ("assistant", "echo: one"),
        ("user", "two"),
        ("assistant", "echo: two"),
    ]
    with pytest.raises(UsageError, match="ends with an assistant message"):
        _ask(ctx, [*convo, assistant("echo: two")])


def test_an_edited_message_forks_and_the_original_stays(make_ctx: Callable[..., Any]) -> None:
    ctx = make_ctx()
    convo = [user("one")]
    _ask(ctx, convo)
    convo += [assistant("echo: one"), user("two")]
    _ask(ctx, convo)
    before = ctx.history.read(WORK)
    done = _ask(ctx, [user("one"), assistant("echo: one"), user("TWO, edited")])
    assert (done.session, done.forked_from) == ("work~2", "work")
    assert _stored(ctx, "work~2") == [
        ("user", "one"),
        ("assistant", "echo: one"),
        ("user", "TWO, edited"),
        ("assistant", "echo: TWO, edited"),
    ]
    assert ctx.history.read(WORK) == before
    # A fork of a fork is numbered on: work~3, never work~2~2.
    done = _ask(ctx, [user("changed from the start")], SessionName("work~2"))
    assert done.session == "work~3" and _stored(ctx, "work~3") == [
        ("user", "changed from the start"),
        ("assistant", "echo: changed from the start"),
    ]


def test_a_regenerated_reply_answers_the_same_message_in_a_fork(
    make_ctx: Callable[..., Any],
) -> None:
    ctx = make_ctx()
    _ask(ctx, [user("one")])
    _ask(ctx, [user("one"), assistant("echo: one"), user("two")])
    done = _ask(ctx, [user("one"), assistant("echo: one"), user("two")])
    assert done.session == "work~2"
    assert _stored(ctx, "work~2") == [
        ("user", "one"),
        ("assistant", "echo: one"),
        ("user", "two"),
        ("assistant", "echo: two"),
    ]


def test_redacted_history_still_matches_what_the_client_resends(
    make_ctx: Callable[..., Any], write_config: Callable[[str], Path]
) -> None:
    write_config(
        '[[chat_memory.preprocessors]]\ntype = "redact"\n'
        "pattern = '[\\w.+-]+@[\\w-]+\\.[\\w.-]+'\nreplacement = \"[EMAIL]\"\n"
    )
    ctx = make_ctx()
    convo = [user("mail me at a@b.example")]
    _ask(ctx, convo)
    convo += [assistant("echo: mail me at a@b.example"), user("thanks")]
    done = _ask(ctx, convo)
    assert done.forked_from is None
    assert _stored(ctx)[0] == ("user", "mail me at [EMAIL]")
    assert len(_stored(ctx)) == 4


def test_client_tool_calls_end_the_turn_and_their_results_come_back(
    make_ctx: Callable[..., Any], fake_model: FakeChatModel
) -> None:
    ctx = make_ctx()
    spec = {"type": "function", "function": {"name": "lookup", "parameters": {}}}
    fake_model.enqueue(
        Completion("", (ToolCall("call_0", "lookup", '{"q":"x"}'),), None, "tool_calls")
    )
    done = _ask(ctx, [user("find x")], tools=(spec,))
    [call] = done.result.message.tool_calls
    assert done.result.finish_reason == "tool_calls" and call.name == "lookup"
    assert fake_model.requests[-1].tools == (spec,)
    fake_model.enqueue(Completion("found it", (), None, "stop"))
    convo = [user("find x"), assistant(None, (call,)), tool_result(call.id, "lookup", "x is 1")]
    done = _ask(ctx, convo, tools=(spec,))
    assert done.result.reply == "found it"
    assert [m.role for m in ctx.history.read(WORK).messages if m.role != "system"] == [
        "user",
        "assistant",
        "tool",
        "assistant",
    ]


def test_stateless_requests_store_nothing(make_ctx: Callable[..., Any]) -> None:
    ctx = make_ctx()
    done = _ask(ctx, [user("a"), assistant("b"), user("c")], None, temperature=0.5)
    assert (done.session, done.result.reply) == (None, "echo: c")
    assert ctx.history.sessions() == []


def test_one_request_at_a_time_per_session_and_a_bound_on_the_wait() -> None:
    gate = SessionGate(0.2)
    held = threading.Event()
    release = threading.Event()

    def hold() -> None:
        with gate.hold(WORK):
            held.set()
            release.wait(5)

    worker = threading.Thread(target=hold)
    worker.start()
    held.wait(5)
    with pytest.raises(SessionBusyError, match="stayed busy"), gate.hold(WORK):
        pass
    with gate.hold(SessionName("other")):  # other sessions are not held up
        pass
    release.set()
    worker.join()
    with gate.hold(WORK):
        pass


@pytest.mark.parametrize("strategy", ["whole", "last-n", "chunked"])
def test_compression_never_makes_a_resent_conversation_fork(
    make_ctx: Callable[..., Any], fake_model: FakeChatModel, strategy: str
) -> None:
    from koogcli.services import compression

    echo = fake_model.answer
    fake_model.answer = lambda r: (
        "They asked four questions."
        if any("faithful summaries" in m.text for m in r.messages)
        else echo(r)
    )
    ctx = make_ctx()
    convo: list[Message] = []
    long = " about the harbour, the boats along the quay and the tide tables" * 3
    for n in range(4):
        convo.append(user(f"q{n}{long}"))
        done = _ask(ctx, convo)
        convo.append(assistant(done.result.reply))
    choice = compression.StrategyChoice(strategy)
    compression.compress(ctx, compression.CompressRequest(WORK, choice))
    assert any(m.meta.get("kind") == "summary" for m in ctx.history.read(WORK).messages)
    convo.append(user("after the summary"))
    done = _ask(ctx, convo)
    assert (done.session, done.forked_from) == ("work", None)
    assert _stored(ctx)[-2:] == [
        ("user", "after the summary"),
        ("assistant", "echo: after the summary"),
    ]
    convo.append(assistant(done.result.reply))
    convo.append(user("and once more"))
    assert _ask(ctx, convo).session == "work"
    # An edit before the summary still forks, holding the client's own version.
    edited = [user("q0 edited"), *convo[1:]]
    done = _ask(ctx, edited)
    assert done.session == "work~2"
    assert _stored(ctx, "work~2")[0] == ("user", "q0 edited")
    assert len(_stored(ctx, "work~2")) == len(edited) + 1


def test_a_second_conversation_under_one_name_gets_one_fork_that_it_continues(
    make_ctx: Callable[..., Any],
) -> None:
    """Clients send one fixed session name for every conversation: the second
    conversation forks once, and each later turn of it continues that fork."""
    ctx = make_ctx()
    first = [user("X")]
    _ask(ctx, first)
    first += [assistant("echo: X"), user("Y")]
    _ask(ctx, first)
    second: list[Message] = []
    placed = []
    for word in ("A", "B", "C"):
        second.append(user(word))
        done = _ask(ctx, second)
        placed.append((done.session, done.forked_from))
        second.append(assistant(done.result.reply))
    assert placed == [("work~2", "work"), ("work~2", None), ("work~2", None)]
    assert [t for _, t in _stored(ctx, "work~2")] == [
        "A",
        "echo: A",
        "B",
        "echo: B",
        "C",
        "echo: C",
    ]
    assert [t for _, t in _stored(ctx)] == ["X", "echo: X", "Y", "echo: Y"]
    from koogcli.services import history

    origins = {s.name: s.forked_from for s in history.list_sessions(ctx)}
    assert origins["work~2"] is not None and origins["work~2"][0] == "work"
    # The first conversation goes on where it was, named by its fork's name or its own.
    first.append(assistant("echo: Y"))
    first.append(user("Z"))
    assert _ask(ctx, first, SessionName("work~2")).session == "work"


def test_resent_messages_compare_by_meaning_not_bytes(
    make_ctx: Callable[..., Any], fake_model: FakeChatModel
) -> None:
    """Re-serialised arguments, text as parts, moved cache_control, other ids and
    whitespace at the ends are the same conversation: nothing forks."""
    ctx = make_ctx()
    spec = {"type": "function", "function": {"name": "lookup", "parameters": {}}}
    fake_model.enqueue(
        Completion("", (ToolCall("call_0", "lookup", '{"c":"O","n":[1,2]}'),), None, "tool_calls")
    )
    done = _ask(ctx, [user("find x")], tools=(spec,))
    [call] = done.result.message.tool_calls
    resent = ToolCall("client-invented-id", "lookup", '{"n": [1, 2], "c": "O"}')
    convo = [
        user("  find x\n"),
        assistant(None, (resent,)),
        tool_result("client-invented-id", "lookup", "x is 1"),
    ]
    done = _ask(ctx, convo, tools=(spec,))
    assert (done.session, done.forked_from) == ("work", None)
    stored = [m for m in ctx.history.read(WORK).messages if m.role != "system"]
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert stored[2].name == "lookup" or stored[2].tool_call_id == call.id


def test_client_tool_calls_are_marked_and_rollback_leaves_them_in_place(
    make_ctx: Callable[..., Any], tools: Callable[[], list[list[str]]]
) -> None:
    """A call named like koog's own compensated tool, sent by a client, is the client's:
    rollback never runs koog's compensation for it."""
    from koogcli.services import rollback

    ctx = make_ctx()
    attack = ToolCall("c1", "create_user", '{"name": "ATTACKER-CHOSEN-ARG ../../etc"}')
    convo = [
        user("make one"),
        assistant(None, (attack,)),
        tool_result("c1", "create_user", "created"),
    ]
    _ask(ctx, convo)
    stored = ctx.history.read(WORK).messages
    assert any(m.meta.get("client_tools") for m in stored if m.tool_calls)
    plan = rollback.prepare(ctx, WORK, None, True)
    done = rollback.execute(ctx, plan)
    assert tools() == []  # neither create_user nor remove_user ever ran
    [left] = [c.describe() for c in done.compensations]
    assert left.startswith("left in place: create_user(") and left.endswith("(a client's tool)")
    assert "ATTACKER-CHOSEN-ARG" in left


def test_a_long_name_keeps_its_conversations_in_one_family(make_ctx: Callable[..., Any]) -> None:
    """A name too long for a fork suffix: its forks still form one family, and a second
    conversation continues one fork instead of forking every turn."""
    ctx = make_ctx()
    long = SessionName("L" * 63)
    _ask(ctx, [user("first")], long)
    second: list[Message] = [user("A")]
    names = []
    for word in ("B", "C"):
        done = _ask(ctx, second, long)
        names.append(done.session)
        second += [assistant(done.result.reply), user(word)]
    names.append(_ask(ctx, second, long).session)
    assert names == ["L" * 58 + "~2"] * 3


def test_placement_looks_only_at_names_the_token_may_use(make_ctx: Callable[..., Any]) -> None:
    ctx = make_ctx()
    _ask(ctx, [user("the owner's conversation")], SessionName("proj"))
    granted = lambda name: name.startswith("proj~1")  # noqa: E731
    ask = Exchange(
        SessionName("proj~1"), (user("the owner's conversation"),), ClientOptions(), granted=granted
    )
    done = exchange(ctx, SessionGate(5), ask)
    assert done.session == "proj~1"  # never appended to `proj`, which it may not see
    again = exchange(
        ctx,
        SessionGate(5),
        Exchange(SessionName("proj~1"), (user("other"),), ClientOptions(), granted=granted),
    )
    assert again.session == "proj~1~2" and granted(again.session)
    assert _stored(ctx, "proj") == [
        ("user", "the owner's conversation"),
        ("assistant", "echo: the owner's conversation"),
    ]


def test_a_cli_turn_summarised_away_makes_the_clients_resend_fork(
    make_ctx: Callable[..., Any], fake_model: FakeChatModel
) -> None:
    """The summary then holds what the client never saw: no mark is carried onto it."""
    from koogcli.services import compression
    from koogcli.services.turn import TurnRequest, run_turn

    echo = fake_model.answer
    fake_model.answer = lambda r: (
        "Short." if any("faithful summaries" in m.text for m in r.messages) else echo(r)
    )
    ctx = make_ctx()
    long = " with a good deal more detail about the boats, the quay and the tides" * 3
    convo = [user("one" + long)]
    convo.append(assistant(_ask(ctx, convo).result.reply))
    convo.append(user("two" + long))
    convo.append(assistant(_ask(ctx, convo).result.reply))
    run_turn(ctx, TurnRequest(WORK, "the terminal said something" + long))
    compression.compress(ctx, compression.CompressRequest(WORK))
    convo.append(user("three"))
    assert _ask(ctx, convo).session == "work~2"
