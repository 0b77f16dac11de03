"""Issue 53: one function composes what goes upstream. Every path a turn takes (a `koog
chat` turn, the REPL, a `koog serve` request translated to another protocol, one passed
through in the upstream's own) asks services/turn/upstream_request.compose, and the
request the test server receives is that one, only encoded."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from koogcli.adapters.model import messages_upstream
from koogcli.adapters.model.chat_upstream import OpenAIChatModel, message_to_wire
from koogcli.adapters.model.endpoint import Endpoint, RequestOptions
from koogcli.adapters.model.messages_upstream import MessagesChatModel
from koogcli.core.messages import Message, assistant, user
from koogcli.core.model_port import PassThrough
from koogcli.core.names import SessionName
from koogcli.repl.state import ReplState
from koogcli.repl.turns import send
from koogcli.services import memory
from koogcli.services.turn import TurnRequest, run_turn, upstream_request
from koogcli.services.turn.placement import Exchange, SessionGate, exchange
from koogcli.services.turn.request import ClientOptions
from tests.fakes.openai_server import FakeOpenAIServer
from tests.repl.test_repl import Recorder
from tests.support.harbour import FACTS, QUESTIONS

CONFIG = (
    "[long_term_memory.retrieval]\nenabled = true\n"
    '[[chat_memory.preprocessors]]\ntype = "window"\nsize = 4\n'
)


@pytest.fixture
def composed(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[upstream_request.Composed]]:
    """Every request the composer returned, in order."""
    made: list[upstream_request.Composed] = []
    real = upstream_request.compose

    def spy(turn: Any, offer_tools: bool) -> upstream_request.Composed:
        made.append(real(turn, offer_tools))
        return made[-1]

    monkeypatch.setattr(upstream_request, "compose", spy)
    yield made


def _endpoint(server: FakeOpenAIServer) -> Endpoint:
    return Endpoint(server.base_url, "key", "OPENAI_API_KEY", 10.0, 0)


def _sent(server: FakeOpenAIServer, path: str) -> list[dict[str, Any]]:
    return [
        {k: v for k, v in r.items() if not k.startswith("_")}
        for r in server.requests
        if r.get("_path", "").endswith(path)
    ]


def _remembered(ctx: Any) -> None:
    for fact in FACTS:
        memory.add(ctx, fact)


def test_cli_and_repl_turns_send_what_the_composer_returned(
    make_ctx: Callable[..., Any],
    write_config: Callable[[str], Any],
    server: FakeOpenAIServer,
    composed: list[upstream_request.Composed],
) -> None:
    write_config(CONFIG)
    ctx = make_ctx(model=OpenAIChatModel(_endpoint(server)))
    _remembered(ctx)
    for question in QUESTIONS[:3]:  # the one-shot's and the REPL's turns alike
        run_turn(ctx, TurnRequest(SessionName("cli"), question, stream=False))
    state = ReplState(ctx, SessionName("repl"), Recorder())
    for question in QUESTIONS[:3]:
        send(state, question)
    sent = _sent(server, "/chat/completions")
    assert len(composed) == len(sent) == 6
    for made, body in zip(composed, sent, strict=True):
        assert body["messages"] == [message_to_wire(m) for m in made.request.messages]
        assert body["model"] == made.request.model
    carried = json.dumps(sent[-1]["messages"])  # the window's records, as composed
    assert FACTS[2] in carried and FACTS[1] in carried


def test_serve_requests_translated_or_passed_through_send_what_the_composer_returned(
    make_ctx: Callable[..., Any],
    write_config: Callable[[str], Any],
    server: FakeOpenAIServer,
    composed: list[upstream_request.Composed],
) -> None:
    write_config(CONFIG)
    options = RequestOptions()
    ctx = make_ctx(model=MessagesChatModel(_endpoint(server), options))
    _remembered(ctx)
    convo: list[Message] = []
    for turn, question in enumerate(QUESTIONS):
        convo.append(user(question))
        if turn % 2:  # a Messages client: its body passes through
            body: dict[str, Any] = {
                "model": "claude",
                "max_tokens": 100,
                "messages": [{"role": m.role, "content": m.text} for m in convo],
            }
            client = ClientOptions(passthrough=PassThrough("messages", body))
        else:  # a chat-completions client: translated
            client = ClientOptions()
        asked = Exchange(SessionName("srv"), tuple(convo), client, model="claude", stream=False)
        done = exchange(ctx, SessionGate(5), asked)
        convo.append(assistant(done.result.reply))
    sent = _sent(server, "/messages")
    assert len(composed) == len(sent) == 4
    for turn, (made, got) in enumerate(zip(composed, sent, strict=True)):
        given = made.request.passthrough
        if turn % 2:
            assert given is not None
            expected = messages_upstream.passed_body(made.request, given.body)
        else:
            assert given is None
            expected, _ = messages_upstream.request_body(made.request, options)
        assert got == json.loads(json.dumps(expected))
        assert FACTS[turn] in json.dumps(got["messages"][-1])
