"""Prompt-cache figures end to end through the model client (SPEC §5.4a): the test server
keeps one slot as llama-server does, and the chat wire client (the CLI's and serve's alike)
reads what it reports, streamed or not."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from koogcli.adapters.model.chat_upstream import OpenAIChatModel
from koogcli.adapters.model.endpoint import resolve_endpoint
from koogcli.core.messages import Message, assistant, system, user
from koogcli.core.model_port import ModelRequest
from tests.fakes.openai_server import FakeOpenAIServer, count_tokens, prompt_tokens


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    """A server of this test's own: the suite's shared one can take a late request of an
    earlier test's process between two of these, and the one slot would hold that one."""
    started = FakeOpenAIServer().start()
    yield started
    started.stop()


@pytest.fixture
def model(server: FakeOpenAIServer) -> OpenAIChatModel:
    endpoint = resolve_endpoint(server.base_url, "K", {"K": "sk-x"}, 5, 0)
    return OpenAIChatModel(endpoint)


def ask(model: OpenAIChatModel, messages: list[Message], stream: bool = True) -> Any:
    return model.complete(ModelRequest("test-model", messages, None, stream))


FIRST = [system("You are terse."), user("What is the capital of Italy?")]


@pytest.mark.parametrize("stream", [True, False])
def test_a_request_extending_the_last_reads_the_cached_prefix(
    model: OpenAIChatModel, stream: bool
) -> None:
    one = ask(model, FIRST, stream)
    assert one.usage.cached_tokens is not None and one.usage.cached_tokens <= 3
    two = ask(model, [*FIRST, assistant(one.text), user("And of Norway?")], stream)
    # All of the first request but its generation prompt was in the slot.
    assert two.usage.cached_tokens == one.usage.prompt_tokens - 1
    assert two.usage.prompt_tokens > one.usage.prompt_tokens


def test_a_changed_first_message_is_read_again_whole(
    model: OpenAIChatModel, server: FakeOpenAIServer
) -> None:
    ask(model, FIRST)
    other = ask(model, [system("Be verbose."), *FIRST[1:]])
    assert other.usage.cached_tokens <= 3  # the opening and the system role's tokens
    [first, second] = server.cache_log
    assert server.prefilled_tokens == first["prompt_tokens"] + (
        second["prompt_tokens"] - second["cached_tokens"]
    )


@pytest.mark.parametrize("stream", [True, False])
def test_llama_server_timings_alone_are_read(
    model: OpenAIChatModel, server: FakeOpenAIServer, stream: bool
) -> None:
    """llama-server not asked for usage still sends `timings` (`cache_n`, `prompt_n`)."""
    server.quirks = {"timings_only"}
    ask(model, FIRST, stream)
    two = ask(model, [*FIRST, assistant("Rome."), user("And of Norway?")], stream)
    assert two.usage is not None
    assert two.usage.prompt_tokens == server.cache_log[-1]["prompt_tokens"]
    assert two.usage.cached_tokens == server.cache_log[-1]["cached_tokens"] > 0


@pytest.mark.parametrize("stream", [True, False])
def test_a_server_that_reports_no_cache_gets_none_invented(
    model: OpenAIChatModel, server: FakeOpenAIServer, stream: bool
) -> None:
    server.prompt_cache = False
    ask(model, FIRST, stream)
    two = ask(model, [*FIRST, assistant("Rome."), user("And of Norway?")], stream)
    assert two.usage is not None and two.usage.cached_tokens is None


def test_llama_cpp_python_reports_neither_usage_nor_timings(
    model: OpenAIChatModel, server: FakeOpenAIServer
) -> None:
    server.use_profile("llamacpp")
    assert ask(model, FIRST).usage is None


def test_the_servers_tokens_are_its_count_and_follow_the_messages() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "Be brief. ünïcode"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "what is this"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "look", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c", "content": "a cat"},
    ]
    assert 2 + sum(map(len, prompt_tokens(messages))) == count_tokens(messages)
    other_image = json.loads(json.dumps(messages))
    other_image[1]["content"][1]["image_url"]["url"] = "data:image/png;base64,BBBB"
    a, b = prompt_tokens(messages), prompt_tokens(other_image)
    assert a[0] is b[0] and a[1] != b[1]  # memoised per message; the image tells them apart


def test_the_cache_figures_are_served_to_tests_over_http(
    model: OpenAIChatModel, server: FakeOpenAIServer
) -> None:
    ask(model, FIRST)
    ask(model, FIRST)  # the same request again: all but the last token reused
    url = server.base_url.removesuffix("/v1") + "/_control/cache"
    with urllib.request.urlopen(url) as answer:
        got = json.loads(answer.read())
    total = count_tokens([{"role": m.role, "content": m.content} for m in FIRST])
    assert got["requests"] == [
        {"prompt_tokens": total, "cached_tokens": 0},
        {"prompt_tokens": total, "cached_tokens": total - 1},
    ]
    assert got["prefilled_tokens"] == server.prefilled_tokens == total + 1
    server.reset()
    assert server.cache_log == [] and server.slot is None
