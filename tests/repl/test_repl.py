"""The REPL in-process: prompt-toolkit pipe input, a recording UI, real files, fake model."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput

from koogcli.core.errors import KoogError
from koogcli.core.names import SessionName
from koogcli.repl import loop, state
from koogcli.repl.keys import should_submit
from tests.fakes.chat_model import FakeChatModel, ProcessDeath, mortal
from tests.fakes.summaries import is_summary_request

ENTER, ESC_ENTER, CTRL_C, CTRL_D = "\r", "\x1b\r", "\x03", "\x04"


class Recorder(state.ReplUI):
    def __init__(self) -> None:
        super().__init__(markdown=False)
        self.replies: list[str] = []
        self.shown: list[str] = []
        self.infos: list[str] = []
        self.errors: list[str] = []
        self.waits: list[str] = []

    def reply(self) -> state.ReplyDisplay:
        ui = self

        class Display:
            def __init__(self) -> None:
                self.parts: list[str] = []

            def delta(self, text: str) -> None:
                self.parts = [*self.parts, text]

            def finish(self, text: str | None = None) -> None:
                ui.replies.append("".join(self.parts) or (text or ""))

            def abort(self) -> None:
                ui.infos.append("aborted")

            def pause(self) -> None:
                ui.infos.append("paused")

            def waiting(self, label: str = "waiting") -> None:
                ui.waits.append(label)

        return Display()

    def show(self, text: str) -> None:
        self.shown.append(text)

    def info(self, text: str) -> None:
        self.infos.append(text)

    def error(self, err: KoogError) -> None:
        self.errors.append(err.message)


@pytest.fixture
def repl(make_ctx: Callable[..., Any]) -> Iterator[Callable[..., tuple[Recorder, Any]]]:
    def drive(keys: str, session: str = "r", dies: bool = False) -> tuple[Recorder, Any]:
        ctx = mortal(make_ctx()) if dies else make_ctx()
        ui = Recorder()
        with create_pipe_input() as inp:
            inp.send_text(keys)
            loop.run(ctx, SessionName(session), input=inp, output=DummyOutput(), ui=ui)
        return ui, ctx

    yield drive


def test_message_reply_and_history(repl: Callable[..., Any]) -> None:
    ui, ctx = repl("hello" + ENTER + "/history" + ENTER + CTRL_D)
    assert ui.replies == ["echo: hello"]
    assert ui.shown == [
        "[system] You are a helpful assistant.\n[user] hello\n[assistant] echo: hello"
    ]
    assert [m.text for m in ctx.history.read(SessionName("r")).messages][1:] == [
        "hello",
        "echo: hello",
    ]


def test_esc_enter_makes_a_multi_line_message(
    repl: Callable[..., Any], fake_model: FakeChatModel
) -> None:
    repl("line one" + ESC_ENTER + "line two" + ENTER + CTRL_D)
    assert fake_model.requests[0].messages[-1].text == "line one\nline two"


def test_enter_inside_an_open_code_fence_adds_a_line(
    repl: Callable[..., Any], fake_model: FakeChatModel
) -> None:
    repl("```" + ENTER + "code" + ENTER + "```" + ENTER + CTRL_D)
    assert fake_model.requests[0].messages[-1].text == "```\ncode\n```"
    assert should_submit("plain") and not should_submit("```py\nx")


def test_ctrl_c_during_a_reply_cancels_and_keeps_going(
    repl: Callable[..., Any], fake_model: FakeChatModel
) -> None:
    def interrupted(request: Any, on_delta: Any) -> Any:
        on_delta("partial")
        raise KeyboardInterrupt

    fake_model.enqueue("first", interrupted)
    ui, ctx = repl("one" + ENTER + "two" + ENTER + "three" + ENTER + CTRL_D)
    assert "(cancelled)" in ui.infos
    texts = [m.text for m in ctx.history.read(SessionName("r")).messages]
    assert "two" not in texts and texts[-2:] == ["three", "echo: three"]


def test_ctrl_c_on_a_typed_line_clears_it_and_on_empty_exits(
    repl: Callable[..., Any], fake_model: FakeChatModel
) -> None:
    repl("typo" + CTRL_C + "real" + ENTER + CTRL_C)
    assert [r.messages[-1].text for r in fake_model.requests] == ["real"]


def test_session_and_model_switch(repl: Callable[..., Any], fake_model: FakeChatModel) -> None:
    ui, ctx = repl("/session other" + ENTER + "/model big-model" + ENTER + "hi" + ENTER + CTRL_D)
    assert ctx.history.exists(SessionName("other")) and not ctx.history.exists(SessionName("r"))
    assert fake_model.requests[0].model == "big-model"
    assert "switched to session other" in ui.infos


def test_errors_are_reported_and_the_loop_continues(repl: Callable[..., Any]) -> None:
    ui, _ = repl(
        "/nope"
        + ENTER
        + "/session ../x"
        + ENTER
        + "/history abc"
        + ENTER
        + "hi"
        + ENTER
        + "/exit"
        + ENTER
        + "never sent"
        + ENTER
    )
    assert ui.errors == [
        "unknown command /nope",
        "invalid session name: '../x'",
        "expected a number of 1 or more, got 'abc'",
    ]
    assert ui.replies == ["echo: hi"]


def test_clear_asks_and_help(repl: Callable[..., Any]) -> None:
    keys = "hi" + ENTER + "/clear" + ENTER + "n" + ENTER + "/clear" + ENTER + "y" + ENTER
    ui, ctx = repl(keys + "/help" + ENTER + CTRL_D)
    assert ctx.history.read(SessionName("r")).messages == []
    assert "nothing changed" in ui.infos and "cleared 3 messages from r" in ui.infos
    assert [m.text for m in ctx.transcript.read(SessionName("r"))] == ["hi", "echo: hi"]
    assert "/history [N]" in ui.shown[-1] and "/session NAME" in ui.shown[-1]


def test_model_errors_do_not_end_the_repl(
    repl: Callable[..., Any], fake_model: FakeChatModel
) -> None:
    from koogcli.core.errors import ModelError

    fake_model.enqueue(ModelError("server down"))
    ui, _ = repl("a" + ENTER + "b" + ENTER + CTRL_D)
    assert ui.errors == ["server down"] and ui.replies == ["echo: b"]


def test_input_history_persists_privately_and_ctrl_r_finds_it(
    repl: Callable[..., Any], fake_model: FakeChatModel, data_dir: Any
) -> None:
    repl("alpha question" + ENTER + "beta question" + ENTER + CTRL_D)
    history_file = data_dir / "input_history"
    assert "alpha question" in history_file.read_text()
    assert history_file.stat().st_mode & 0o777 == 0o600
    # A new REPL: Ctrl-R, type part of an earlier line, Enter accepts the match, Enter sends.
    repl("\x12alpha" + ENTER + ENTER + CTRL_D)
    assert fake_model.requests[-1].messages[-1].text == "alpha question"


def test_checkpoint_commands(repl: Callable[..., Any]) -> None:
    ui, ctx = repl(
        "first"
        + ENTER
        + "/checkpoint mark"
        + ENTER
        + "second"
        + ENTER
        + "/checkpoints"
        + ENTER
        + "/rollback mark"
        + ENTER
        + "y"
        + ENTER
        + CTRL_D
    )
    assert any(i.startswith("checkpoint ") and i.endswith("(mark)") for i in ui.infos)
    table = ui.shown[0]
    assert "manual" in table and "mark" in table and "before turn" in table
    texts = [m.text for m in ctx.history.read(SessionName("r")).messages]
    assert "first" in texts and "second" not in texts
    assert any(i.startswith("restored r to checkpoint") for i in ui.infos)


def test_rollback_needs_a_yes(repl: Callable[..., Any]) -> None:
    ui, ctx = repl("one" + ENTER + "/rollback" + ENTER + "n" + ENTER + CTRL_D)
    assert "nothing changed" in ui.infos
    assert [m.text for m in ctx.history.read(SessionName("r")).messages][-1] == "echo: one"


def test_interrupted_turn_is_offered_for_resume(
    repl: Callable[..., Any], fake_model: FakeChatModel
) -> None:
    fake_model.enqueue(ProcessDeath())
    with pytest.raises(ProcessDeath):
        repl("lost question" + ENTER + CTRL_D, dies=True)
    fake_model.enqueue("found the answer")
    ui, ctx = repl("y" + ENTER + CTRL_D)
    assert any("interrupted turn" in i for i in ui.infos)
    assert ui.replies == ["found the answer"]
    assert [m.text for m in ctx.history.read(SessionName("r")).messages][-2:] == [
        "lost question",
        "found the answer",
    ]
    ui, _ = repl(CTRL_D)
    assert not any("interrupted turn" in i for i in ui.infos)


@pytest.mark.parametrize("failure", ["server down", "cancel"])
def test_failed_turn_is_never_offered_for_resume(
    repl: Callable[..., Any], fake_model: FakeChatModel, failure: str
) -> None:
    from koogcli.core.errors import ModelError

    def restore_points(ctx: Any) -> list[str]:
        return [c.reason for c in ctx.checkpoints.headers(SessionName("r")) if c.kind == "restore"]

    repl("kept" + ENTER + CTRL_D)
    fake_model.enqueue(ModelError(failure) if failure != "cancel" else KeyboardInterrupt())
    ui, ctx = repl("lost" + ENTER + CTRL_D)
    assert ui.errors == ([failure] if failure != "cancel" else [])
    assert restore_points(ctx) == ["turn"]  # the failed turn left none behind
    ui, ctx = repl("y" + ENTER + CTRL_D)
    assert not any("interrupted" in i for i in ui.infos) and ui.replies == ["echo: y"]
    assert restore_points(ctx) == ["turn", "turn"]


def test_declining_resume_abandons_the_turn(
    repl: Callable[..., Any], fake_model: FakeChatModel
) -> None:
    fake_model.enqueue(ProcessDeath())
    with pytest.raises(ProcessDeath):
        repl("q" + ENTER + CTRL_D, dies=True)
    ui, _ = repl("n" + ENTER + CTRL_D)
    assert any("abandoned" in i for i in ui.infos)
    ui, _ = repl(CTRL_D)
    assert not any("interrupted turn" in i for i in ui.infos)


def test_tool_calls_show_as_dim_lines(
    repl: Callable[..., Any],
    fake_model: FakeChatModel,
    write_config: Callable[[str], Any],
    isolated: Any,
) -> None:
    from koogcli.core.messages import ToolCall
    from koogcli.core.model_port import Completion

    (isolated / "repl_tools_mod.py").write_text(
        "def shout(text: str) -> str:\n    '''Upper-case text.'''\n    return text.upper()\n"
    )
    write_config('[[tools]]\ncallable = "repl_tools_mod:shout"\n')
    fake_model.enqueue(Completion("", (ToolCall("c1", "shout", '{"text": "hey"}'),)), "done")
    ui, _ = repl("go" + ENTER + CTRL_D)
    assert '→ shout({"text": "hey"})' in ui.infos and "← HEY" in ui.infos
    assert ui.replies == ["done"]


def test_compress_command(repl: Callable[..., Any], fake_model: FakeChatModel) -> None:
    fake_model.answer = lambda r: (
        "the gist" if is_summary_request(r.messages[-1].text) else "echo: " + r.messages[-1].text
    )
    ui, ctx = repl("a" + ENTER + "b" + ENTER + "/compress" + ENTER + CTRL_D)
    assert any(i.startswith("compressed r: 5 → 3 messages") for i in ui.infos)
    assert [m.text for m in ctx.history.read(SessionName("r")).messages][-1] == "the gist"


def test_memory_command(repl: Callable[..., Any], make_ctx: Callable[..., Any]) -> None:
    from koogcli.services import memory

    memory.add(make_ctx(), "the staging server is called nimbus")
    ui, _ = repl(
        "/memory staging server" + ENTER + "/memory zebra" + ENTER + "/memory" + ENTER + CTRL_D
    )
    assert "the staging server is called nimbus" in ui.shown[0] and "SCORE" in ui.shown[0]
    assert "no memory matched" in ui.infos
    assert ui.errors == ["usage: /memory QUERY"]


def test_tool_approval_asks_and_remembers_always(
    repl: Callable[..., Any],
    fake_model: FakeChatModel,
    write_config: Callable[[str], Any],
    isolated: Any,
) -> None:
    from koogcli.core.messages import ToolCall
    from koogcli.core.model_port import Completion

    (isolated / "repl_ask_mod.py").write_text(
        "import json, os\n"
        "def shout(text: str) -> str:\n"
        "    '''Upper-case text.'''\n"
        "    with open('shouted.log', 'a') as f:\n"
        "        f.write(text + '\\n')\n"
        "    return text.upper()\n"
    )
    write_config('[[tools]]\ncallable = "repl_ask_mod:shout"\nask = true\n')

    def call(text: str) -> Completion:
        return Completion("", (ToolCall(f"c-{text}", "shout", f'{{"text": "{text}"}}'),))

    fake_model.enqueue(call("one"), "after no", call("two"), "after always", call("three"), "end")
    keys = "go" + ENTER + "n" + ENTER + "go" + ENTER + "a" + ENTER + "go" + ENTER + CTRL_D
    ui, ctx = repl(keys)
    assert (isolated / "shouted.log").read_text().split() == ["two", "three"]
    told = [m.text for m in fake_model.requests[1].messages if m.role == "tool"]
    assert told == ["Error: the user declined this call of shout; it was not made."]
    assert sum("→ shout" in i for i in ui.infos) == 3
    users = [m.text for m in ctx.history.read(SessionName("r")).messages if m.role == "user"]
    assert users == ["go", "go", "go"]  # the answers were never sent as messages


def test_banner_names_session_count_and_model_and_no_save_writes_nothing(
    make_ctx: Callable[..., Any], data_dir: Any
) -> None:
    from tests.conftest import snapshot

    ctx = make_ctx()
    ui = Recorder()
    with create_pipe_input() as inp:
        inp.send_text("first" + ENTER + CTRL_D)
        loop.run(ctx, SessionName("b"), input=inp, output=DummyOutput(), ui=ui)
    assert ui.infos[0].startswith("koog · session b (0 messages) · model gpt-4o-mini")
    before = snapshot(data_dir)
    ui = Recorder()
    with create_pipe_input() as inp:
        inp.send_text("second" + ENTER + "/clear" + ENTER + "/checkpoint x" + ENTER + CTRL_D)
        loop.run(make_ctx(), SessionName("b"), input=inp, output=DummyOutput(), ui=ui, save=False)
    assert "(3 messages)" in ui.infos[0] and "not saved (--no-save)" in ui.infos[0]
    assert ui.replies == ["echo: second"]
    assert [e.split(";")[0] for e in ui.errors] == [
        "/clear changes the session",
        "/checkpoint changes the session",
    ]
    assert snapshot(data_dir) == before


def test_the_repl_collects_cycles_though_one_shot_commands_do_not(
    make_ctx: Callable[..., Any],
) -> None:
    """koog's main() turns the cyclic collector off (a command lives a second or two); a
    REPL session, as `koog chat` runs it, lives for hours and must not keep every cycle it
    ever made: the collector is on between lines, and off again once it ends."""
    import gc

    from koogcli.cli import process

    seen: list[bool] = []

    class Looking(FakeChatModel):
        def complete(self, *args: Any, **kwargs: Any) -> Any:
            seen.append(gc.isenabled())
            return super().complete(*args, **kwargs)

    gc.disable()  # as main() leaves it
    try:
        ui = Recorder()
        with create_pipe_input() as inp, process.long_lived():
            inp.send_text("hello" + ENTER + "/history" + ENTER + CTRL_D)
            original = ui.info
            ui.info = lambda text: (seen.append(gc.isenabled()), original(text))  # type: ignore[method-assign]
            loop.run(
                make_ctx(Looking()),
                SessionName("c"),
                input=inp,
                output=DummyOutput(),
                ui=ui,
                per_line=process.per_line,
            )
            between = gc.isenabled()
        assert ui.replies == ["echo: hello"]
        assert between and not gc.isenabled()
        assert seen[-1] is False  # /history's output: inside a line, no collector pauses
    finally:
        gc.enable()


def test_no_collection_pauses_a_turn(make_ctx: Callable[..., Any]) -> None:
    """A turn over a long history allocates a lot; the collector must not run in the
    middle of it (the reply would wait for it), and is on again once the turn is done."""
    import gc

    from koogcli.cli import process

    collections_in_turn: list[int] = []
    in_turn = [False]

    def watch(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and in_turn[0]:
            collections_in_turn.append(info["generation"])

    class Allocating(FakeChatModel):
        def complete(self, *args: Any, **kwargs: Any) -> Any:
            in_turn[0] = True
            try:
                loaded = [[i] for i in range(50_000)]  # as reading a long history does
                assert len(loaded) == 50_000
                return super().complete(*args, **kwargs)
            finally:
                in_turn[0] = False

    gc.callbacks.append(watch)
    try:
        ui = Recorder()
        with create_pipe_input() as inp:
            inp.send_text("hello" + ENTER + CTRL_D)
            with process.long_lived():
                loop.run(
                    make_ctx(Allocating()),
                    SessionName("g"),
                    input=inp,
                    output=DummyOutput(),
                    ui=ui,
                    per_line=process.per_line,
                )
                assert gc.isenabled()  # on again once the turn is done
    finally:
        gc.callbacks.remove(watch)
        gc.enable()
    assert ui.replies == ["echo: hello"]
    assert collections_in_turn == []
