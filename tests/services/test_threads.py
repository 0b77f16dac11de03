"""Services from a thread pool (the groundwork for `koog serve`): turns on different
sessions from eight threads of one process, through one shared context, on each backend
— every turn stored once, none crossed into another session, each thread's output its
own."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from koogcli.core.names import SessionName
from koogcli.services import compose
from koogcli.services.turn import TurnEvents, TurnRequest, run_turn
from tests.fakes.openai_server import FakeOpenAIServer

pytestmark = [pytest.mark.usefixtures("backend"), pytest.mark.e2e]  # 160 turns over HTTP


@pytest.fixture
def shared_ctx(server: FakeOpenAIServer, isolated: Path, tools: Callable[[], Any]) -> Any:
    """One context whose model is the real openai client, with tools configured."""
    import os

    env = dict(
        os.environ,
        OPENAI_BASE_URL=server.base_url,
        OPENAI_API_KEY="x",
        KOOG_MODEL="m",
        KOOG_MAX_RETRIES="0",
    )
    return compose.build(env=env)


def test_eight_threads_of_ten_turns_on_eight_sessions(
    shared_ctx: Any, server: FakeOpenAIServer, tools: Callable[[], list[list[str]]]
) -> None:
    def answer(body: dict[str, Any]) -> dict[str, Any]:
        last = body["messages"][-1]
        if last["role"] == "tool":
            return {"content": f"done: {last['content']}", "chunk_delay": 0.001}
        text = str(last["content"])
        if text.endswith("-t3"):  # some turns call a tool
            return {"tool_calls": [{"name": "lookup", "arguments": {"city": text}}]}
        return {"content": f"echo: {text}", "chunk_delay": 0.001}

    server.responder = answer
    seen: dict[str, list[str]] = {}

    def work(w: int) -> None:
        session = SessionName(f"thread{w}")
        shown = seen.setdefault(session.value, [])
        for t in range(10):
            parts: list[str] = []
            events = TurnEvents(on_delta=parts.append)
            result = run_turn(shared_ctx, TurnRequest(session, f"w{w}-t{t}"), events)
            shown.append("".join(parts))
            assert result.session == session.value
            assert threading.current_thread() is not threading.main_thread()

    with ThreadPoolExecutor(8) as pool:
        for future in [pool.submit(work, w) for w in range(8)]:
            future.result(timeout=120)
    for w in range(8):
        session = SessionName(f"thread{w}")
        users = [m.text for m in shared_ctx.history.read(session).messages if m.role == "user"]
        assert users == [f"w{w}-t{t}" for t in range(10)]  # all, once, in order, none crossed
        assert all(f"w{w}-" in text for text in seen[session.value]), seen[session.value]
        assert shared_ctx.checkpoints.headers(session)  # checkpoints taken and kept apart
    assert sorted(e[1] for e in tools() if e[0] == "lookup") == sorted(f"w{w}-t3" for w in range(8))
