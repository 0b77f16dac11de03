"""`koog serve` in front of a native upstream (issue 43, acceptance 2): a Messages request
to a `messages` upstream goes as it came (thinking blocks and signatures, `cache_control`,
`anthropic-beta`), with koog's memory records appended where they stay; the upstream's
events stream back as sent; the session keeps the thinking, and `koog chat -s` continues
it natively."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anthropic
import pytest

from tests.fakes.openai_server import FakeOpenAIServer
from tests.support.harbour import FACTS, QUESTIONS
from tests.support.serving import KoogServe

pytestmark = pytest.mark.e2e

Run = Callable[..., subprocess.CompletedProcess[str]]
BETA = "interleaved-thinking-2025-05-14"
SYSTEM = [
    {"type": "text", "text": "You are a coding agent.", "cache_control": {"type": "ephemeral"}}
]


def _config(path: Path, server: FakeOpenAIServer, extra: str = "") -> dict[str, str]:
    path.write_text(
        f'[llm]\nmodel = "claude-up"\nbase_url = "{server.base_url}"\nwire_api = "messages"\n'
        "[long_term_memory.retrieval]\nenabled = true\n" + extra
    )
    return {"KOOG_CONFIG": str(path), "ANTHROPIC_API_KEY": "upstream-key", "KOOG_MODEL": ""}


def _agent_turns(client: anthropic.Anthropic, turns: int, stream: bool) -> list[dict[str, Any]]:
    """Claude Code's shape: thinking on, the breakpoint moved to the newest message, each
    reply's blocks sent back as they came."""
    messages: list[dict[str, Any]] = []
    for turn in range(turns):
        for m in messages:
            for block in m["content"]:
                block.pop("cache_control", None)
        question = {
            "type": "text",
            "text": QUESTIONS[turn % 4],
            "cache_control": {"type": "ephemeral"},
        }
        messages.append({"role": "user", "content": [question]})
        asked: dict[str, Any] = {
            "model": "claude-sonnet-4-5",
            "max_tokens": 4096,
            "thinking": {"type": "enabled", "budget_tokens": 1024},
            "system": SYSTEM,
            "messages": messages,
            "extra_headers": {"anthropic-beta": BETA},
        }
        if stream:
            with client.messages.stream(**asked) as events:
                reply = events.get_final_message()
        else:
            reply = client.messages.create(**asked)
        blocks = [b.model_dump(exclude_none=True) for b in reply.content]
        assert blocks[0]["type"] == "thinking" and blocks[0]["signature"]
        messages.append({"role": "assistant", "content": blocks})
    return messages


@pytest.mark.parametrize("stream", [True, False])
def test_claude_code_style_turns_pass_through_with_memory_and_keep_the_cache(
    koog_env: dict[str, str],
    server: FakeOpenAIServer,
    isolated: Path,
    run_koog: Run,
    stream: bool,
) -> None:
    _relay_thinking_turns(koog_env, server, isolated, run_koog, stream, "claude-relay")


@pytest.mark.parametrize("stream", [True, False])
def test_a_plain_sdk_client_with_thinking_and_no_session_keeps_its_prefix(
    koog_env: dict[str, str],
    server: FakeOpenAIServer,
    isolated: Path,
    run_koog: Run,
    stream: bool,
) -> None:
    """Issue 53: no session header, so nothing is stored; the records koog placed after
    each question come back with it in every later request (remembered by the message's
    digest), so the thinking blocks' prefixes hold and the cache reads as a direct client's."""
    _relay_thinking_turns(koog_env, server, isolated, run_koog, stream, None)


WINDOW = '[[chat_memory.preprocessors]]\ntype = "window"\nsize = 4\n'


@pytest.mark.parametrize("session", ["windowed", None])
def test_a_window_never_edits_a_passed_through_conversation(
    koog_env: dict[str, str],
    server: FakeOpenAIServer,
    isolated: Path,
    run_koog: Run,
    session: str | None,
) -> None:
    """A window shapes koog's own requests; a client's request passed through goes as it
    came, its records kept after every question it holds (none left behind by the window),
    and `why` says the preprocessors were not applied to it."""
    _relay_thinking_turns(koog_env, server, isolated, run_koog, True, session, WINDOW)
    if session is None:
        return
    config = {"KOOG_CONFIG": str(isolated / "relay.toml")}
    words = run_koog("why", "-s", session, "--turn", "10", env=config)  # the last relayed
    assert "not applied: the client's own request was passed through" in words.stdout


