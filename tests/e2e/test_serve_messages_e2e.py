"""Anthropic Messages through `koog serve`, driven by the official `anthropic` SDK
(`messages.create`, `messages.stream`, `count_tokens`): every reply and event parses with
its types, errors keep Anthropic's shape and status, and a Claude Code conversation whose
`cache_control` marker moves and whose system text changes stays one session."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anthropic
import pytest

from tests.fakes.openai_server import FakeOpenAIServer
from tests.support.serving import KoogServe, http

pytestmark = pytest.mark.e2e
Run = Callable[..., Any]
WEATHER = {
    "name": "get_weather",
    "description": "The weather in a city.",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
}


def _client(serve: KoogServe, **headers: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        base_url=serve.url.removesuffix("/v1"),
        api_key="sk-test",
        max_retries=0,
        default_headers=headers,
    )


def _history(run_koog: Run, session: str) -> list[dict[str, Any]]:
    shown = run_koog("history", "show", "-s", session, "--json")
    assert shown.returncode == 0, shown.stderr
    return [m for m in json.loads(shown.stdout) if m["role"] != "system"]


def _system(text: str) -> list[dict[str, Any]]:
    return [
        {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1; cch=1"},
        {"type": "text", "text": text, "cache_control": {"type": "ephemeral"}},
    ]


def test_a_claude_code_style_conversation_with_a_tool_round_trip_is_one_session(
    backend: str, serve: KoogServe, server: FakeOpenAIServer, run_koog: Run
) -> None:
    client = _client(serve, **{"X-Claude-Code-Session-Id": "5f0c7a2e-1111-4222-8333-944445555666"})
    server.enqueue(
        {"tool_calls": [{"id": "call_1", "name": "get_weather", "arguments": '{"city":"Oslo"}'}]}
    )
    ask: list[dict[str, Any]] = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "weather in Oslo?", "cache_control": {"type": "ephemeral"}}
            ],
        }
    ]
    with client.messages.stream(
        model="claude-opus-4-8",
        max_tokens=64000,
        system=_system("You are Claude Code."),
        messages=ask,
        tools=[WEATHER],  # type: ignore[arg-type]
    ) as stream:
        kinds = [e.type for e in stream]
        first = stream.get_final_message()
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    assert first.stop_reason == "tool_use"
    [use] = [b for b in first.content if b.type == "tool_use"]
    assert (use.name, use.input, use.id) == ("get_weather", {"city": "Oslo"}, "call_1")
    # Turn 2: the marker moved to the newest block, the system text changed.
    ask[0]["content"][0].pop("cache_control")
    ask += [
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": use.id, "name": use.name, "input": use.input}],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": use.id,
                    "content": "cloudy",
                    "cache_control": {"type": "ephemeral"},
                }
            ],
        },
    ]
    done = client.messages.create(
        model="claude-opus-4-8",
        max_tokens=4096,
        system=_system("You are Claude Code, v2."),
        messages=ask,
        tools=[WEATHER],  # type: ignore[arg-type]
    )
    assert done.stop_reason == "end_turn"
    assert done.content[0].type == "text" and done.content[0].text == "echo: weather in Oslo?"
    sent = server.chat_requests[-1]
    assert sent["model"] == "gpt-4o-mini" and sent["max_tokens"] == 4096
    assert sent["messages"][0]["content"].endswith("You are Claude Code, v2.")
    assert sent["messages"][-1]["role"] == "tool" and sent["messages"][-1]["content"] == "cloudy"
    listed = [s["session"] for s in json.loads(run_koog("history", "list", "--json").stdout)]
    assert listed == ["claude-5f0c7a2e-1111-4222-8333-944445555666"]
    roles = [m["role"] for m in _history(run_koog, listed[0])]
    assert roles == ["user", "assistant", "tool", "assistant"]
    # A tool-less side request under the same session id is answered, never stored.
    client.messages.create(
        model="claude-haiku", max_tokens=50, messages=[{"role": "user", "content": "title?"}]
    )
    assert [m["role"] for m in _history(run_koog, listed[0])] == roles
    assert [
        s["session"] for s in json.loads(run_koog("history", "list", "--json").stdout)
    ] == listed


def test_errors_keep_anthropics_shape_and_status(
    serve: KoogServe, server: FakeOpenAIServer
) -> None:
    client = _client(serve, **{"X-Koog-Session": "errs"})
    server.enqueue({"status": 429, "message": "slow down"})
    with pytest.raises(anthropic.RateLimitError) as caught:
        client.messages.create(
            model="m", max_tokens=10, messages=[{"role": "user", "content": "a"}]
        )
    assert caught.value.body["error"]["type"] == "rate_limit_error"  # type: ignore[index]
    status, body = http("POST", serve.url + "/messages", {"model": "m", "messages": []})
    assert status == 400
    assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    status, body = http(
        "POST",
        serve.url + "/messages",
        {
            "model": "m",
            "max_tokens": 5,
            "messages": [{"role": "user", "content": "a"}],
            "tools": [{"type": "web_search_20250305", "name": "web_search"}],
        },
    )
    # A server tool a translated upstream cannot run is left out, not a refusal (issue 52).
    assert status == 200 and "tools" not in server.chat_requests[-1], body


def test_count_tokens_answers_with_koogs_estimate(serve: KoogServe) -> None:
    client = _client(serve)
    short = client.messages.count_tokens(model="m", messages=[{"role": "user", "content": "hi"}])
    long = client.messages.count_tokens(
        model="m",
        messages=[{"role": "user", "content": "hello there " * 200}],
        tools=[WEATHER],  # type: ignore[list-item]
    )
    assert 0 < short.input_tokens < long.input_tokens


def test_head_of_the_root_is_answered(serve: KoogServe) -> None:
    status, _ = http("HEAD", serve.url.removesuffix("/v1") + "/")
    assert status == 200


def test_kill_minus_nine_mid_stream_keeps_completed_turns_and_no_partial_one(
    backend: str,
    koog_env: dict[str, str],
    server: FakeOpenAIServer,
    tmp_path: Path,
    run_koog: Run,
) -> None:
    """A Responses stream and a Messages stream in flight when serve is killed: each
    session keeps its completed turn and nothing of the one cut off; after a restart the
    clients' resends continue the same sessions."""
    served = KoogServe(koog_env, log=tmp_path / "serve.log").start()
    claude = _client(served, **{"X-Koog-Session": "km"})
    codex = served.client(default_headers={"X-Koog-Session": "kr"})
    said_m: list[Any] = [{"role": "user", "content": "first m"}]
    said_r: list[Any] = [{"role": "user", "content": "first r"}]
    one = claude.messages.create(model="m", max_tokens=100, messages=said_m)
    said_m += [{"role": "assistant", "content": one.content[0].text}]  # type: ignore[union-attr]
    two = codex.responses.create(model="m", input=said_r, store=False)
    said_r += [{"role": "assistant", "content": two.output_text}]
    server.enqueue(*[{"chunks": [f"w{n} " for n in range(300)], "chunk_delay": 0.02}] * 2)
    errors: list[BaseException] = []

    def messages() -> None:
        try:
            with claude.messages.stream(
                model="m", max_tokens=100, messages=[*said_m, {"role": "user", "content": "cut m"}]
            ) as stream:
                for _ in stream:
                    pass
        except Exception as exc:  # the connection is gone: what a client sees
            errors.append(exc)

    def responses() -> None:
        try:
            with codex.responses.stream(
                model="m", input=[*said_r, {"role": "user", "content": "cut r"}], store=False
            ) as stream:
                for _ in stream:
                    pass
        except Exception as exc:
            errors.append(exc)

    threads = [threading.Thread(target=messages), threading.Thread(target=responses)]
    for t in threads:
        t.start()
    time.sleep(1.5)  # both streams under way
    served.kill()
    for t in threads:
        t.join(30)
    assert len(errors) == 2, errors
    for session, first in (("km", "first m"), ("kr", "first r")):
        kept = [(m["role"], m["content"]) for m in _history(run_koog, session)]
        assert kept == [("user", first), ("assistant", f"echo: {first}")], kept
    restarted = KoogServe(koog_env, log=tmp_path / "serve2.log").start()
    try:
        claude = _client(restarted, **{"X-Koog-Session": "km"})
        codex = restarted.client(default_headers={"X-Koog-Session": "kr"})
        claude.messages.create(
            model="m", max_tokens=100, messages=[*said_m, {"role": "user", "content": "again m"}]
        )
        codex.responses.create(
            model="m", input=[*said_r, {"role": "user", "content": "again r"}], store=False
        )
    finally:
        assert restarted.stop() == 0
    listed = sorted(s["session"] for s in json.loads(run_koog("history", "list", "--json").stdout))
    assert listed == ["km", "kr"]
    assert [m["content"] for m in _history(run_koog, "km")][-2:] == ["again m", "echo: again m"]


