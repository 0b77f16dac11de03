"""run_turn over real files with a fake model: §5.0 live system prompt, §5.2 failed turns."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from koogcli.core.errors import ModelError, TurnCancelledError
from koogcli.core.names import SessionName
from koogcli.services.turn import TurnRequest, run_turn
from tests.fakes.chat_model import FakeChatModel
from tests.support.stored import stored_bytes

pytestmark = pytest.mark.usefixtures("backend")

S = SessionName("t")


def turn(ctx: Any, text: str, **kw: Any) -> Any:
    return run_turn(ctx, TurnRequest(S, text, **kw))


def test_second_turn_sees_the_first(
    make_ctx: Callable[..., Any], fake_model: FakeChatModel
) -> None:
    ctx = make_ctx()
    assert turn(ctx, "hello").reply == "echo: hello"
    turn(ctx, "again")
    sent = [(m.role, m.text) for m in fake_model.requests[1].messages]
    assert sent == [
        ("system", "You are a helpful assistant."),
        ("user", "hello"),
        ("assistant", "echo: hello"),
        ("user", "again"),
    ]


def test_live_system_prompt_wins_over_the_stored_one(
    make_ctx: Callable[..., Any], fake_model: FakeChatModel
) -> None:
    turn(make_ctx(), "one")
    turn(make_ctx(KOOG_SYSTEM_PROMPT="Be brief."), "two")
    systems = [m.text for m in fake_model.requests[1].messages if m.role == "system"]
    assert systems == ["Be brief."]
    turn(make_ctx(), "three", system_prompt="")
    assert all(m.role != "system" for m in fake_model.requests[2].messages)


@pytest.mark.parametrize("failure", [ModelError("server said no"), KeyboardInterrupt()])
def test_failed_turn_leaves_history_byte_identical(
    make_ctx: Callable[..., Any], fake_model: FakeChatModel, failure: BaseException
) -> None:
    ctx = make_ctx()
    turn(ctx, "kept")
    before = stored_bytes(ctx, S)

    def partial_then_fail(request: Any, on_delta: Callable[[str], None] | None) -> Any:
        assert on_delta is not None
        on_delta("half a rep")
        raise failure

    fake_model.enqueue(partial_then_fail)
    expected = TurnCancelledError if isinstance(failure, KeyboardInterrupt) else ModelError
    with pytest.raises(expected):
        turn(ctx, "lost")
    assert stored_bytes(ctx, S) == before
    transcript = ctx.transcript.read(S)
    assert [m.text for m in transcript][-1] == (
        "half a rep" if expected is TurnCancelledError else "lost"
    )
    if expected is TurnCancelledError:
        assert transcript[-1].meta == {"cancelled": True}


def test_window_of_four_stores_at_most_four(
    write_config: Callable[[str], Any], make_ctx: Callable[..., Any]
) -> None:
    write_config('[[chat_memory.preprocessors]]\ntype = "window"\nsize = 4\n')
    ctx = make_ctx()
    for i in range(5):
        turn(ctx, f"q{i}")
    stored = ctx.history.read(S).messages
    assert len([m for m in stored if m.role != "system"]) <= 4
    assert [m.text for m in stored][-2:] == ["q4", "echo: q4"]
    assert len(ctx.transcript.read(S)) == 10


def test_redact_applies_to_what_is_stored_and_sent(
    write_config: Callable[[str], Any], make_ctx: Callable[..., Any], fake_model: FakeChatModel
) -> None:
    write_config('[[chat_memory.preprocessors]]\ntype = "redact"\npattern = "\\\\d{4}-\\\\d{4}"\n')
    ctx = make_ctx()
    turn(ctx, "my card is 1234-5678")
    assert b"1234-5678" not in stored_bytes(ctx, S)
    turn(ctx, "next")
    assert "[REDACTED]" in fake_model.requests[1].messages[1].text


def test_custom_preprocessor_from_the_config_folder(
    write_config: Callable[[str], Any], make_ctx: Callable[..., Any]
) -> None:
    path = write_config(
        '[[chat_memory.preprocessors]]\ntype = "custom"\ncallable = "koog_test_pre:only_users"\n'
    )
    (path.parent / "koog_test_pre.py").write_text(
        "def only_users(messages):\n    return [m for m in messages if m.role == 'user']\n"
    )
    ctx = make_ctx()
    turn(ctx, "a")
    assert [m.role for m in ctx.history.read(S).messages] == ["user"]


def test_a_ctrl_c_swallowed_mid_stream_still_cancels_the_turn(
    make_ctx: Callable[..., Any], fake_model: FakeChatModel
) -> None:
    """A SIGINT whose KeyboardInterrupt lands in code that drops exceptions (a __del__,
    a callback) must still stop the reply: it is raised again at the next delta."""
    import os
    import signal
    import time

    ctx = make_ctx()
    turn(ctx, "first")
    before = ctx.history.read(S)
    deltas: list[str] = []

    def swallowing(request: Any, on_delta: Any) -> str:
        on_delta("partial ")
        try:  # as Python does for an exception raised inside __del__
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)
        except KeyboardInterrupt:
            pass
        for word in ("and ", "the ", "rest"):
            on_delta(word)
            deltas.append(word)
        return ""

    fake_model.enqueue(swallowing)
    with pytest.raises(TurnCancelledError):
        turn(ctx, "second")
    assert deltas == []  # nothing after the Ctrl-C was shown
    assert ctx.history.read(S).messages == before.messages
