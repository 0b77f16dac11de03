"""The context budget against the test server over HTTP: calibrated estimates, compression
by size that keeps every request under the limit, the summarising model, and facts asked
for as JSON with retries."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from koogcli.core import tokens
from koogcli.core.errors import ContextOverflowError
from koogcli.core.messages import Message
from koogcli.core.names import SessionName
from koogcli.services import budget, compose
from koogcli.services.compression import CompressRequest, StrategyChoice, compress
from koogcli.services.turn import TurnRequest, run_turn
from tests.fakes.chat_model import FakeChatModel
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.summaries import is_summary_request, summarised
from tests.fakes.varied_texts import TEXTS
from tests.support.stored import stored_bytes

pytestmark = pytest.mark.usefixtures("backend")

S = SessionName("b")
Build = Callable[..., Any]


@pytest.fixture
def live_ctx(server: FakeOpenAIServer, isolated: Path) -> Build:
    """An AppContext whose model is the real openai client talking to the test server."""

    def build(config: str = "") -> Any:
        path = isolated / "budget.toml"
        path.write_text(config)
        env = dict(
            os.environ,
            OPENAI_BASE_URL=server.base_url,
            OPENAI_API_KEY="x",
            KOOG_CONFIG=str(path),
            KOOG_MAX_RETRIES="0",
        )
        return compose.build(env=env)

    return build


def koog_count(messages: list[dict[str, Any]]) -> int:
    """koog's own estimate of a request as the server received it."""
    return tokens.request_tokens(
        Message(role=m["role"], content=m.get("content"), name=m.get("name")) for m in messages
    )


def short_summaries(body: dict[str, Any]) -> dict[str, Any]:
    last = body["messages"][-1]["content"]
    if is_summary_request(last):
        return {"content": f"Summary: {len(summarised(last))} messages about deployments."}
    return {"content": "noted"}


@pytest.mark.slow  # over 2 s
@pytest.mark.files_only  # token arithmetic: the same on every backend
def test_estimates_after_one_turn_are_within_15_percent(
    live_ctx: Build, server: FakeOpenAIServer
) -> None:
    """The server counts tokens its own way (word pieces); koog calibrates from the
    prompt_tokens of the previous answer and predicts each next request (estimates are
    recorded where a context size is configured)."""
    ctx = live_ctx("[llm]\ncontext_tokens = 1000000\n")
    run_turn(ctx, TurnRequest(S, "Hello! I would like some help with a deployment problem."))
    errors = []
    for i in range(50):
        text = TEXTS[i % len(TEXTS)]
        predicted = budget.session_size(ctx, S, next_message=text)
        run_turn(ctx, TurnRequest(S, text))
        reported = ctx.history.read(S).messages[-1].meta["usage"]["prompt_tokens"]
        errors.append(abs(predicted.tokens - reported) / reported)
        assert predicted.calibrated
    assert max(errors) <= 0.15, [round(e, 3) for e in errors]


SYMBOL_HEAVY = [
    '```\n{"a": [1, 2, 3], "b": {"c": null}}\n```\n| x | y |\n|---|---|\n| 1 | 2 |',
    "=> ok: [0x1f, 0x2e] != {k: v}; a->b; c::d; (e || f) && !g;",
    "$ ls -la /etc | grep -E '^d' | awk '{print $9}' | sort -u > /tmp/x.txt",
    '<div class="row"><span id="a1">&nbsp;</span></div><!-- end -->',
]


@pytest.mark.slow  # over 2 s
@pytest.mark.files_only  # token arithmetic: the same on every backend
@pytest.mark.parametrize("seed, length", [(0, 50), (1, 50), *((s, 8) for s in range(2, 8))])
def test_short_and_long_sessions_of_mixed_replies_are_estimated_within_15_percent(
    live_ctx: Build, server: FakeOpenAIServer, seed: int, length: int
) -> None:
    """After one calibrating turn, sessions of 3-50 messages whose replies mix prose,
    code and symbol-heavy text: a reply's own reported count is used as it is, and the
    ratio learned from the first (prose) request scales only what it fits."""
    import random

    rng = random.Random(seed)
    server.responder = lambda body: {"content": rng.choice([*SYMBOL_HEAVY, *TEXTS[:3]])}
    ctx = live_ctx("[llm]\ncontext_tokens = 1000000\n")
    run_turn(ctx, TurnRequest(S, rng.choice(TEXTS)))
    errors = []
    while len(ctx.history.read(S).messages) < length:
        text = rng.choice([*TEXTS, *SYMBOL_HEAVY])
        predicted = budget.session_size(ctx, S, next_message=text)
        run_turn(ctx, TurnRequest(S, text))
        reported = ctx.history.read(S).messages[-1].meta["usage"]["prompt_tokens"]
        errors.append(abs(predicted.tokens - reported) / reported)
    assert max(errors) <= 0.15, [round(e, 3) for e in errors]


