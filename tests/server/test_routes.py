"""`koog serve`'s routes in process (Starlette's TestClient on a context with a fake model):
each protocol's answer shape, stored turns, and a bad body's 400, without a server process.
The end-to-end suites drive the real process; these keep a route's contract in the fast
loop."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from koogcli.core.names import SessionName
from tests.fakes.chat_model import FakeChatModel


@pytest.fixture
def served(make_ctx: Callable[..., Any]) -> Iterator[tuple[TestClient, Any]]:
    from koogcli.server.app import create_app
    from koogcli.server.state import ServerState

    ctx = make_ctx()
    state = ServerState(ctx, workers=4)
    with TestClient(create_app(state), base_url="http://127.0.0.1") as client:
        yield client, ctx
    state.pool.shutdown(wait=True)


def test_health_and_models(served: tuple[TestClient, Any]) -> None:
    client, _ = served
    assert client.get("/healthz").json() == {"status": "ok"}
    listed = client.get("/v1/models").json()
    assert [m["id"] for m in listed["data"]] == ["fake-model", "gpt-4o-mini"]
    missing = client.get("/v1/nothing")
    assert missing.status_code == 404 and "no route GET /v1/nothing" in missing.text


def test_a_chat_completion_is_answered_and_stored_in_its_session(
    served: tuple[TestClient, Any], fake_model: FakeChatModel
) -> None:
    client, ctx = served
    fake_model.enqueue("hello from the route")
    answer = client.post(
        "/v1/chat/completions",
        json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]},
        headers={"X-Koog-Session": "routes"},
    )
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["object"] == "chat.completion"
    assert body["choices"][0]["message"]["content"] == "hello from the route"
    stored = ctx.history.read(SessionName("routes")).messages
    assert [(m.role, m.text) for m in stored if m.role != "system"] == [
        ("user", "hi"),
        ("assistant", "hello from the route"),
    ]


def test_a_streamed_chat_completion_ends_with_done(
    served: tuple[TestClient, Any], fake_model: FakeChatModel
) -> None:
    client, _ = served
    fake_model.enqueue("streamed words")
    with client.stream(
        "POST",
        "/v1/chat/completions",
        json={"model": "m", "stream": True, "messages": [{"role": "user", "content": "go"}]},
    ) as answer:
        lines = [line for line in answer.iter_lines() if line.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"
    assert "streamed" in "".join(lines)


def test_responses_and_messages_answer_in_their_own_shapes(
    served: tuple[TestClient, Any], fake_model: FakeChatModel
) -> None:
    client, _ = served
    fake_model.enqueue("a response", "a message")
    response = client.post("/v1/responses", json={"model": "m", "input": "hi"})
    assert response.status_code == 200, response.text
    assert response.json()["output"][-1]["content"][0]["text"] == "a response"
    message = client.post(
        "/v1/messages",
        json={"model": "m", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]},
    )
    assert message.status_code == 200, message.text
    assert message.json()["content"][0] == {"type": "text", "text": "a message"}


@pytest.mark.parametrize(
    "path",
    ["/v1/chat/completions", "/v1/responses", "/v1/messages", "/v1/embeddings"],
)
@pytest.mark.parametrize("body", [b"{", b"[]", b'{"messages": "no"}', b'{"x": NaN}'])
def test_a_bad_body_is_a_400_on_every_route(
    served: tuple[TestClient, Any], path: str, body: bytes
) -> None:
    client, ctx = served
    answer = client.post(path, content=body, headers={"Content-Type": "application/json"})
    assert answer.status_code == 400, (path, body, answer.text)
    assert ctx.history.sessions() == []


@pytest.mark.parametrize("value", [3, True, None, ["a"], {"b": 1}])
def test_memory_metadata_that_is_not_a_string_is_a_400_naming_it(
    served: tuple[TestClient, Any], value: object
) -> None:
    client, ctx = served
    answer = client.post(
        "/koog/v1/memory", json={"text": "a fact", "metadata": {"team": "infra", "n": value}}
    )
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["param"] == "metadata.n"
    assert ctx.long_term_memory.records(None) == []
    kept = client.post("/koog/v1/memory", json={"text": "a fact", "metadata": {"team": "infra"}})
    assert kept.status_code in (200, 201), kept.text


@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("/v1/chat/completions", "messages"),
        ("/v1/responses", "input"),
        ("/v1/messages", "messages"),
    ],
)
def test_a_body_of_more_messages_than_the_bound_is_a_400_and_stores_nothing(
    served: tuple[TestClient, Any], fake_model: FakeChatModel, path: str, field: str
) -> None:
    """Issue 45: what one request may cost is bounded (245,000 tiny messages in 8 MiB took
    31 s of CPU); the bound is well above a long agent session."""
    from koogcli.server.bodies import MAX_MESSAGES

    client, ctx = served
    tiny = [{"role": "user", "content": "x"}] * (MAX_MESSAGES + 1)
    body: dict[str, object] = {"model": "m", "max_tokens": 8, field: tiny}
    answer = client.post(path, json=body, headers={"X-Koog-Session": "big"})
    assert answer.status_code == 400, answer.text
    assert f"at most {MAX_MESSAGES:,}" in answer.text
    assert ctx.history.sessions() == [] and fake_model.requests == []