def _relay_thinking_turns(
    koog_env: dict[str, str],
    server: FakeOpenAIServer,
    isolated: Path,
    run_koog: Run,
    stream: bool,
    session: str | None,
    extra: str = "",
) -> None:
    env = _config(isolated / "relay.toml", server, extra)
    for fact in FACTS:
        assert run_koog("memory", "add", fact, env=env).returncode == 0
    # The same conversation sent straight to the upstream: what its cache reads then.
    direct = anthropic.Anthropic(
        base_url=server.base_url.removesuffix("/v1"), api_key="upstream-key", max_retries=0
    )
    _agent_turns(direct, 10, stream)
    direct_reads = sum(e["cache_read"] for e in server.native_log)
    server.reset()
    started = KoogServe({**koog_env, **env}).start()
    try:
        relayed = anthropic.Anthropic(
            base_url=started.url.removesuffix("/v1"),
            api_key="client-key",
            max_retries=0,
            default_headers={"X-Koog-Session": session} if session else None,
        )
        conversation = _agent_turns(relayed, 10, stream)
    finally:
        assert started.stop() == 0
    log = server.native_log
    assert len(log) == 10 and not [e for e in log if "rejected" in e]
    sent = [r for r in server.requests if r.get("_path", "").endswith("/v1/messages")]
    assert all(r["_headers"].get("anthropic-beta") == BETA for r in sent)
    assert all(r["_headers"]["x-api-key"] == "upstream-key" for r in sent)
    assert all(r["model"] == "claude-up" and r["system"] == SYSTEM for r in sent)
    for turn, body in enumerate(sent):  # this question's record, after it
        assert FACTS[turn % 4] in json.dumps(body["messages"][-1]["content"])
    reads = sum(e["cache_read"] for e in log)
    assert reads >= 0.9 * direct_reads, (reads, direct_reads)
    sessions = json.loads(run_koog("history", "list", "--json", env=env).stdout)
    assert [s["session"] for s in sessions] == ([session] if session else [])
    if session is None:
        return
    stored = json.loads(run_koog("history", "show", "-s", session, "--json", env=env).stdout)
    replies = [m for m in stored if m["role"] == "assistant"]
    assert len(replies) == 10
    kept = [r["meta"]["native"]["items"][0] for r in replies]
    given = [m["content"][0] for m in conversation if m["role"] == "assistant"]
    assert kept == given  # thinking and signature, as the upstream made them
    # koog chat continues the session natively: its own system prompt, so the earlier
    # thinking (bound to the agent's prefix) stays home; the upstream accepts the request.
    done = run_koog("chat", "-s", session, "and the harbour master?", env=env)
    assert done.returncode == 0, done.stderr
    assert server.requests[-1]["_path"].endswith("/v1/messages")
    assert not [e for e in server.native_log if "rejected" in e]


def test_an_upstream_refusal_reaches_the_client_in_its_shape_with_its_status(
    koog_env: dict[str, str], server: FakeOpenAIServer, isolated: Path
) -> None:
    env = _config(isolated / "relay.toml", server)
    started = KoogServe({**koog_env, **env}).start()
    try:
        client = anthropic.Anthropic(
            base_url=started.url.removesuffix("/v1"), api_key="k", max_retries=0
        )
        server.enqueue({"status": 529, "message": "Overloaded"})
        with pytest.raises(anthropic.APIStatusError) as raised:
            client.messages.create(
                model="m", max_tokens=64, messages=[{"role": "user", "content": "hi"}]
            )
        assert raised.value.status_code == 529
        assert "Overloaded" in str(raised.value.body)
        bad = [
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "x", "signature": "forged"},
                    {"type": "text", "text": "yo"},
                ],
            },
            {"role": "user", "content": "again"},
        ]
        with pytest.raises(anthropic.BadRequestError) as refused:
            client.messages.create(model="m", max_tokens=64, messages=bad)  # type: ignore[arg-type]
        assert "signature" in str(refused.value.body)
    finally:
        assert started.stop() == 0


def _responses_config(path: Path, server: FakeOpenAIServer) -> dict[str, str]:
    path.write_text(
        f'[llm]\nmodel = "gpt-up"\nbase_url = "{server.base_url}"\nwire_api = "responses"\n'
        "[long_term_memory.retrieval]\nenabled = true\n"
    )
    return {"KOOG_CONFIG": str(path), "OPENAI_API_KEY": "upstream-key", "KOOG_MODEL": ""}