@pytest.mark.slow  # over 2 s
@pytest.mark.files_only  # token arithmetic: the same on every backend
def test_a_session_three_times_the_context_never_sends_a_request_over_it(
    live_ctx: Build, server: FakeOpenAIServer
) -> None:
    """context_tokens = 2,000; the server refuses (as real ones do) anything koog's own
    counter puts above 2,000. Turns go on until 6,000 tokens of messages were sent."""
    ctx = live_ctx("[llm]\ncontext_tokens = 2000\n")
    server.context_limit = 2000
    server.context_counter = koog_count
    server.responder = short_summaries
    sent = 0
    turn = 0
    while sent < 3 * 2000:
        text = f"Turn {turn}: " + TEXTS[turn % len(TEXTS)]
        run_turn(ctx, TurnRequest(S, text))  # a refused request would raise here
        sent += tokens.message_tokens(Message(role="user", content=text)) + 5
        turn += 1
    sizes = [koog_count(r["messages"]) for r in server.chat_requests]
    assert max(sizes) <= 2000
    summaries = [
        r for r in server.chat_requests if is_summary_request(r["messages"][-1]["content"])
    ]
    assert summaries, "the history was never compressed"
    reasons = [c.reason for c in ctx.checkpoints.headers(S) if c.kind == "restore"]
    assert "compress" in reasons


def test_compression_model_writes_summaries_and_the_chat_model_answers(
    live_ctx: Build, server: FakeOpenAIServer
) -> None:
    ctx = live_ctx('[compression]\nmodel = "cheap"\nauto_after_messages = 4\n')
    server.responder = short_summaries
    for i in range(4):
        run_turn(ctx, TurnRequest(S, f"question {i}"))
    models = {
        ("summary" if is_summary_request(r["messages"][-1]["content"]) else "turn", r["model"])
        for r in server.chat_requests
    }
    assert models == {("summary", "cheap"), ("turn", "gpt-4o-mini")}
    server.reset()
    server.responder = short_summaries
    compress(ctx, CompressRequest(S, model="flagged"))
    assert [r["model"] for r in server.chat_requests] == ["flagged"]


TOPIC = StrategyChoice("facts", concepts=("topic:what the conversation is about",))


DETAIL = (
    " — the pipeline builds, runs the migrations, waits for the health checks of every "
    "region in turn and only then moves traffic, and the on-call engineer watches the "
    "dashboards for an hour afterwards"
)


def seeded(ctx: Any) -> bytes:
    """A history long enough that a fact or a summary is shorter than it (a compression
    that would lengthen the history is refused)."""
    for text in ("we deploy billing on Fridays", "the rollback takes ten minutes"):
        run_turn(ctx, TurnRequest(S, text + DETAIL * 3))
    return stored_bytes(ctx, S)


def test_facts_are_asked_again_until_the_answer_is_valid(
    live_ctx: Build, server: FakeOpenAIServer
) -> None:
    ctx = live_ctx()
    seeded(ctx)
    server.reset()
    server.enqueue(
        {"content": "Sure! The topic is deployments."},
        {"content": '{"facts": "not the shape"}'},
        {"content": '{"fact": "Billing is deployed on Fridays"}'},
    )
    result = compress(ctx, CompressRequest(S, TOPIC))
    assert result.changed and result.requests == 3
    assert "Billing is deployed on Fridays" in result.after[-1].text
    _, second, third = (r["messages"] for r in server.chat_requests)
    assert server.chat_requests[0]["response_format"]["type"] == "json_schema"
    schema = server.chat_requests[0]["response_format"]["json_schema"]["schema"]
    assert schema["required"] == ["fact"]
    # Each retry quotes the bad answer and says what was wrong with it.
    assert second[-2]["content"] == "Sure! The topic is deployments."
    assert "not JSON" in second[-1]["content"]
    assert 'must have a "fact" string' in third[-1]["content"]


