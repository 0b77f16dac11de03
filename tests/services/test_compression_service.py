"""The compression service: ordering under concurrency, dry runs and failures."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from koogcli.core.errors import ModelError, UsageError
from koogcli.core.model_port import Completion, ModelRequest
from koogcli.core.names import SessionName
from koogcli.services.compression import CompressRequest, StrategyChoice, compress
from koogcli.services.turn import TurnRequest, run_turn
from tests.fakes.chat_model import FakeChatModel
from tests.fakes.summaries import is_summary_request, summarised
from tests.support.stored import stored_bytes

pytestmark = pytest.mark.usefixtures("backend")

S = SessionName("z")


class SlowSummaries(FakeChatModel):
    """Answers chat turns by echo and summaries after a random delay, counting overlap."""

    def __init__(self) -> None:
        super().__init__()
        self.active = 0
        self.peak = 0
        self.guard = threading.Lock()
        self.fail_on: str | None = None

    def complete(self, request: ModelRequest, on_delta: Any = None) -> Completion:
        if not is_summary_request(request.messages[-1].text):
            return super().complete(request, on_delta)
        with self.guard:
            self.active += 1
            self.peak = max(self.peak, self.active)
        try:
            time.sleep(random.uniform(0.01, 0.05))
            first = summarised(request.messages[-1].text)[0]
            if first == self.fail_on:
                raise ModelError("summary failed")
            return Completion(f"summary of {first}")
        finally:
            with self.guard:
                self.active -= 1


def seeded(make_ctx: Callable[..., Any], model: SlowSummaries, config: str = "") -> Any:
    ctx = make_ctx(model=model, KOOG_SYSTEM_PROMPT="sys")
    for i in range(8):
        run_turn(ctx, TurnRequest(S, f"q{i}"))
    return ctx


def test_chunks_run_concurrently_and_keep_their_order(make_ctx: Callable[..., Any]) -> None:
    model = SlowSummaries()
    ctx = seeded(make_ctx, model)
    result = compress(ctx, CompressRequest(S, StrategyChoice("chunked", chunk_size=2)))
    summaries = [m.text for m in result.after if m.meta.get("kind") == "summary"]
    assert summaries == [f"summary of {t}" for t in ["sys", *[f"echo: q{i}" for i in range(8)]]]
    assert model.peak > 1 and model.peak <= 4
    assert result.requests == 9


def test_failure_aborts_and_stores_nothing(make_ctx: Callable[..., Any]) -> None:
    model = SlowSummaries()
    ctx = seeded(make_ctx, model)
    before = stored_bytes(ctx, S)
    restore_points = len(ctx.checkpoints.headers(S))
    model.fail_on = "echo: q3"
    with pytest.raises(ModelError):
        compress(ctx, CompressRequest(S, StrategyChoice("chunked", chunk_size=2)))
    assert stored_bytes(ctx, S) == before
    assert len(ctx.checkpoints.headers(S)) == restore_points


def test_progress_is_reported(make_ctx: Callable[..., Any]) -> None:
    ctx = seeded(make_ctx, SlowSummaries())
    seen: list[tuple[int, int]] = []
    compress(
        ctx,
        CompressRequest(S, StrategyChoice("chunked", chunk_size=4)),
        lambda d, t: seen.append((d, t)),
    )
    assert seen[0] == (0, 5) and seen[-1] == (5, 5)


@pytest.mark.parametrize(
    "request_kw, message",
    [
        ({"strategy": "since"}, "needs a time"),
        ({"strategy": "since", "since": "yesterday"}, "not an ISO-8601 time"),
        ({"strategy": "facts"}, "needs concepts"),
        ({"strategy": "bogus"}, "unknown strategy 'bogus'"),
        ({"strategy": "facts", "concepts": ("a:b",), "fallback": "facts"}, "cannot be 'facts'"),
    ],
)
def test_bad_requests_are_usage_errors(
    make_ctx: Callable[..., Any], request_kw: dict[str, Any], message: str
) -> None:
    ctx = seeded(make_ctx, SlowSummaries())
    with pytest.raises(UsageError, match=message):
        compress(ctx, CompressRequest(S, StrategyChoice(**request_kw)))


def test_empty_session_cannot_be_compressed(make_ctx: Callable[..., Any]) -> None:
    with pytest.raises(UsageError, match="no session named 'empty'"):
        compress(make_ctx(), CompressRequest(SessionName("empty")))
