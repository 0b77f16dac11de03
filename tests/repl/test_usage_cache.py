"""The REPL's /usage shows the prompt tokens the server's cache served (SPEC §5.4a), summed
over this REPL's turns, and nothing of a cache when the server reported none."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput

from koogcli.core.model_port import Completion
from koogcli.core.names import SessionName
from koogcli.core.ports import Usage
from koogcli.repl import loop
from tests.fakes.chat_model import FakeChatModel
from tests.repl.test_repl import CTRL_D, ENTER, Recorder


def usage_lines(make_ctx: Callable[..., Any], *replies: Completion) -> list[str]:
    model = FakeChatModel()
    model.enqueue(*replies)
    ui = Recorder()
    with create_pipe_input() as inp:
        inp.send_text("".join(f"q{i}{ENTER}" for i in range(len(replies))))
        inp.send_text("/usage" + ENTER + CTRL_D)
        loop.run(
            make_ctx(model),
            SessionName("u"),
            input=inp,
            output=DummyOutput(),
            ui=ui,
            history_file=False,
        )
    return [line for line in ui.shown if line.startswith(("this REPL:", "session u:"))]


def test_usage_shows_the_cached_tokens_of_this_repls_turns(make_ctx: Callable[..., Any]) -> None:
    lines = usage_lines(
        make_ctx,
        Completion("one", usage=Usage(1200, 10, 1210, 0)),
        Completion("two", usage=Usage(1300, 10, 1310, 1150)),
    )
    assert lines == [
        "session u: 2 replies, 2,500 tokens in + 20 out = 2,520; "
        "prompt cache: 1,150 of 2,500 tokens reused",
        "this REPL: 2,500 in + 20 out = 2,520; prompt cache: 1,150 of 2,500 tokens reused",
    ]


def test_the_sessions_line_counts_the_cache_of_the_replies_that_reported_it(
    make_ctx: Callable[..., Any],
) -> None:
    lines = usage_lines(
        make_ctx,
        Completion("one", usage=Usage(1200, 10, 1210)),
        Completion("two", usage=Usage(1300, 10, 1310, 1150)),
    )
    assert lines[0] == (
        "session u: 2 replies, 2,500 tokens in + 20 out = 2,520; "
        "prompt cache: 1,150 of 1,300 tokens reused"
    )


def test_usage_says_nothing_of_a_cache_the_server_did_not_report(
    make_ctx: Callable[..., Any],
) -> None:
    lines = usage_lines(make_ctx, Completion("one", usage=Usage(1200, 10, 1210)))
    assert lines == [
        "session u: 1 reply, 1,200 tokens in + 10 out = 1,210",
        "this REPL: 1,200 in + 10 out = 1,210",
    ]