def test_a_server_without_response_format_is_asked_with_the_plain_prompt(
    live_ctx: Build, server: FakeOpenAIServer
) -> None:
    ctx = live_ctx()
    seeded(ctx)
    server.reset()
    server.reject_response_formats = {"json_schema", "json_object"}
    server.enqueue({"content": '{"fact": "Billing is deployed on Fridays"}'})
    result = compress(ctx, CompressRequest(S, TOPIC))
    assert result.changed
    kinds = [(r.get("response_format") or {}).get("type") for r in server.chat_requests]
    assert kinds == ["json_schema", "json_object", None]


def test_four_bad_answers_leave_the_history_unchanged(
    live_ctx: Build, server: FakeOpenAIServer
) -> None:
    ctx = live_ctx()
    before = seeded(ctx)
    server.reset()
    server.responder = lambda body: {"content": "no JSON from me"}
    result = compress(ctx, CompressRequest(S, TOPIC))
    assert not result.changed and result.requests == 4
    assert stored_bytes(ctx, S) == before
    assert result.problems and "after 4 requests" in result.problems[0]


def test_bad_answers_then_the_fallback(live_ctx: Build, server: FakeOpenAIServer) -> None:
    ctx = live_ctx()
    seeded(ctx)
    server.reset()
    server.responder = lambda body: (
        short_summaries(body)
        if is_summary_request(body["messages"][-1]["content"])
        else {"content": "[]"}
    )
    choice = StrategyChoice("facts", concepts=TOPIC.concepts, fallback="whole")
    result = compress(ctx, CompressRequest(S, choice))
    assert result.changed and result.after[-1].meta["kind"] == "summary"
    assert json.dumps(result.after[-1].text).startswith('"Summary:')


def overflow() -> ContextOverflowError:
    return ContextOverflowError("the server refused the request as longer than the context")


def test_a_no_save_turn_recovers_without_writing(
    make_ctx: Build, fake_model: FakeChatModel
) -> None:
    ctx = make_ctx()
    for i in range(3):
        run_turn(ctx, TurnRequest(S, f"question {i}"))
    before = stored_bytes(ctx, S)
    points = ctx.checkpoints.headers(S)
    fake_model.enqueue(overflow(), "the summary", "the answer")
    done = run_turn(ctx, TurnRequest(S, "scratch", save=False))
    assert done.reply == "the answer"
    sent = [m.text for m in fake_model.requests[-1].messages]
    assert sent[-2:] == ["the summary", "scratch"] and "question 1" not in sent
    assert stored_bytes(ctx, S) == before
    assert ctx.checkpoints.headers(S) == points


def test_a_first_message_too_long_for_the_model_is_not_compressed(
    make_ctx: Build, fake_model: FakeChatModel
) -> None:
    ctx = make_ctx()
    fake_model.enqueue(overflow())
    with pytest.raises(ContextOverflowError) as refused:
        run_turn(ctx, TurnRequest(S, "a very long paste"))
    assert refused.value.hint and "message alone is too long" in refused.value.hint
    assert len(fake_model.requests) == 1 and not ctx.history.exists(S)


def sized_overflow() -> ContextOverflowError:
    error = overflow()
    error.limit = 100_000  # a server that names its size: what was planned for it is final
    return error


def test_a_second_refusal_is_not_retried_again(make_ctx: Build, fake_model: FakeChatModel) -> None:
    """A server that names its size refuses the compressed turn too: final (one that names
    none is asked again, smaller each time, a few times: test_local_server_e2e)."""
    ctx = make_ctx()
    run_turn(ctx, TurnRequest(S, "question"))
    before = stored_bytes(ctx, S)
    fake_model.enqueue(sized_overflow(), "the summary", sized_overflow())
    with pytest.raises(ContextOverflowError) as refused:
        run_turn(ctx, TurnRequest(S, "again"))
    assert "koog's estimate: ~" in refused.value.message
    assert "The turn was not stored (the compression before it is kept" in refused.value.message
    assert len(fake_model.requests) == 4  # the turn, the summary, the turn once more
    # The compression stays (it has its own restore point); the turn stored nothing.
    assert [m.text for m in ctx.history.read(S).messages][-1] == "the summary"
    assert [c.reason for c in ctx.checkpoints.headers(S) if c.kind == "restore"][-1] == "compress"
    assert before != stored_bytes(ctx, S)
