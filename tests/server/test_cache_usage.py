"""`koog serve` passes on the prompt tokens the upstream's cache served (SPEC §5.4a), each
protocol in its own usage field: chat's `prompt_tokens_details.cached_tokens`, Responses'
`input_tokens_details.cached_tokens`, Messages' `cache_read_input_tokens`. Nothing is
made up when the upstream said nothing."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from koogcli.core.model_port import Completion
from koogcli.core.ports import Usage
from tests.fakes.chat_model import FakeChatModel

CACHED = Usage(100, 5, 105, 80)
UNSAID = Usage(100, 5, 105)
HI = [{"role": "user", "content": "hi"}]


@pytest.fixture
def client(make_ctx: Callable[..., Any]) -> Iterator[TestClient]:
    from koogcli.server.app import create_app
    from koogcli.server.state import ServerState

    state = ServerState(make_ctx(), workers=2)
    with TestClient(create_app(state), base_url="http://127.0.0.1") as test_client:
        yield test_client
    state.pool.shutdown(wait=True)


def events(answer: Any) -> list[dict[str, Any]]:
    return [
        json.loads(line[6:])
        for line in answer.iter_lines()
        if line.startswith("data: ") and line != "data: [DONE]"
    ]


def test_chat_completions_report_the_cached_tokens(
    client: TestClient, fake_model: FakeChatModel
) -> None:
    fake_model.enqueue(Completion("one", usage=CACHED), Completion("two", usage=CACHED))
    whole = client.post("/v1/chat/completions", json={"model": "m", "messages": HI}).json()
    assert whole["usage"]["prompt_tokens"] == 100
    assert whole["usage"]["prompt_tokens_details"] == {"cached_tokens": 80}
    body = {"model": "m", "stream": True, "stream_options": {"include_usage": True}}
    with client.stream("POST", "/v1/chat/completions", json={**body, "messages": HI}) as answer:
        [usage] = [e["usage"] for e in events(answer) if e.get("usage")]
    assert usage["prompt_tokens_details"] == {"cached_tokens": 80}


def test_chat_completions_say_nothing_of_a_cache_the_upstream_did_not_report(
    client: TestClient, fake_model: FakeChatModel
) -> None:
    fake_model.enqueue(Completion("one", usage=UNSAID))
    whole = client.post("/v1/chat/completions", json={"model": "m", "messages": HI}).json()
    assert whole["usage"]["prompt_tokens"] == 100
    assert "prompt_tokens_details" not in whole["usage"]


def test_responses_report_the_cached_tokens_and_keep_them_stored(
    client: TestClient, fake_model: FakeChatModel
) -> None:
    fake_model.enqueue(Completion("one", usage=CACHED))
    named = {"X-Koog-Session": "cached"}
    made = client.post("/v1/responses", json={"model": "m", "input": "hi"}, headers=named).json()
    assert made["usage"]["input_tokens"] == 100
    assert made["usage"]["input_tokens_details"] == {"cached_tokens": 80}
    again = client.get(f"/v1/responses/{made['id']}", headers=named).json()  # as stored
    assert again["usage"]["input_tokens_details"] == {"cached_tokens": 80}


def test_messages_report_cache_reads_as_anthropic_does(
    client: TestClient, fake_model: FakeChatModel
) -> None:
    """`input_tokens` are those not read from the cache: the three input fields add up to
    the prompt, as Anthropic's do."""
    fake_model.enqueue(
        Completion("one", usage=CACHED),
        Completion("two", usage=CACHED),
        Completion("3", usage=UNSAID),
    )
    body = {"model": "m", "max_tokens": 64, "messages": HI}
    usage = client.post("/v1/messages", json=body).json()["usage"]
    assert (usage["input_tokens"], usage["cache_read_input_tokens"]) == (20, 80)
    with client.stream("POST", "/v1/messages", json={**body, "stream": True}) as answer:
        [delta] = [e for e in events(answer) if e.get("type") == "message_delta"]
    assert (delta["usage"]["input_tokens"], delta["usage"]["cache_read_input_tokens"]) == (20, 80)
    plain = client.post("/v1/messages", json=body).json()["usage"]
    assert (plain["input_tokens"], plain["cache_read_input_tokens"]) == (100, 0)
