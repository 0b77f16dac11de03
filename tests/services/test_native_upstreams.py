"""The native upstreams (`wire_api = "messages"` / `"responses"`) against the test server,
which enforces what the providers document: thinking signatures bound to their prefix, a
tool loop's thinking block first, encrypted reasoning returned unchanged."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from koogcli.adapters.model.endpoint import Endpoint, RequestOptions
from koogcli.adapters.model.messages_upstream import MessagesChatModel
from koogcli.adapters.model.responses_upstream import ResponsesChatModel
from koogcli.core import native_replay
from koogcli.core.errors import ModelError
from koogcli.core.messages import Message
from koogcli.core.model_port import ModelRequest
from koogcli.core.names import SessionName
from koogcli.services import turn
from tests.fakes.openai_server import FakeOpenAIServer


def _endpoint(server: FakeOpenAIServer, key_env: str = "ANTHROPIC_API_KEY") -> Endpoint:
    return Endpoint(server.base_url, "key", key_env, 10.0, 0)


def _messages(server: FakeOpenAIServer, effort: str | None = "low") -> MessagesChatModel:
    return MessagesChatModel(_endpoint(server), RequestOptions(reasoning_effort=effort))


def _responses(server: FakeOpenAIServer) -> ResponsesChatModel:
    return ResponsesChatModel(
        _endpoint(server, "OPENAI_API_KEY"), RequestOptions(reasoning_effort="low")
    )


def _rejected(server: FakeOpenAIServer) -> list[str]:
    return [e["rejected"] for e in server.native_log if "rejected" in e]


@pytest.mark.parametrize("stream", [True, False])
def test_a_tool_loop_with_thinking_sends_the_thinking_block_first_and_is_accepted(
    make_ctx: Callable[..., Any],
    server: FakeOpenAIServer,
    tools: Callable[[], list[list[str]]],
    stream: bool,
) -> None:
    server.enqueue(
        {"tool_calls": [{"id": "toolu_1", "name": "lookup", "arguments": '{"city": "Seville"}'}]},
        {"content": "He sailed from Seville."},
    )
    ctx = make_ctx(model=_messages(server))
    done = turn.run_turn(ctx, turn.TurnRequest(SessionName("t"), "where from?", stream=stream))
    assert done.reply == "He sailed from Seville."
    assert tools() == [["lookup", "Seville"]]
    assert _rejected(server) == []
    second = [r for r in server.requests if r.get("_path", "").endswith("/messages")][-1]
    assistant = second["messages"][1]
    assert [b["type"] for b in assistant["content"]] == ["thinking", "tool_use"]
    stored = ctx.history.read(SessionName("t")).messages
    kept = [m.meta.get(native_replay.KEY) for m in stored if m.role == "assistant"]
    assert all(isinstance(k, dict) and k["items"][0]["signature"] for k in kept)
    assert "Seville" not in json.dumps([m.text for m in stored if m.role == "system"])


def test_thinking_made_under_another_prefix_is_left_out_not_refused(
    server: FakeOpenAIServer,
) -> None:
    model = _messages(server)
    history = [Message(role="system", content="Be brief.")]
    for question in ("one", "two", "three"):
        history.append(Message(role="user", content=question))
        done = model.complete(ModelRequest("claude", list(history)))
        meta = {native_replay.KEY: dict(done.native or {})}
        history.append(Message(role="assistant", content=done.text, meta=meta))
    assert _rejected(server) == [] and len(server.native_log) == 3
    # Every earlier thinking block went back as it came.
    last = server.requests[-1]["messages"]
    assert [b["type"] for b in last[1]["content"]] == ["thinking", "text"]
    # A window cut the first exchange: the blocks it bound no longer match; they stay home.
    cut = [history[0], *history[3:], Message(role="user", content="four")]
    model.complete(ModelRequest("claude", cut))
    assert _rejected(server) == []
    sent = server.requests[-1]["messages"]
    assert [b["type"] for b in sent[1]["content"]] == ["text"]


def test_an_altered_signature_is_refused_by_the_test_server(server: FakeOpenAIServer) -> None:
    model = _messages(server)
    history = [Message(role="user", content="one")]
    done = model.complete(ModelRequest("claude", history))
    native = json.loads(json.dumps(done.native))
    native["items"][0]["signature"] = "AAAA" + native["items"][0]["signature"][4:]
    history += [
        Message(role="assistant", content=done.text, meta={native_replay.KEY: native}),
        Message(role="user", content="two"),
    ]
    with pytest.raises(ModelError) as raised:
        model.complete(ModelRequest("claude", history))
    assert raised.value.status == 400 and "signature" in str(raised.value)


def test_the_cache_is_read_at_the_breakpoints_every_turn_after_the_first(
    server: FakeOpenAIServer,
) -> None:
    model = _messages(server, effort=None)
    history = [Message(role="system", content="Answer in one line. " * 30)]
    cached = []
    for question in ("alpha", "beta", "gamma", "delta"):
        history.append(Message(role="user", content=question))
        done = model.complete(ModelRequest("claude", list(history)))
        assert done.usage is not None
        cached.append(done.usage.cached_tokens)
        history.append(Message(role="assistant", content=done.text))
    assert cached[0] == 0 and all(c and c > 0 for c in cached[1:])
    assert cached == sorted(cached)  # each turn reads what the last one wrote
    sent = server.requests[-1]
    assert sent["system"][-1]["cache_control"] == {"type": "ephemeral"}
    assert sent["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert server.requests[-1]["_headers"]["anthropic-version"]


@pytest.mark.parametrize("stream", [True, False])
def test_responses_replays_reasoning_items_byte_for_byte(
    server: FakeOpenAIServer, stream: bool
) -> None:
    model = _responses(server)
    history = [Message(role="system", content="Be brief.")]
    made: list[dict[str, Any]] = []
    for question in ("one", "two", "three"):
        history.append(Message(role="user", content=question))
        done = model.complete(ModelRequest("gpt", list(history), stream=stream))
        assert done.native is not None and done.text == f"echo: {question}"
        made.extend(done.native["items"])  # type: ignore[arg-type]
        history.append(
            Message(
                role="assistant", content=done.text, meta={native_replay.KEY: dict(done.native)}
            )
        )
    assert _rejected(server) == []
    last = server.requests[-1]
    assert last["store"] is False and last["include"] == ["reasoning.encrypted_content"]
    replayed = [i for i in last["input"] if i["type"] == "reasoning"]
    assert replayed == made[:2]
    assert server.native_log[-1]["cache_read"] > 0


def test_responses_refuses_altered_encrypted_reasoning(server: FakeOpenAIServer) -> None:
    model = _responses(server)
    history = [Message(role="user", content="one")]
    done = model.complete(ModelRequest("gpt", history))
    native = json.loads(json.dumps(done.native))
    native["items"][0]["encrypted_content"] = "x" + native["items"][0]["encrypted_content"]
    history += [
        Message(role="assistant", content=done.text, meta={native_replay.KEY: native}),
        Message(role="user", content="two"),
    ]
    with pytest.raises(ModelError) as raised:
        model.complete(ModelRequest("gpt", history))
    assert raised.value.status == 400


def test_upstream_refusals_name_what_to_check(server: FakeOpenAIServer) -> None:
    server.enqueue({"status": 529, "message": "Overloaded"})
    with pytest.raises(ModelError) as raised:
        _messages(server).complete(ModelRequest("claude", [Message(role="user", content="hi")]))
    assert raised.value.status == 529 and "Overloaded" in str(raised.value)
    keyless = MessagesChatModel(Endpoint(server.base_url, "", "ANTHROPIC_API_KEY", 10.0, 0))
    keyless.http.headers.pop("x-api-key")
    with pytest.raises(ModelError) as refused:
        keyless.complete(ModelRequest("claude", [Message(role="user", content="hi")]))
    assert "ANTHROPIC_API_KEY" in (refused.value.hint or "")
