"""The chat-completions wire client against the local test server: real HTTP, real SSE."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import pytest

from koogcli.adapters.model import chat_stream, sse
from koogcli.adapters.model.chat_upstream import OpenAIChatModel
from koogcli.adapters.model.endpoint import resolve_endpoint
from koogcli.core.errors import EndpointNotConfiguredError, ModelError
from koogcli.core.messages import system, user
from koogcli.core.model_port import ModelRequest
from tests.fakes.openai_server import PROFILES, FakeOpenAIServer

KEY = "sk-adapter-test"


def model_for(
    server: FakeOpenAIServer, timeout: float = 5, retries: int = 0, base: str | None = None
) -> OpenAIChatModel:
    endpoint = resolve_endpoint(
        base or server.base_url, "TEST_KEY", {"TEST_KEY": KEY}, timeout, retries
    )
    return OpenAIChatModel(endpoint)


def request(stream: bool = True, text: str = "hi") -> ModelRequest:
    return ModelRequest("test-model", [system("sys"), user(text)], 0.5, stream)


def test_streams_deltas_and_reports_usage(server: FakeOpenAIServer) -> None:
    server.enqueue({"chunks": ["Hel", "lo ", "world"]})
    seen: list[str] = []
    done = model_for(server).complete(request(), seen.append)
    assert seen == ["Hel", "lo ", "world"]
    assert done.text == "Hello world" and done.finish_reason == "stop"
    assert done.usage is not None and done.usage.completion_tokens == 2
    sent = server.chat_requests[0]
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}
    assert sent["messages"] == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "hi"},
    ]
    assert sent["temperature"] == 0.5


def test_non_streaming_reply(server: FakeOpenAIServer) -> None:
    server.enqueue({"content": "whole reply"})
    done = model_for(server).complete(request(stream=False))
    assert done.text == "whole reply" and "stream" not in server.chat_requests[0]


@pytest.mark.parametrize("stream", [True, False])
def test_tool_call_deltas_are_reassembled(server: FakeOpenAIServer, stream: bool) -> None:
    server.enqueue(
        {
            "tool_calls": [
                {"id": "call_1", "name": "create_user", "arguments": {"name": "Alex"}},
                {"id": "call_2", "name": "create_user", "arguments": {"name": "Maria", "age": 30}},
            ]
        }
    )
    done = model_for(server).complete(request(stream=stream))
    assert [(c.id, c.name, json.loads(c.arguments)) for c in done.tool_calls] == [
        ("call_1", "create_user", {"name": "Alex"}),
        ("call_2", "create_user", {"name": "Maria", "age": 30}),
    ]
    assert done.finish_reason == "tool_calls"


@pytest.mark.parametrize(
    "status, pattern, hint",
    [
        (401, r"rejected the API key \(HTTP 401\)", "TEST_KEY"),
        (403, r"rejected the API key \(HTTP 403\)", "TEST_KEY"),
        (404, r"nothing is served at that path", "base URL's path"),
        (429, r"rate limiting requests \(HTTP 429\)$", None),
        (400, r"answered HTTP 400: boom$", None),
        (500, r"answered HTTP 500: boom$", None),
        (503, r"answered HTTP 503", None),
    ],
)
def test_status_errors_become_one_clear_message(
    server: FakeOpenAIServer, status: int, pattern: str, hint: str | None
) -> None:
    server.enqueue({"status": status, "message": "boom"})
    with pytest.raises(ModelError, match=pattern) as info:
        model_for(server).complete(request())
    if hint:
        assert hint in (info.value.hint or "")
    assert KEY not in info.value.message and KEY not in (info.value.hint or "")


def test_retries_are_honoured(server: FakeOpenAIServer) -> None:
    server.enqueue({"status": 500}, {"status": 502}, {"content": "third time lucky"})
    assert model_for(server, retries=2).complete(request()).text == "third time lucky"
    assert len(server.chat_requests) == 3


def test_an_upstream_refusal_keeps_its_status_words_and_retry_after(
    server: FakeOpenAIServer,
) -> None:
    server.enqueue({"status": 429, "message": "slow down", "retry_after": 7})
    with pytest.raises(ModelError) as info:
        model_for(server).complete(request())
    assert info.value.status == 429 and info.value.retry_after == "7"
    assert info.value.upstream is not None and info.value.upstream["message"] == "slow down"


def test_a_server_refusing_stream_options_is_asked_again_without_them(
    server: FakeOpenAIServer,
) -> None:
    server.reject_stream_options = True
    model = model_for(server)
    assert model.complete(request(text="one")).text == "echo: one"
    assert model.complete(request(text="two")).text == "echo: two"
    sent = ["stream_options" in r for r in server.chat_requests]
    assert sent == [True, False, False]  # refused once, never sent again


def test_a_json_answer_to_a_streamed_request_is_read_whole(server: FakeOpenAIServer) -> None:
    server.enqueue({"json": True, "content": "all at once"})
    seen: list[str] = []
    assert model_for(server).complete(request(), seen.append).text == "all at once"
    assert seen == ["all at once"]


def test_an_empty_stream_gets_a_second_opinion_without_streaming(
    server: FakeOpenAIServer,
) -> None:
    server.enqueue({"empty_stream": True}, {"content": "the real answer"})
    assert model_for(server).complete(request()).text == "the real answer"
    assert [r.get("stream") for r in server.chat_requests] == [True, None]


def test_timeout(server: FakeOpenAIServer) -> None:
    server.enqueue({"delay": 2, "content": "late"})
    with pytest.raises(ModelError, match=r"did not answer within 0.3s"):
        model_for(server, timeout=0.3).complete(request())


def test_connection_refused_names_the_url() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    url = f"http://127.0.0.1:{port}/v1"
    endpoint = resolve_endpoint(url, "K", {}, 2, 0)
    with pytest.raises(ModelError, match=f"cannot connect to {url}"):
        OpenAIChatModel(endpoint).complete(request())


def test_connection_dropped_mid_stream(server: FakeOpenAIServer) -> None:
    server.enqueue({"chunks": ["a", "b", "c", "d"], "drop_after": 2})
    seen: list[str] = []
    with pytest.raises(ModelError, match="broke during the reply"):
        model_for(server).complete(request(), seen.append)
    assert seen == ["a"]  # the role chunk, then "a"; then the drop


def test_no_key_and_no_base_url_is_the_first_run_case() -> None:
    with pytest.raises(EndpointNotConfiguredError):
        resolve_endpoint("", "OPENAI_API_KEY", {}, 1, 0)
    assert resolve_endpoint("", "K", {"K": "x"}, 1, 0).base_url.startswith("https://")
    assert resolve_endpoint("http://h/v1", "K", {}, 1, 0).api_key == "not-needed"


@pytest.mark.parametrize("profile", sorted(PROFILES))
@pytest.mark.parametrize("stream", [True, False])
def test_every_endpoint_profile_gives_the_same_text_and_calls(
    server: FakeOpenAIServer, profile: str, stream: bool
) -> None:
    """Azure's filter chunks, Bedrock's usage-only chunks, reasoning deltas, Gemini's
    parallel calls without an index: the reply's text and calls come out as the reference
    server's do (ids are the server's; koog makes them unique later, §5.15)."""
    server.use_profile(profile)
    server.enqueue(
        {
            "content": "two calls",
            "tool_calls": [
                {"id": "a", "name": "lookup", "arguments": {"city": "Rome"}},
                {"id": "b", "name": "lookup", "arguments": {"city": "Oslo"}},
            ],
        }
    )
    seen: list[str] = []
    done = model_for(server).complete(request(stream), seen.append)
    assert done.text == "two calls" and "".join(seen) == "two calls"
    assert [(c.name, json.loads(c.arguments)) for c in done.tool_calls] == [
        ("lookup", {"city": "Rome"}),
        ("lookup", {"city": "Oslo"}),
    ]
    if stream and "no_usage" in PROFILES[profile]:
        assert done.usage is None  # the server sent none, and none is made up
    else:
        assert done.usage is not None and done.usage.total_tokens > 2


def test_fields_repeated_in_every_fragment_are_set_once(
    server: FakeOpenAIServer,
) -> None:
    """llama.cpp repeats id, type and name in every fragment: each is set once, never
    appended into `get_weatherget_weather...`."""
    server.responder = None
    server.quirks = {"repeat_fields"}
    server.enqueue({"tool_calls": [{"id": "a", "name": "get_weather", "arguments": {"c": 1}}]})
    done = model_for(server).complete(request(True))
    assert [(c.id, c.name, c.arguments) for c in done.tool_calls] == [
        ("a", "get_weather", '{"c": 1}')
    ]


class _Pieces:
    """A response whose body arrives in these pieces."""

    def __init__(self, *pieces: bytes) -> None:
        self.pieces = pieces

    def iter_bytes(self) -> Iterator[bytes]:
        return iter(self.pieces)


def test_server_sent_events_are_read_as_the_spec_reads_them() -> None:
    body = _Pieces(b': keep-alive\r\n\r\nevent: x\ndata: {"a":', b"\ndata: 1}\n\ndata:[DONE]")
    found = [data for _, data in sse.events(body, sse.Bounds("u"))]
    assert found == ["", '{"a":\n1}', "[DONE]"]
    chunk = chat_stream.Fields({"choices": [{"delta": {"content": "hi"}}], "usage": None})
    assert chunk.choices[0].delta.content == "hi" and chunk.usage is None
    assert chunk.choices[0].finish_reason is None
