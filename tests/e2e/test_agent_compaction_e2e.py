"""Coding agents compact by themselves (issue 44): koog leaves it to them. A request too
long for the model goes back to the agent in its own words, and koog neither compresses
nor learns a limit behind its back; a client that is no agent keeps koog's recovery."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic
import pytest

from tests.fakes.openai_server import FakeOpenAIServer
from tests.support.serving import KoogServe

pytestmark = pytest.mark.e2e

LONG = "the harbour ferry leaves at nine and the tide tables are posted on the quay " * 40


def _claude(serve: KoogServe, **headers: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        base_url=serve.url.removesuffix("/v1"), api_key="k", max_retries=0, default_headers=headers
    )


def test_an_agents_overflow_goes_back_in_its_own_words(
    koog_env: dict[str, str], server: FakeOpenAIServer, isolated: Path
) -> None:
    server.context_limit = 600
    started = KoogServe(koog_env).start()
    try:
        agent = _claude(started, **{"X-Claude-Code-Session-Id": "5f0c7a2e"})
        turns = [{"role": "user", "content": LONG}]
        with pytest.raises(anthropic.BadRequestError) as refused:
            agent.messages.create(model="claude-x", max_tokens=64, messages=turns)  # type: ignore[arg-type]
        body = refused.value.body
        assert isinstance(body, dict) and body["error"]["type"] == "invalid_request_error"
        assert body["error"]["message"].startswith("prompt is too long: ")
        assert " maximum" in body["error"]["message"]
        # koog neither summarised nor retried: one request reached the upstream.
        assert len(server.chat_requests) == 1
        assert (
            not (isolated / "data" / "learned.json").exists()
            or "600" not in (isolated / "data" / "learned.json").read_text()
        )
        # An OpenAI client of the same agent session gets OpenAI's code.
        plain = started.client(default_headers={"X-Claude-Code-Session-Id": "5f0c7a2e"})
        import openai

        with pytest.raises(openai.BadRequestError) as again:
            plain.chat.completions.create(model="m", messages=[{"role": "user", "content": LONG}])
        assert json.dumps(again.value.body).count("context_length_exceeded") >= 1
    finally:
        assert started.stop() == 0


TOOLS = [{"name": "Bash", "description": "Run a command.", "input_schema": {"type": "object"}}]
CRITICAL = "CRITICAL: Respond with TEXT ONLY. Do NOT call any tools."
CONTINUED = (
    "This session is being continued from a previous conversation that ran out of context. "
    "The conversation is summarized below: the user asked two questions about the harbour."
)


def test_claude_codes_compaction_continues_its_one_session(
    koog_env: dict[str, str], server: FakeOpenAIServer, run_koog: Any
) -> None:
    """The compaction request is no turn; the conversation after it is stored as a
    compaction of the session, never as a fork; each prompt is found once; `rollback
    --latest` brings the turns it replaced back."""
    started = KoogServe(koog_env).start()
    agent = _claude(started, **{"X-Claude-Code-Session-Id": "c0ffee"})
    convo: list[dict[str, Any]] = []

    def ask(text: str) -> str:
        convo.append({"role": "user", "content": [{"type": "text", "text": text}]})
        reply = agent.messages.create(model="claude-x", max_tokens=64, tools=TOOLS, messages=convo)  # type: ignore[arg-type]
        said = "".join(b.text for b in reply.content if b.type == "text")
        convo.append({"role": "assistant", "content": [{"type": "text", "text": said}]})
        return said

    try:
        ask("when does the ferry leave")
        ask("who keeps the lighthouse")
        # The compaction request: the last user message gains the instruction.
        asked = [*convo[:-1], {"role": "user", "content": [
            {"type": "text", "text": "who keeps the lighthouse"},
            {"type": "text", "text": CRITICAL}]}]  # fmt: skip
        agent.messages.create(model="claude-x", max_tokens=64, tools=TOOLS, messages=asked)  # type: ignore[arg-type]
        # The continuation: the summary, then the new prompt.
        convo[:] = [{"role": "user", "content": [{"type": "text", "text": CONTINUED}]}]
        ask("where are the tide tables posted")
    finally:
        assert started.stop() == 0
    listed = [s["session"] for s in json.loads(run_koog("history", "list", "--json").stdout)]
    assert listed == ["claude-c0ffee"]
    shown = json.loads(run_koog("history", "show", "-s", "claude-c0ffee", "--json").stdout)
    texts = [m["content"] for m in shown if m["role"] != "system"]
    assert texts[0] == CONTINUED and CRITICAL not in json.dumps(shown)
    assert "where are the tide tables posted" in texts and "when does the ferry leave" not in texts
    for prompt in ("ferry leave", "lighthouse", "tide tables"):
        found = json.loads(run_koog("history", "search", prompt, "--json").stdout)
        assert len([h for h in found if h["role"] == "user"]) == 1, (prompt, found)
    # One rollback undoes the compaction and the turn that came with it.
    assert run_koog("rollback", "-s", "claude-c0ffee", "--latest", "--yes").returncode == 0
    back = run_koog("history", "show", "-s", "claude-c0ffee", "--json").stdout
    assert "when does the ferry leave" in back and "who keeps the lighthouse" in back
    assert CONTINUED not in back


WEATHER = {"type": "function", "name": "weather", "parameters": {"type": "object"}}


def test_codexs_remote_compaction_is_answered_and_continues_the_session(
    koog_env: dict[str, str], server: FakeOpenAIServer, run_koog: Any
) -> None:
    """Codex on its built-in provider: `compaction_trigger` gets exactly one `compaction`
    item holding koog's summary; replayed, it reaches the upstream as that summary, and the
    session continues as a compaction of itself. The WebSocket probe is a 426."""
    import httpx2 as httpx

    started = KoogServe(koog_env).start()
    headers = {"session-id": "0199-remote", "Authorization": "Bearer k"}
    items: list[dict[str, Any]] = []

    def post(path: str, body: dict[str, Any]) -> httpx.Response:
        return httpx.post(started.url + path, json=body, headers=headers, timeout=30)

    def ask(text: str) -> None:
        items.append(
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
        )
        done = post(
            "/responses",
            {"model": "gpt-5-codex", "input": items, "store": False, "tools": [WEATHER]},
        )
        assert done.status_code == 200, done.text
        items.extend(done.json()["output"])

    try:
        probe = httpx.get(
            started.url + "/responses",
            headers={"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
                     "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="},
        )  # fmt: skip
        assert probe.status_code == 426
        ask("when does the ferry leave")
        ask("who keeps the lighthouse")
        server.enqueue({"content": "The user asked about the ferry and the keeper."})
        asked = post(
            "/responses",
            {"model": "gpt-5-codex", "input": [*items, {"type": "compaction_trigger"}],
             "store": False, "stream": True, "tools": [WEATHER]},
        )  # fmt: skip
        assert asked.status_code == 200, asked.text
        finals = [
            json.loads(line[6:])
            for line in asked.text.splitlines()
            if line.startswith("data: ") and '"response.completed"' in line
        ]
        [output] = [f["response"]["output"] for f in finals]
        assert [o["type"] for o in output] == ["compaction"]
        compaction = output[0]
        assert compaction["encrypted_content"].startswith("koog-compaction.v1:")
        items[:] = [compaction]
        ask("where are the tide tables posted")
        sent = json.dumps(server.chat_requests[-1]["messages"])
        assert "The user asked about the ferry and the keeper." in sent
        assert "when does the ferry leave" not in sent
        compact = post("/responses/compact", {"model": "m", "input": items})
        assert compact.status_code == 200, compact.text
        assert [o["type"] for o in compact.json()["output"]] == ["compaction"], compact.text
    finally:
        assert started.stop() == 0
    listed = [s["session"] for s in json.loads(run_koog("history", "list", "--json").stdout)]
    assert listed == ["codex-0199-remote"]
    assert run_koog("rollback", "-s", "codex-0199-remote", "--latest", "--yes").returncode == 0
    back = run_koog("history", "show", "-s", "codex-0199-remote", "--json").stdout
    assert "who keeps the lighthouse" in back and "koog-compaction" not in back


def test_a_tool_result_that_only_a_compaction_request_carries_is_stored(
    koog_env: dict[str, str], server: FakeOpenAIServer, run_koog: Any
) -> None:
    """Codex compacting between a function_call_output and its follow-up: the output is in
    the compaction request alone; koog stores it in the session, and the compaction request
    itself is no turn."""
    started = KoogServe(koog_env).start()
    try:
        client = started.client(default_headers={"session-id": "0199-tool"})
        items: list[Any] = [{"type": "message", "role": "user", "content": "weather in Oslo?"}]
        server.enqueue({"tool_calls": [{"id": "call_w", "name": "weather", "arguments": "{}"}]})
        first = client.responses.create(model="m", input=items, store=False, tools=[WEATHER])  # type: ignore[list-item]
        items += [o.model_dump(exclude_none=True) for o in first.output]
        items.append({"type": "function_call_output", "call_id": "call_w", "output": "cold, 2C"})
        prompt = "You are performing a CONTEXT CHECKPOINT COMPACTION. Summarise."
        client.responses.create(
            model="m",
            input=[*items, {"type": "message", "role": "user", "content": prompt}],
            store=False,
            tools=[],
        )
    finally:
        assert started.stop() == 0
    shown = json.loads(run_koog("history", "show", "-s", "codex-0199-tool", "--json").stdout)
    assert [m["role"] for m in shown if m["role"] != "system"] == ["user", "assistant", "tool"]
    assert shown[-1]["content"] == "cold, 2C" and "CONTEXT CHECKPOINT" not in json.dumps(shown)
    found = json.loads(run_koog("history", "search", "cold", "--json").stdout)
    assert len(found) == 1
