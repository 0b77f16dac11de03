"""`koog serve` driven by the official `openai` SDK, its upstream the local test server
(SPEC §6): replies, sessions, merging and forks, streaming, errors, headers, tokens."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import openai
import pytest

from tests.conftest import API_KEY
from tests.fakes.openai_server import ID_PROFILES, PROFILES, FakeOpenAIServer
from tests.fakes.summaries import short_summaries
from tests.support.serving import KoogServe, http

pytestmark = pytest.mark.e2e

Run = Callable[..., subprocess.CompletedProcess[str]]


def _history(run_koog: Run, name: str) -> list[dict[str, Any]]:
    done = run_koog("history", "show", "-s", name, "--json")
    assert done.returncode == 0, done.stderr
    return [m for m in json.loads(done.stdout) if m["role"] != "system"]


def _said(history: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(m["role"], m["content"]) for m in history]


def test_sdk_sync_async_and_streaming_turns_land_in_one_session_the_cli_continues(
    serve: KoogServe, server: FakeOpenAIServer, run_koog: Run
) -> None:
    client = serve.client(default_headers={"X-Koog-Session": "work"})
    convo: list[dict[str, Any]] = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "one"},
    ]
    first = client.chat.completions.create(model="gpt-4o-mini", messages=convo)  # type: ignore[arg-type]
    assert first.choices[0].message.content == "echo: one"
    assert first.choices[0].finish_reason == "stop"
    assert first.usage is not None and first.usage.total_tokens > 0
    convo += [{"role": "assistant", "content": "echo: one"}, {"role": "user", "content": "two"}]
    parts = []
    with client.chat.completions.create(
        model="gpt-4o-mini",
        messages=convo,  # type: ignore[arg-type]
        stream=True,
        stream_options={"include_usage": True},
    ) as stream:
        chunks = list(stream)
    for c in chunks:
        for choice in c.choices:
            parts.append(choice.delta.content or "")
    assert "".join(parts) == "echo: two"
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-2].choices[0].finish_reason == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage is not None

    async def third() -> str:
        aclient = serve.async_client(default_headers={"X-Koog-Session": "work"})
        convo.extend(
            [{"role": "assistant", "content": "echo: two"}, {"role": "user", "content": "three"}]
        )
        done = await aclient.chat.completions.create(model="gpt-4o-mini", messages=convo)  # type: ignore[arg-type]
        stream = await aclient.chat.completions.create(
            model="gpt-4o-mini",
            messages=[
                *convo,
                {"role": "assistant", "content": "echo: three"},
                {"role": "user", "content": "four"},
            ],  # type: ignore[list-item]
            stream=True,
        )
        text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
        await aclient.close()
        return (done.choices[0].message.content or "") + "|" + text

    assert asyncio.run(third()) == "echo: three|echo: four"
    words = ["one", "two", "three", "four"]
    expected = [p for w in words for p in (("user", w), ("assistant", f"echo: {w}"))]
    assert _said(_history(run_koog, "work")) == expected
    # The client's system message was the prompt: sent upstream, never stored.
    assert server.chat_requests[0]["messages"][0] == {"role": "system", "content": "Be brief."}
    server.reset()
    done = run_koog("chat", "-s", "work", "five")
    assert done.returncode == 0 and done.stdout.strip() == "echo: five", done.stderr
    sent = [(m["role"], m["content"]) for m in server.chat_requests[0]["messages"][1:]]
    assert sent == [*expected, ("user", "five")]


def test_resending_the_whole_array_stores_each_turn_once_and_an_edit_forks(
    serve: KoogServe, run_koog: Run, data_dir: Path, backend: str
) -> None:
    client = serve.client()
    convo: list[dict[str, Any]] = []
    for n in range(50):
        convo.append({"role": "user", "content": f"q{n}"})
        raw = client.chat.completions.with_raw_response.create(
            model="gpt-4o-mini",
            messages=convo,  # type: ignore[arg-type]
            extra_headers={"X-Koog-Session": "long"},
        )
        assert raw.headers["x-koog-session"] == "long"
        convo.append({"role": "assistant", "content": raw.parse().choices[0].message.content})
    history = _history(run_koog, "long")
    assert len(history) == 100 and _said(history) == [(m["role"], m["content"]) for m in convo]
    before = _snapshot(run_koog, data_dir, backend, "long")
    edited = [*convo[:4], {"role": "user", "content": "q2, edited"}]
    raw = client.chat.completions.with_raw_response.create(
        model="gpt-4o-mini",
        messages=edited,
        extra_headers={"X-Koog-Session": "long"},  # type: ignore[arg-type]
    )
    assert raw.headers["x-koog-session"] == "long~2"
    assert raw.headers["x-koog-forked-from"] == "long"
    fork = _said(_history(run_koog, "long~2"))
    assert fork == [*[(m["role"], m["content"]) for m in edited], ("assistant", "echo: q2, edited")]
    assert _snapshot(run_koog, data_dir, backend, "long") == before
    # Regenerating the last reply (the same array without it) forks again: long~3.
    raw = client.chat.completions.with_raw_response.create(
        model="gpt-4o-mini",
        messages=convo[:-1],
        extra_headers={"X-Koog-Session": "long"},  # type: ignore[arg-type]
    )
    assert raw.headers["x-koog-session"] == "long~3"
    assert len(_history(run_koog, "long~3")) == 100
    assert _snapshot(run_koog, data_dir, backend, "long") == before


def _snapshot(run_koog: Run, data_dir: Path, backend: str, name: str) -> object:
    if backend == "files":
        sessions = data_dir / "sessions"
        return [(sessions / f"{name}{ext}").read_bytes() for ext in (".json", ".log")]
    done = run_koog("history", "show", "-s", name, "--json")
    return done.stdout


def test_client_tools_go_back_to_the_client_with_ids_unique_in_the_session(
    serve: KoogServe, server: FakeOpenAIServer, run_koog: Run
) -> None:
    """Under every id habit of real servers (one server, a session per habit): the client
    receives ids it can answer, and its results are stored after the calls."""
    for profile in ID_PROFILES:
        server.use_profile(profile)
        _three_tool_turns(serve, server, run_koog, f"tools-{profile}")


def _three_tool_turns(serve: KoogServe, server: FakeOpenAIServer, run_koog: Run, name: str) -> None:
    tools = [
        {
            "type": "function",
            "function": {
                "name": "create_item",
                "parameters": {"type": "object", "properties": {"name": {"type": "string"}}},
            },
        }
    ]
    client = serve.client(default_headers={"X-Koog-Session": name})
    convo: list[dict[str, Any]] = []
    seen: list[str] = []
    for turn in range(3):
        server.enqueue(
            {
                "tool_calls": [
                    {
                        "id": "call_0",
                        "name": "create_item",
                        "arguments": json.dumps({"name": f"a{turn}"}),
                    },
                    {
                        "id": "call_1",
                        "name": "create_item",
                        "arguments": json.dumps({"name": f"b{turn}"}),
                    },
                ],
                "content": "",
            },
            {"content": f"made two in turn {turn}"},
        )
        convo.append({"role": "user", "content": f"make two #{turn}"})
        asked = client.chat.completions.create(
            model="gpt-4o-mini", messages=convo, tools=tools, stream=turn == 1
        )  # type: ignore[arg-type,call-overload]
        if turn == 1:
            calls: dict[int, dict[str, str]] = {}
            finish = None
            for c in asked:
                for choice in c.choices:
                    finish = choice.finish_reason or finish
                    for frag in choice.delta.tool_calls or []:
                        slot = calls.setdefault(frag.index, {"id": "", "name": "", "arguments": ""})
                        slot["id"] += frag.id or ""
                        slot["name"] += (frag.function.name or "") if frag.function else ""
                        slot["arguments"] += (
                            (frag.function.arguments or "") if frag.function else ""
                        )
            wire = [
                {
                    "id": s["id"],
                    "type": "function",
                    "function": {"name": s["name"], "arguments": s["arguments"]},
                }
                for _, s in sorted(calls.items())
            ]
        else:
            assert asked.choices[0].finish_reason == "tool_calls"
            finish = "tool_calls"
            wire = [c.model_dump() for c in asked.choices[0].message.tool_calls or []]
        assert finish == "tool_calls" and len(wire) == 2
        seen += [c["id"] for c in wire]
        convo.append({"role": "assistant", "content": None, "tool_calls": wire})
        convo += [{"role": "tool", "tool_call_id": c["id"], "content": "ok"} for c in wire]
        done = client.chat.completions.create(model="gpt-4o-mini", messages=convo, tools=tools)  # type: ignore[arg-type]
        assert done.choices[0].message.content == f"made two in turn {turn}"
        convo.append({"role": "assistant", "content": done.choices[0].message.content})
    assert len(set(seen)) == 6, name
    history = _history(run_koog, name)
    assert [m["role"] for m in history] == ["user", "assistant", "tool", "tool", "assistant"] * 3
    assert [c["id"] for m in history for c in m.get("tool_calls", [])] == seen


def test_streams_and_replies_under_every_quirk_profile(
    serve: KoogServe, server: FakeOpenAIServer, run_koog: Run
) -> None:
    """Each real endpoint's habits upstream (ENDPOINT_QUIRKS.md: Azure's filter chunks,
    Bedrock's usage chunks, reasoning deltas, ...): the client still gets clean OpenAI
    chunks and whole replies, and the session holds exactly the turns."""
    for profile in PROFILES:
        server.use_profile(profile)
        client = serve.client(default_headers={"X-Koog-Session": f"q-{profile}"})
        convo: list[dict[str, Any]] = [{"role": "user", "content": f"hello {profile}"}]
        with client.chat.completions.create(
            model="gpt-4o-mini",
            messages=convo,  # type: ignore[arg-type]
            stream=True,
            stream_options={"include_usage": True},
        ) as stream:
            chunks = list(stream)
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert text == f"echo: hello {profile}", profile
        if "no_usage" in PROFILES[profile]:  # none sent upstream: none made up
            assert all(c.usage is None for c in chunks), profile
        else:
            assert chunks[-1].usage is not None, profile
        convo += [{"role": "assistant", "content": text}, {"role": "user", "content": "again"}]
        whole = client.chat.completions.create(model="gpt-4o-mini", messages=convo)  # type: ignore[arg-type]
        assert whole.choices[0].message.content == "echo: again", profile
        said = [(m["role"], m["content"]) for m in _history(run_koog, f"q-{profile}")]
        assert said == [(m["role"], m["content"]) for m in convo] + [("assistant", "echo: again")]


def test_errors_keep_the_upstream_status_in_openais_shape(
    serve_files: KoogServe, server: FakeOpenAIServer, run_koog: Run
) -> None:
    client = serve_files.client(default_headers={"X-Koog-Session": "err"})
    server.enqueue({"status": 429, "message": "slow down"})
    with pytest.raises(openai.RateLimitError) as caught:
        client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}]
        )
    assert caught.value.status_code == 429 and "slow down" in caught.value.message
    server.enqueue({"status": 429, "message": "slow down", "retry_after": 7})
    with pytest.raises(openai.RateLimitError) as streamed:
        client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}], stream=True
        )
    # The upstream's Retry-After reaches the client, so it backs off as long as asked.
    assert streamed.value.response.headers.get("retry-after") == "7"
    assert "Retry-After" not in caught.value.response.headers  # none was sent: none made up
    with pytest.raises(openai.BadRequestError) as bad:
        client.chat.completions.create(model="gpt-4o-mini", messages=[])
    assert bad.value.status_code == 400 and bad.value.body["param"] == "messages"  # type: ignore[index]
    status, body = http("POST", f"{serve_files.url}/chat/completions", content=b"{not json")
    assert status == 400 and body["error"]["type"] == "invalid_request_error"
    status, body = http(
        "POST",
        f"{serve_files.url}/chat/completions",
        {"messages": [{"role": "user", "content": "x"}]},
        {"X-Koog-Session": "../etc"},
    )
    assert status == 400 and "invalid session name" in body["error"]["message"]
    # Nothing of the failed turns was stored as a turn.
    done = run_koog("history", "show", "-s", "err", "--json")
    assert done.returncode == 2 or _history(run_koog, "err") == []
    status, body = http("GET", f"{serve_files.url.removesuffix('/v1')}/koog/v1/sessions/nosuch")
    assert status == 404 and body["error"]["code"] == "session_not_found"


def test_stateless_requests_store_nothing_and_models_and_embeddings_pass_through(
    serve_files: KoogServe, server: FakeOpenAIServer, data_dir: Path, run_koog: Run
) -> None:
    client = serve_files.client()
    done = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[
            {"role": "user", "content": "a"},
            {"role": "assistant", "content": "b"},
            {"role": "user", "content": "c"},
        ],
        temperature=0.25,
        top_p=0.5,
        seed=7,
    )
    assert done.choices[0].message.content == "echo: c"
    sent = server.chat_requests[-1]
    assert (sent["temperature"], sent["top_p"], sent["seed"]) == (0.25, 0.5, 7)
    assert [m["content"] for m in sent["messages"][1:]] == ["a", "b", "c"]
    listed = run_koog("history", "list", "--json")
    assert json.loads(listed.stdout) == []
    assert [m.id for m in client.models.list()] == ["test-model"]
    vectors = client.embeddings.create(model="embed-small", input=["red apple", "green"])
    assert len(vectors.data) == 2 and len(vectors.data[0].embedding) > 0
    assert http("GET", serve_files.url.removesuffix("/v1") + "/healthz") == (200, {"status": "ok"})


def test_a_conversation_ending_with_an_assistant_message_is_refused_everywhere(
    serve_files: KoogServe, server: FakeOpenAIServer, run_koog: Run
) -> None:
    """Issue 51: a prefill (the conversation ends with an assistant message) was answered
    with the client's own words and the upstream never asked; it is a 400 on every
    protocol, stored session or not, and nothing is stored."""
    base = serve_files.url.removesuffix("/v1")
    said = [{"role": "user", "content": "say a colour"}, {"role": "assistant", "content": "It is"}]
    asked = len(server.requests)
    for headers in ({"X-Koog-Session": "prefill"}, {}):
        for path, body in (
            ("/v1/chat/completions", {"model": "m", "messages": said}),
            ("/v1/messages", {"model": "m", "max_tokens": 9, "messages": said}),
            ("/v1/responses", {"model": "m", "input": said, "store": False}),
        ):
            status, answer = http("POST", base + path, body, {**headers, "anthropic-version": "1"})
            assert status == 400 and "prefill" in json.dumps(answer), (path, headers, answer)
    assert len(server.requests) == asked
    assert json.loads(run_koog("history", "list", "--json").stdout) == []


def test_a_client_gone_mid_stream_leaves_a_failed_turn(
    serve_files: KoogServe, server: FakeOpenAIServer, run_koog: Run
) -> None:
    client = serve_files.client(default_headers={"X-Koog-Session": "gone"})
    client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "first"}]
    )
    server.enqueue({"chunks": [f"w{i} " for i in range(20)], "chunk_delay": 0.05})
    stream = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": "echo: first"},
            {"role": "user", "content": "second"},
        ],
        stream=True,
    )
    for n, _ in enumerate(stream):
        if n == 3:
            break
    stream.close()
    import time

    time.sleep(1.5)  # the upstream's remaining chunks arrive, and the turn fails on the next
    assert _said(_history(run_koog, "gone")) == [("user", "first"), ("assistant", "echo: first")]
    # The turn failed: its restore point is gone with it, so `rollback --latest` undoes the
    # first turn, not a turn never stored; and the client will resend "second", so the
    # failed attempt left nothing in the transcript either.
    listed = run_koog("checkpoint", "list", "-s", "gone", "--json")
    assert len(json.loads(listed.stdout)) == 1
    shown = run_koog("history", "show", "-s", "gone", "--transcript", "--json")
    assert [m["content"] for m in json.loads(shown.stdout)] == ["first", "echo: first"]


def test_tokens_guard_namespaces_and_the_upstream_key_stays_inside(
    koog_env: dict[str, str],
    server: FakeOpenAIServer,
    write_config: Callable[[str], Path],
    isolated: Path,
    data_dir: Path,
) -> None:
    config = write_config(
        "[long_term_memory.retrieval]\nenabled = true\n"
        "[long_term_memory.ingestion]\nenabled = true\n"
        '[[serve.tokens]]\ntoken = "token-for-alice-0123456789"\nsessions = ["alice-"]\n'
        'namespaces = ["a"]\n'
        '[[serve.tokens]]\ntoken = "token-for-bob-0123456789ab"\nsessions = ["bob-"]\n'
        'namespaces = ["b"]\n'
    )
    env = {**koog_env, "KOOG_CONFIG": str(config)}
    log = isolated / "serve.log"
    serve = KoogServe(env, log=log).start()
    try:
        alice = openai.OpenAI(
            base_url=serve.url, api_key="token-for-alice-0123456789", max_retries=0
        )
        bob = openai.OpenAI(base_url=serve.url, api_key="token-for-bob-0123456789ab", max_retries=0)
        bob.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": "my locker code is 4711"}],
            extra_headers={"X-Koog-Session": "bob-1", "X-Koog-Memory-Namespace": "b"},
        )
        with pytest.raises(openai.PermissionDeniedError):
            alice.chat.completions.create(
                model="gpt-4o-mini",
                messages=[{"role": "user", "content": "what is the locker code"}],
                extra_headers={"X-Koog-Session": "alice-1", "X-Koog-Memory-Namespace": "b"},
            )
        with pytest.raises(openai.PermissionDeniedError):
            alice.chat.completions.create(
                model="gpt-4o-mini",
                messages=[{"role": "user", "content": "hi"}],
                extra_headers={"X-Koog-Session": "bob-1", "X-Koog-Memory-Namespace": "a"},
            )
        with pytest.raises(openai.AuthenticationError):
            serve.client().models.list()
        base = serve.url.removesuffix("/v1")
        auth = {"Authorization": "Bearer token-for-alice-0123456789"}
        status, _ = http(
            "POST", f"{base}/koog/v1/memory/search", {"query": "locker", "namespace": "b"}, auth
        )
        assert status == 403
        assert http("GET", f"{base}/koog/v1/sessions", headers=auth) == (200, [])
        answered = alice.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": "what is the locker code"}],
            extra_headers={"X-Koog-Session": "alice-1", "X-Koog-Memory-Namespace": "a"},
        )
        assert "4711" not in json.dumps(server.chat_requests[-1])
        assert answered.choices[0].message.content
        # Deleting: "not yours" and "no such record" are one answer.
        bob_auth = {"Authorization": "Bearer token-for-bob-0123456789ab"}
        records = http("GET", f"{base}/koog/v1/memory?namespace=b", headers=bob_auth)[1]
        record = records[0]
        theirs = http("DELETE", f"{base}/koog/v1/memory/{record['id']}", headers=auth)
        missing = http("DELETE", f"{base}/koog/v1/memory/{'f' * 32}", headers=auth)
        assert theirs[0] == missing[0] == 404
        assert theirs[1]["error"]["code"] == missing[1]["error"]["code"] == "record_not_found"
        assert http("GET", f"{base}/koog/v1/memory?namespace=b", headers=bob_auth)[1] == records
    finally:
        assert serve.stop() == 0
    access = log.read_text()
    assert "token=token-1" in access and "token=token-2" in access
    assert "session=bob-1 appended" in access
    for path in [log, *data_dir.rglob("*")]:
        if path.is_file():
            assert API_KEY.encode() not in path.read_bytes(), path


def test_the_koog_namespace_manages_sessions_and_memory_like_the_cli(
    serve: KoogServe, run_koog: Run
) -> None:
    client = serve.client(default_headers={"X-Koog-Session": "api"})
    convo: list[dict[str, Any]] = [{"role": "user", "content": "one"}]
    client.chat.completions.create(model="gpt-4o-mini", messages=convo)  # type: ignore[arg-type]
    convo += [{"role": "assistant", "content": "echo: one"}, {"role": "user", "content": "two"}]
    client.chat.completions.create(model="gpt-4o-mini", messages=convo)  # type: ignore[arg-type]
    base = serve.url.removesuffix("/v1") + "/koog/v1"
    status, listed = http("GET", f"{base}/sessions")
    cli = json.loads(run_koog("history", "list", "--json").stdout)
    assert status == 200 and listed == cli and listed[0]["message_count"] == 5
    status, shown = http("GET", f"{base}/sessions/api")
    assert [m["content"] for m in shown["messages"]][1:] == ["one", "echo: one", "two", "echo: two"]
    status, points = http("GET", f"{base}/sessions/api/checkpoints")
    cli = json.loads(run_koog("checkpoint", "list", "-s", "api", "--json").stdout)
    assert status == 200 and points == cli and len(points) == 2
    status, undone = http("POST", f"{base}/sessions/api/rollback", {})
    assert status == 200 and undone["after"] == {"message_count": 3}
    assert [c for _, c in _said(_history(run_koog, "api"))] == ["one", "echo: one"]
    status, added = http("POST", f"{base}/memory", {"text": "the sky is green", "namespace": "n"})
    assert status == 201 and added["namespace"] == "n"
    status, hits = http("POST", f"{base}/memory/search", {"query": "sky", "namespace": "n"})
    assert status == 200 and [h["id"] for h in hits] == [added["id"]]
    assert http("DELETE", f"{base}/memory/{added['id']}")[0] == 200
    assert http("GET", f"{base}/memory?namespace=n") == (200, [])
    assert http("DELETE", f"{base}/sessions/api") == (200, {"session": "api", "deleted": True})
    assert http("GET", f"{base}/sessions/api")[0] == 404
    status, body = http("GET", f"{base}/nothing/here")
    assert status == 404 and body["error"]["type"] == "not_found_error"


def test_headers_say_which_memory_was_used_and_when_compression_ran(
    koog_env: dict[str, str],
    server: FakeOpenAIServer,
    write_config: Callable[[str], Path],
    isolated: Path,
    run_koog: Run,
) -> None:
    config = write_config(
        "[llm]\ncontext_tokens = 100000\n"
        "[compression]\nauto_after_messages = 4\n"
        '[long_term_memory.retrieval]\nenabled = true\nmode = "fulltext"\n'
    )
    env = {**koog_env, "KOOG_CONFIG": str(config)}
    server.responder = short_summaries
    served = KoogServe(env, log=isolated / "serve.log").start()
    try:
        base = served.url.removesuffix("/v1") + "/koog/v1"
        ids = [
            http("POST", f"{base}/memory", {"text": text})[1]["id"]
            for text in ("the rocket launch is on friday", "rocket fuel is kerosene")
        ]
        client = served.client(default_headers={"X-Koog-Session": "hdr"})
        convo: list[dict[str, Any]] = []
        seen = []
        # Long enough that a summary is shorter than what it replaces.
        padding = " and the launch pad, the crew, the countdown, the fuel" * 20
        for question in ("tell me about the rocket", "and the weather", "more", "again"):
            convo.append({"role": "user", "content": question + padding})
            raw = client.chat.completions.with_raw_response.create(
                model="gpt-4o-mini",
                messages=convo,  # type: ignore[arg-type]
                stream=True,
            )
            text = "".join(c.choices[0].delta.content or "" for c in raw.parse() if c.choices)
            convo.append({"role": "assistant", "content": text})
            seen.append(dict(raw.headers))
        assert sorted(seen[0]["x-koog-memory-used"].split(",")) == sorted(ids)
        assert seen[0]["x-koog-compressed"] == "false"
        assert seen[0]["x-koog-context-tokens"].endswith("/100000")
        assert [h["x-koog-compressed"] for h in seen[1:]].count("true") >= 1
        assert {h["x-koog-session"] for h in seen} == {"hdr"}  # compressed, never forked
    finally:
        assert served.stop() == 0
    listed = [s["session"] for s in json.loads(run_koog("history", "list", "--json").stdout)]
    assert listed == ["hdr"]


def test_a_cut_upstream_stream_is_an_error_to_the_client_and_nothing_is_stored(
    serve: KoogServe, server: FakeOpenAIServer, run_koog: Run
) -> None:
    """llama.cpp ends a stream in flight with [DONE] and no finish: the client gets an
    error event, never `finish_reason: stop` on half a reply; a length cut is passed on."""
    client = serve.client(default_headers={"X-Koog-Session": "cut"})
    client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "a"}])
    server.use_profile("llamacpp")
    server.enqueue({"content": "one two three four five", "cut_after": 2})
    convo: list[Any] = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "echo: a"},
        {"role": "user", "content": "b"},
    ]
    stream = client.chat.completions.create(model="gpt-4o-mini", messages=convo, stream=True)
    with pytest.raises(openai.APIError, match="ended the stream before the reply was complete"):
        for _ in stream:
            pass
    assert _said(_history(run_koog, "cut")) == [("user", "a"), ("assistant", "echo: a")]
    server.enqueue({"content": "half of it", "finish_reason": "length"})
    finishes = [
        c.choices[0].finish_reason
        for c in client.chat.completions.create(model="gpt-4o-mini", messages=convo, stream=True)
        if c.choices
    ]
    assert finishes[-1] == "length"
    assert _history(run_koog, "cut")[-1]["meta"]["finish_reason"] == "length"


def test_an_upstream_error_quoting_the_key_reaches_the_client_without_it(
    serve: KoogServe, server: FakeOpenAIServer
) -> None:
    """The upstream's status and words pass through, less the key it quoted: masked the
    way OpenAI masks it, or whole."""
    client = serve.client(default_headers={"X-Koog-Session": "keyed"})
    server.enqueue(
        {
            "status": 401,
            "message": f"Incorrect API key provided: sk-proj-****{API_KEY[-4:]}; sent {API_KEY}.",
            "code": "invalid_api_key",
        }
    )
    with pytest.raises(openai.AuthenticationError) as raised:
        client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}]
        )
    said = json.dumps(raised.value.body)
    assert "Incorrect API key provided: [key removed]; sent [key removed]." in said
    assert API_KEY not in said and API_KEY[-4:] not in said
    assert raised.value.status_code == 401
