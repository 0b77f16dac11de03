"""The Responses API of `koog serve`, driven by the official openai SDK (`responses.create`,
`responses.stream`, retrieve, input_items, delete) against the test server upstream."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import openai
import pytest

from tests.fakes.openai_server import FakeOpenAIServer
from tests.support.serving import KoogServe, http

pytestmark = pytest.mark.e2e
Run = Callable[..., Any]
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}


def _history(run_koog: Run, session: str) -> list[dict[str, Any]]:
    shown = run_koog("history", "show", "-s", session, "--json")
    assert shown.returncode == 0, shown.stderr
    return [m for m in json.loads(shown.stdout) if m["role"] != "system"]


def test_a_streamed_response_chains_by_previous_response_id_the_instant_it_completes(
    backend: str, serve: KoogServe, server: FakeOpenAIServer, run_koog: Run
) -> None:
    client = serve.client(default_headers={"X-Koog-Session": "resp"})
    with client.responses.stream(
        model="gpt-5-codex", input="hello there", instructions="Be brief."
    ) as stream:
        deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
        first = stream.get_final_response()
    assert "".join(deltas) == first.output_text == "echo: hello there"
    assert first.status == "completed"
    # At once, no pause: the stored response is found.
    second = client.responses.create(
        model="gpt-5-codex", input="and again", previous_response_id=first.id
    )
    assert second.output_text == "echo: and again"
    upstream = server.chat_requests[-1]["messages"]
    assert [m["role"] for m in upstream] == ["system", "user", "assistant", "user"]
    assert upstream[0]["content"] != "Be brief."  # instructions of the first are not carried
    assert server.chat_requests[-1]["model"] == "gpt-4o-mini"  # the configured model
    third = client.responses.create(  # chained from a response that was not streamed
        model="gpt-5-codex", input="a third", previous_response_id=second.id
    )
    assert third.output_text == "echo: a third"
    assert len(server.chat_requests[-1]["messages"]) == 6
    again = client.responses.retrieve(first.id)
    assert again.output_text == "echo: hello there"
    items = client.responses.input_items.list(second.id, order="asc")
    assert [i.type for i in items.data] == ["message"]
    assert [(m["role"], m["content"]) for m in _history(run_koog, "resp")] == [
        ("user", "hello there"),
        ("assistant", "echo: hello there"),
        ("user", "and again"),
        ("assistant", "echo: and again"),
        ("user", "a third"),
        ("assistant", "echo: a third"),
    ]
    deleted = client.responses.delete(first.id)
    assert deleted is None or getattr(deleted, "deleted", True)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(first.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve("resp_nope")


def test_a_function_call_round_trip_with_full_replay_is_one_session(
    backend: str, serve: KoogServe, server: FakeOpenAIServer, run_koog: Run
) -> None:
    """Like Codex: `store: false`, the whole input resent, function calls and outputs as
    items; the call is the client's, never koog's."""
    client = serve.client(default_headers={"X-Koog-Session": "cx"})
    server.enqueue(
        {"tool_calls": [{"id": "call_1", "name": "get_weather", "arguments": '{"city":"Paris"}'}]}
    )
    convo: list[Any] = [{"role": "user", "content": "weather in Paris?"}]
    with client.responses.stream(
        model="gpt-5-codex", input=convo, tools=[WEATHER], store=False
    ) as stream:
        events = [e.type for e in stream]
        first = stream.get_final_response()
    assert "response.function_call_arguments.delta" in events
    [call] = [o for o in first.output if o.type == "function_call"]
    assert (call.name, call.arguments, call.call_id) == (
        "get_weather",
        '{"city":"Paris"}',
        "call_1",
    )
    convo += [
        {
            "type": "function_call",
            "call_id": call.call_id,
            "name": call.name,
            "arguments": call.arguments,
            "id": call.id,
        },
        {"type": "function_call_output", "call_id": call.call_id, "output": "sunny"},
    ]
    done = client.responses.create(model="gpt-5-codex", input=convo, tools=[WEATHER], store=False)
    assert done.output_text == "echo: weather in Paris?"
    convo += [
        {"role": "assistant", "content": done.output_text},
        {"role": "user", "content": "thanks"},
    ]
    client.responses.create(model="gpt-5-codex", input=convo, tools=[WEATHER], store=False)
    sent = server.chat_requests[1]["messages"]
    assert (sent[-1]["role"], sent[-1]["tool_call_id"], sent[-1]["content"]) == (
        "tool",
        "call_1",
        "sunny",
    )
    assert sent[-2]["tool_calls"][0]["function"]["name"] == "get_weather"
    assert server.chat_requests[0]["tools"][0]["function"]["name"] == "get_weather"
    listed = json.loads(run_koog("history", "list", "--json").stdout)
    assert [s["session"] for s in listed] == ["cx"]
    roles = [m["role"] for m in _history(run_koog, "cx")]
    assert roles == ["user", "assistant", "tool", "assistant", "user", "assistant"]


def test_bad_bodies_and_built_in_tools_are_400s_naming_the_field(serve: KoogServe) -> None:
    base = serve.url
    for body, param in (
        ({"model": "m"}, "input"),
        ({"model": "m", "input": [{"type": "computer_call"}]}, "input[0].type"),
        ({"model": "m", "input": "x", "store": "yes"}, "store"),
        ({"model": "m", "input": "x", "max_output_tokens": -1}, "max_output_tokens"),
    ):
        status, answer = http("POST", base + "/responses", body)
        assert status == 400, (body, answer)
        assert answer["error"]["param"] == param, answer


def test_another_tokens_response_is_404(koog_env: dict[str, str], tmp_path: Path) -> None:
    config = tmp_path / "tokens.toml"
    config.write_text(
        '[[serve.tokens]]\ntoken = "token-for-alice-0123456789"\nsessions = ["alice-"]\nnamespaces = ["default"]\n'
        '[[serve.tokens]]\ntoken = "token-for-bob-0123456789ab"\nsessions = ["bob-"]\nnamespaces = ["default"]\n'
    )
    started = KoogServe({**koog_env, "KOOG_CONFIG": str(config)}).start()
    try:
        alice = openai.OpenAI(
            base_url=started.url, api_key="token-for-alice-0123456789", max_retries=0
        )
        bob = openai.OpenAI(
            base_url=started.url, api_key="token-for-bob-0123456789ab", max_retries=0
        )
        mine = alice.responses.create(
            model="m", input="secret", extra_headers={"X-Koog-Session": "alice-1"}
        )
        assert alice.responses.retrieve(mine.id).output_text == "echo: secret"
        with pytest.raises(openai.NotFoundError):
            bob.responses.retrieve(mine.id)
        with pytest.raises(openai.NotFoundError):
            bob.responses.create(model="m", input="more", previous_response_id=mine.id)
    finally:
        assert started.stop() == 0


def test_model_names_and_agent_sessions_follow_the_serve_config(
    koog_env: dict[str, str], server: FakeOpenAIServer, tmp_path: Path, run_koog: Run
) -> None:
    config = tmp_path / "clients.toml"
    config.write_text(
        '[serve]\nmodels = { "gpt-5-codex" = "upstream-coder" }\n'
        '[serve.clients.codex]\nprefix = "cx-"\nnamespace = "agents"\n'
        '[long_term_memory.retrieval]\nenabled = true\nmode = "fulltext"\n'
    )
    env = {**koog_env, "KOOG_CONFIG": str(config)}
    added = run_koog("memory", "add", "the harbour opens at dawn", "-n", "agents", env=env)
    assert added.returncode == 0, added.stderr
    started = KoogServe(env).start()
    try:
        client = started.client(default_headers={"session-id": "0199-abc"})
        raw = client.responses.with_raw_response.create(
            model="gpt-5-codex",
            input="when does the harbour open?",
            store=False,
            tools=[WEATHER],
        )
        assert raw.headers["x-koog-session"] == "cx-0199-abc"
        assert raw.headers["x-koog-memory-used"]
        assert server.chat_requests[-1]["model"] == "upstream-coder"
        assert "the harbour opens at dawn" in json.dumps(server.chat_requests[-1]["messages"])
        client.responses.create(model="other", input="hi", store=False, tools=[WEATHER])
        assert server.chat_requests[-1]["model"] == "gpt-4o-mini"  # not listed: llm.model
    finally:
        assert started.stop() == 0
    listed = [
        s["session"] for s in json.loads(run_koog("history", "list", "--json", env=env).stdout)
    ]
    # One agent session is one conversation: the second began anew, as after the agent's
    # own compaction, in the same session (the first kept in a restore point).
    assert listed == ["cx-0199-abc"]
    said = run_koog("history", "show", "-s", "cx-0199-abc", "--json", env=env).stdout
    assert "hi" in said and "when does the harbour open?" not in said


def test_a_client_that_sets_nothing_takes_a_second_turn_by_previous_response_id(
    serve: KoogServe, server: FakeOpenAIServer, run_koog: Run
) -> None:
    """`store` defaults to true, so the first reply is stored in a session of its own and
    its id chains the next turn; `store: false` without a session stays stateless."""
    client = serve.client()
    first = client.responses.create(model="gpt-4o-mini", input="My name is Ada.")
    second = client.responses.create(
        model="gpt-4o-mini", input="What is my name?", previous_response_id=first.id
    )
    assert second.output_text == "echo: What is my name?"
    sent = [m for m in server.requests[-1]["messages"] if m["role"] != "system"]
    assert [m["content"] for m in sent] == [
        "My name is Ada.",
        "echo: My name is Ada.",
        "What is my name?",
    ]
    listed = json.loads(run_koog("history", "list", "--json").stdout)
    [own] = [s["session"] for s in listed]
    assert own.startswith("resp-")
    assert [m["content"] for m in _history(run_koog, own)] == [
        "My name is Ada.",
        "echo: My name is Ada.",
        "What is my name?",
        "echo: What is my name?",
    ]
    client.responses.create(model="gpt-4o-mini", input="Forget this.", store=False)
    assert len(json.loads(run_koog("history", "list", "--json").stdout)) == 1


def test_a_tool_result_chained_by_previous_response_id_is_stored_with_its_tools_name(
    serve: KoogServe, server: FakeOpenAIServer, run_koog: Run
) -> None:
    """The call came in the stored response, the result in the next request's input: the
    stored result names its tool (issue 46, acceptance 4)."""
    client = serve.client(default_headers={"X-Koog-Session": "named"})
    server.enqueue(
        {"tool_calls": [{"id": "call_n", "name": "get_weather", "arguments": '{"city": "Oslo"}'}]}
    )
    first = client.responses.create(model="m", input="weather in Oslo?", tools=[WEATHER])  # type: ignore[list-item]
    [call] = [o for o in first.output if o.type == "function_call"]
    client.responses.create(
        model="m",
        previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "cold"}],
        tools=[WEATHER],  # type: ignore[list-item]
    )
    stored = json.loads(run_koog("history", "show", "-s", "named", "--json").stdout)
    [result] = [m for m in stored if m["role"] == "tool"]
    assert result["name"] == "get_weather" and result["content"] == "cold"


APPLY_PATCH = {"type": "custom", "name": "apply_patch", "description": "Edit files.",
               "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}}  # fmt: skip
PATCH = "*** Begin Patch\n*** Add File: a.txt\n+hello\n*** End Patch"


def test_codexs_hosted_freeform_and_shell_tools_are_answered(
    serve: KoogServe, server: FakeOpenAIServer, run_koog: Run, isolated: Path
) -> None:
    """Issue 52: Codex offers web_search with every request, and a 400 for it refused the
    agent's every turn. A hosted tool the upstream cannot run is left out (the access log
    says which); Codex's freeform apply_patch and local_shell go upstream as functions,
    and the calls come back as its own custom_tool_call and local_shell_call items, which
    it sends back with their outputs."""
    base = serve.url
    tools = [{"type": "web_search"}, APPLY_PATCH, {"type": "local_shell"}, WEATHER]
    server.enqueue({"tool_calls": [
        {"id": "c1", "name": "apply_patch", "arguments": json.dumps({"input": PATCH})},
        {"id": "c2", "name": "local_shell", "arguments": json.dumps({"command": ["ls"]})},
    ]})  # fmt: skip
    said = [{"type": "message", "role": "user", "content": "add a.txt"}]
    headers = {"session-id": "hosted"}
    status, answer = http(
        "POST", base + "/responses", {"model": "m", "input": said, "tools": tools}, headers
    )
    assert status == 200, answer
    offered = [t["function"]["name"] for t in server.chat_requests[-1]["tools"]]
    assert offered == ["apply_patch", "local_shell", "get_weather"]
    patch, shell = answer["output"]
    assert (patch["type"], patch["name"], patch["input"]) == (
        "custom_tool_call",
        "apply_patch",
        PATCH,
    )
    assert (shell["type"], shell["action"]) == (
        "local_shell_call",
        {"type": "exec", "command": ["ls"]},
    )
    said += [
        patch,
        shell,
        {"type": "custom_tool_call_output", "call_id": patch["call_id"], "output": "done"},
        {"type": "local_shell_call_output", "call_id": shell["call_id"], "output": "a.txt"},
    ]
    server.enqueue({"content": "Added."})
    status, again = http(
        "POST", base + "/responses", {"model": "m", "input": said, "tools": tools}, headers
    )
    assert status == 200 and again["output"][-1]["content"][0]["text"] == "Added.", again
    sent = server.chat_requests[-1]["messages"]
    assert [m["role"] for m in sent[1:]] == ["user", "assistant", "tool", "tool"]
    assert json.loads(sent[2]["tool_calls"][0]["function"]["arguments"]) == {"input": PATCH}
    assert "left-out=web_search" in (isolated / "serve.log").read_text()
    stored = _history(run_koog, "codex-hosted")
    assert [m["role"] for m in stored] == ["user", "assistant", "tool", "tool", "assistant"]