def test_the_upstreams_reasoning_reaches_each_protocol_as_its_own(
    serve: KoogServe, server: FakeOpenAIServer
) -> None:
    """An upstream sending `reasoning_content` (DeepSeek, vLLM): a thinking block before the
    text for Messages, a reasoning item before the message for Responses (streamed, and
    in the stored response), `reasoning_content` deltas for chat completions."""
    server.quirks = {"reasoning"}
    thought = "Let me think about this. The answer follows."
    claude = _client(serve, **{"X-Koog-Session": "think-m"})
    with claude.messages.stream(
        model="m", max_tokens=100, messages=[{"role": "user", "content": "why?"}]
    ) as stream:
        kinds = [e.type for e in stream]
        final = stream.get_final_message()
    assert kinds.count("content_block_start") == 2
    assert [b.type for b in final.content] == ["thinking", "text"]
    assert final.content[0].thinking == thought  # type: ignore[union-attr]
    assert final.content[1].text == "echo: why?"  # type: ignore[union-attr]
    codex = serve.client(default_headers={"X-Koog-Session": "think-r"})
    with codex.responses.stream(model="m", input="why?") as rstream:
        events = [e.type for e in rstream]
        done = rstream.get_final_response()
    assert "response.reasoning_text.delta" in events
    assert [o.type for o in done.output] == ["reasoning", "message"]
    assert done.output_text == "echo: why?"
    kept = codex.responses.retrieve(done.id)
    assert kept.output[0].type == "reasoning"
    assert kept.output[0].content[0].text == thought  # type: ignore[union-attr,index]
    chat = serve.client(default_headers={"X-Koog-Session": "think-c"})
    chunks = list(
        chat.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "why?"}], stream=True
        )
    )
    said = "".join(
        getattr(c.choices[0].delta, "reasoning_content", None) or "" for c in chunks if c.choices
    )
    assert said == thought


def test_with_no_model_configured_every_protocol_uses_the_model_chat_would(
    koog_env: dict[str, str], server: FakeOpenAIServer
) -> None:
    """A local upstream and no `llm.model`: `koog chat` takes the first model it lists, and
    so do Messages and Responses requests through serve (their clients name their own
    vendor's models, which the upstream does not have)."""
    env = {k: v for k, v in koog_env.items() if k != "KOOG_MODEL"}
    started = KoogServe(env).start()
    try:
        _client(started).messages.create(
            model="claude-sonnet-4-5", max_tokens=20, messages=[{"role": "user", "content": "hi"}]
        )
        started.client().responses.create(model="gpt-5-codex", input="hi", store=False)
    finally:
        assert started.stop() == 0
    assert [r["model"] for r in server.requests if "messages" in r] == ["test-model"] * 2