def _codex_turns(client: Any, turns: int, stream: bool) -> list[dict[str, Any]]:
    """Codex's shape: `store` false, encrypted reasoning asked for and every output item
    replayed as it came."""
    items: list[dict[str, Any]] = []
    for turn in range(turns):
        items.append(
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": QUESTIONS[turn % 4]}],
            }
        )
        asked: dict[str, Any] = {
            "model": "gpt-5-codex",
            "instructions": "You are a coding agent.",
            "input": items,
            "store": False,
            "include": ["reasoning.encrypted_content"],
            "reasoning": {"effort": "low"},
        }
        if stream:
            with client.responses.stream(**asked) as events:
                reply = events.get_final_response()
        else:
            reply = client.responses.create(**asked)
        output = [o.model_dump(exclude_none=True) for o in reply.output]
        assert output[0]["type"] == "reasoning" and output[0]["encrypted_content"]
        items.extend(output)
    return items


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("session", ["codex-relay", None])
def test_codex_style_turns_pass_through_to_a_responses_upstream(
    koog_env: dict[str, str],
    server: FakeOpenAIServer,
    isolated: Path,
    run_koog: Run,
    stream: bool,
    session: str | None,
) -> None:
    """With a session and without one (a plain Responses client, `store` false): the
    encrypted reasoning is kept and the prefix too."""
    import openai

    env = _responses_config(isolated / "relay.toml", server)
    for fact in FACTS:
        assert run_koog("memory", "add", fact, env=env).returncode == 0
    direct = openai.OpenAI(base_url=server.base_url, api_key="upstream-key", max_retries=0)
    _codex_turns(direct, 8, stream)
    direct_reads = sum(e["cache_read"] for e in server.native_log)
    server.reset()
    started = KoogServe({**koog_env, **env}).start()
    try:
        relayed = openai.OpenAI(
            base_url=started.url,
            api_key="client-key",
            max_retries=0,
            default_headers={"X-Koog-Session": session} if session else None,
        )
        _codex_turns(relayed, 8, stream)
    finally:
        assert started.stop() == 0
    log = server.native_log
    assert len(log) == 8 and not [e for e in log if "rejected" in e]
    sent = [r for r in server.requests if r.get("_path", "").endswith("/v1/responses")]
    assert all(r["model"] == "gpt-up" and r["store"] is False for r in sent)
    assert all(r["_headers"]["authorization"] == "Bearer upstream-key" for r in sent)
    for turn, body in enumerate(sent):
        assert FACTS[turn % 4] in json.dumps(body["input"][-1]["content"])
    reads = sum(e["cache_read"] for e in log)
    assert reads >= 0.9 * direct_reads, (reads, direct_reads)
    if session is None:
        return
    stored = json.loads(run_koog("history", "show", "-s", session, "--json", env=env).stdout)
    assert len([m for m in stored if m["role"] == "assistant"]) == 8


def test_a_chat_completions_client_is_translated_to_a_messages_upstream(
    koog_env: dict[str, str], server: FakeOpenAIServer, isolated: Path
) -> None:
    env = _config(isolated / "relay.toml", server)
    started = KoogServe({**koog_env, **env}).start()
    tool = {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "Look a city up.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
    try:
        client = started.client(default_headers={"X-Koog-Session": "translated"})
        server.enqueue(
            {"tool_calls": [{"id": "toolu_9", "name": "lookup", "arguments": '{"city": "Oslo"}'}]}
        )
        asked = client.chat.completions.create(
            model="gpt-4o-mini",
            max_tokens=77,
            tools=[tool],  # type: ignore[list-item]
            messages=[{"role": "user", "content": "where?"}],
        )
        [call] = asked.choices[0].message.tool_calls or []
        assert call.function.name == "lookup" and json.loads(call.function.arguments) == {
            "city": "Oslo"
        }
        streamed = client.chat.completions.create(
            model="gpt-4o-mini",
            stream=True,
            messages=[
                {"role": "user", "content": "where?"},
                {"role": "assistant", "tool_calls": [call.model_dump()]},  # type: ignore[list-item]
                {"role": "tool", "tool_call_id": call.id, "content": "Oslo is cold"},
            ],
        )
        text = "".join(c.choices[0].delta.content or "" for c in streamed if c.choices)
    finally:
        assert started.stop() == 0
    assert text == "echo: "  # the test server echoes user text; this message has none
    first, second = [r for r in server.requests if r.get("_path", "").endswith("/v1/messages")]
    assert first["max_tokens"] == 77 and first["tools"][0]["input_schema"]["properties"]
    assert [b["type"] for b in second["messages"][1]["content"]] == ["tool_use"]
    assert second["messages"][2]["content"][0]["type"] == "tool_result"
