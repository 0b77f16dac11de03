"""The REPL's daily-driver commands, driven through prompt-toolkit's pipe input over real
files: completion of arguments, /retry, /edit, /editor, /copy, /usage, /rename, /role,
/attach, /resume, and the last exchanges shown on entry."""

from __future__ import annotations

import base64
import io
import re
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput

from koogcli.core.names import SessionName
from koogcli.repl import loop
from koogcli.repl.prompt import SlashCompleter
from koogcli.repl.slash import REGISTRY
from koogcli.repl.state import ReplState
from tests.fakes.chat_model import FakeChatModel, calls
from tests.repl.test_repl import CTRL_D, ENTER, Recorder

S = SessionName("r")


class TerminalOut(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def drive(make_ctx: Callable[..., Any]) -> Iterator[Callable[..., tuple[Recorder, Any]]]:
    def run(keys: str, session: str = "r", ctx: Any = None, **kw: Any) -> tuple[Recorder, Any]:
        ctx = ctx or make_ctx()
        ui = Recorder()
        ui.stdout = TerminalOut()
        with create_pipe_input() as inp:
            inp.send_text(keys)
            loop.run(
                ctx,
                SessionName(session),
                input=inp,
                output=DummyOutput(),
                ui=ui,
                history_file=False,
                **kw,
            )
        return ui, ctx

    yield run


def completions(state: Any, text: str) -> list[tuple[str, str]]:
    completer = SlashCompleter(REGISTRY, lambda: state)
    found = completer.get_completions(Document(text), CompleteEvent())
    return [(c.text, c.display_meta_text) for c in found]


def test_completion_of_commands_and_their_arguments(
    drive: Callable[..., Any], make_ctx: Callable[..., Any], write_config: Any
) -> None:
    write_config('[roles.reviewer]\nsystem = "Review."\nmodel = "big"\n')
    drive("hello" + ENTER + "/checkpoint before-lunch" + ENTER + CTRL_D, session="work")
    drive("hi" + ENTER + CTRL_D, session="other")
    model = FakeChatModel()
    listed: list[int] = []
    model.list_models = lambda: listed.append(1) or ["m-large", "m-small"]  # type: ignore[method-assign]
    state = ReplState(make_ctx(model=model), SessionName("work"), Recorder())

    assert [t for t, _ in completions(state, "/h")] == ["/help", "/history"]
    assert [t for t, _ in completions(state, "/re")] == [
        "/rename",
        "/resume",
        "/retry",
    ]
    assert completions(state, "/session ") == [("other", ""), ("work", "this one")]
    assert completions(state, "/session o") == [("other", "")]
    assert [t for t, _ in completions(state, "/compress ")] == [
        "whole",
        "last-n",
        "since",
        "chunked",
        "facts",
        "per-system",
    ]
    points = completions(state, "/rollback ")
    assert any("manual before-lunch" in meta for _, meta in points)
    assert any("before turn" in meta for _, meta in points)
    assert completions(state, "/role ") == [("reviewer", "big")]
    assert completions(state, "/model m-s") == [("m-small", "")]
    assert completions(state, "/model ") == [("m-large", ""), ("m-small", "")]
    assert listed == [1]  # the endpoint is asked once per REPL
    assert completions(state, "hello /session ") == []


def test_attach_completes_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "notes.txt").write_text("x")
    monkeypatch.chdir(tmp_path)
    assert [t for t, _ in completions(None, "/attach no")] == ["tes.txt"]


def test_retry_keeps_one_copy_of_the_exchange_with_the_new_reply(
    drive: Callable[..., Any], fake_model: FakeChatModel
) -> None:
    fake_model.enqueue("first answer", "second answer")
    ui, ctx = drive("what is it?" + ENTER + "/retry" + ENTER + CTRL_D)
    assert ui.replies == ["first answer", "second answer"]
    stored = [(m.role, m.text) for m in ctx.history.read(S).messages if m.role != "system"]
    assert stored == [("user", "what is it?"), ("assistant", "second answer")]
    assert fake_model.requests[-1].messages[-1].text == "what is it?"


def test_retry_refuses_when_the_last_change_was_not_a_turn(
    drive: Callable[..., Any], fake_model: FakeChatModel
) -> None:
    drive("one" + ENTER + "two" + ENTER + CTRL_D)
    fake_model.enqueue("the summary")
    ui, _ctx = drive("/compress whole" + ENTER + "/retry" + ENTER + CTRL_D)
    [error] = ui.errors
    assert error.startswith("the last change of r is the compression of ")
    assert error.endswith(", not a turn")
    assert len(fake_model.requests) == 3  # nothing was sent again


def test_edit_sends_what_the_editor_wrote(
    drive: Callable[..., Any],
    fake_model: FakeChatModel,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    editor = tmp_path / "rewrite.sh"
    editor.write_text('#!/bin/sh\nsed -i "s/cats/dogs/" "$1"\n')
    editor.chmod(editor.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("EDITOR", str(editor))
    monkeypatch.delenv("VISUAL", raising=False)
    _ui, ctx = drive("tell me about cats" + ENTER + "/edit" + ENTER + CTRL_D)
    assert fake_model.requests[-1].messages[-1].text == "tell me about dogs"
    stored = [(m.role, m.text) for m in ctx.history.read(S).messages if m.role != "system"]
    assert stored == [("user", "tell me about dogs"), ("assistant", "echo: tell me about dogs")]


def test_an_editor_that_fails_changes_nothing(
    drive: Callable[..., Any], fake_model: FakeChatModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EDITOR", "false")
    monkeypatch.delenv("VISUAL", raising=False)
    ui, ctx = drive("keep me" + ENTER + "/edit" + ENTER + "/editor" + ENTER + CTRL_D)
    assert [m.text for m in ctx.history.read(S).messages][1:] == ["keep me", "echo: keep me"]
    assert "the editor left no message; nothing changed" in ui.infos
    assert len(fake_model.requests) == 1


def test_editor_composes_a_new_message(
    drive: Callable[..., Any],
    fake_model: FakeChatModel,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    editor = tmp_path / "write.sh"
    editor.write_text('#!/bin/sh\nprintf "line one\\nline two\\n" > "$1"\n')
    editor.chmod(0o755)
    monkeypatch.setenv("VISUAL", str(editor))
    drive("/editor" + ENTER + CTRL_D)
    assert fake_model.requests[-1].messages[-1].text == "line one\nline two"


def test_copy_writes_an_osc52_sequence_with_the_last_reply(
    drive: Callable[..., Any], fake_model: FakeChatModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.delenv("TMUX", raising=False)
    monkeypatch.delenv("STY", raising=False)
    fake_model.enqueue("copy me: ünïcode")
    ui, _ = drive("question" + ENTER + "/copy" + ENTER + CTRL_D)
    payload = base64.b64encode("copy me: ünïcode".encode()).decode()
    assert f"\x1b]52;c;{payload}\x07" in ui.stdout.getvalue()
    assert any(i.startswith("copied the last reply") for i in ui.infos)


def test_copy_says_when_the_terminal_cannot(
    drive: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TERM", "dumb")
    ui, _ = drive("question" + ENTER + "/copy" + ENTER + CTRL_D)
    assert any("cannot copy" in e and "TERM=dumb" in e for e in ui.errors)
    assert "\x1b]52" not in ui.stdout.getvalue()


def test_usage_totals_the_sessions_tokens(
    drive: Callable[..., Any], fake_model: FakeChatModel
) -> None:
    ui, _ = drive("one" + ENTER + "two" + ENTER + "/usage" + ENTER + CTRL_D)
    assert "session r: 2 replies, 2 tokens in + 2 out = 4" in ui.shown
    assert "this REPL: 2 in + 2 out = 4" in ui.shown
    [size] = [line for line in ui.shown if line.startswith("next request: ~")]
    assert "tokens (context size unknown" in size


def test_usage_shows_the_next_request_against_the_context(
    drive: Callable[..., Any], write_config: Any
) -> None:
    write_config("[llm]\ncontext_tokens = 1000\n")
    ui, _ = drive("one" + ENTER + "/usage" + ENTER + CTRL_D)
    [size] = [line for line in ui.shown if line.startswith("next request: ~")]
    assert re.search(r"~\d+ of 1,000 tokens \(\d+%\) for \S+", size), size


def test_rename_moves_the_session(drive: Callable[..., Any]) -> None:
    ui, ctx = drive("hello" + ENTER + "/rename renamed" + ENTER + "again" + ENTER + CTRL_D)
    assert not ctx.history.exists(S)
    assert [m.text for m in ctx.history.read(SessionName("renamed")).messages][-1] == "echo: again"
    assert "renamed r to renamed" in ui.infos


def test_role_switches_system_prompt_and_model(
    drive: Callable[..., Any], fake_model: FakeChatModel, write_config: Any
) -> None:
    write_config('[roles.pirate]\nsystem = "Talk like a pirate."\nmodel = "sea-model"\n')
    from koogcli.services import compose

    def rebuild(flags: dict[str, object]) -> Any:
        return compose.build(flags=flags, model_factory=lambda ctx: fake_model)

    ui, _ = drive("/role pirate" + ENTER + "ahoy" + ENTER + CTRL_D, rebuild=rebuild)
    request = fake_model.requests[-1]
    assert request.model == "sea-model"
    assert request.messages[0].text == "Talk like a pirate."
    assert any(i.startswith("role pirate: model sea-model") for i in ui.infos)


def test_attach_adds_a_file_to_the_next_message_only(
    drive: Callable[..., Any], fake_model: FakeChatModel, tmp_path: Path
) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("line from the file\n")
    drive(f"/attach {notes}" + ENTER + "read this" + ENTER + "and then" + ENTER + CTRL_D)
    first, second = (r.messages[-1].text for r in fake_model.requests)
    assert first == "read this\n\nnotes.txt:\n```\nline from the file\n```"
    assert second == "and then"


def test_the_last_exchanges_are_shown_on_entry(drive: Callable[..., Any]) -> None:
    drive("one" + ENTER + "two" + ENTER + "three" + ENTER + CTRL_D)
    ui, _ = drive(CTRL_D)
    shown = "\n".join(ui.infos)
    assert "[user] two\n[assistant] echo: two\n[user] three\n[assistant] echo: three" in shown
    assert "[user] one" not in shown


def test_show_on_resume_zero_shows_nothing(drive: Callable[..., Any], write_config: Any) -> None:
    write_config("[chat]\nshow_on_resume = 0\n")
    drive("one" + ENTER + CTRL_D)
    ui, _ = drive(CTRL_D)
    assert not any("[user]" in i for i in ui.infos)


def test_compress_uses_the_model_chosen_with_model(
    drive: Callable[..., Any], fake_model: FakeChatModel
) -> None:
    drive("a" + ENTER + "b" + ENTER + CTRL_D)
    fake_model.enqueue("summary of it all")
    ui, _ = drive("/model summariser" + ENTER + "/compress whole" + ENTER + CTRL_D)
    assert fake_model.requests[-1].model == "summariser"
    assert any(i.endswith("undo with /rollback") for i in ui.infos)


def test_resume_with_nothing_to_resume(drive: Callable[..., Any]) -> None:
    ui, _ = drive("/resume" + ENTER + CTRL_D)
    assert "nothing to resume in session r" in ui.infos


def test_history_of_an_empty_session_says_so(drive: Callable[..., Any]) -> None:
    ui, _ = drive("/history" + ENTER + CTRL_D)
    assert "session r has no stored messages" in ui.infos


def test_hints_in_the_repl_name_slash_commands(capsys: pytest.CaptureFixture[str]) -> None:
    from koogcli.core.errors import UsageError
    from koogcli.repl.state import ReplUI

    ReplUI().error(UsageError("no checkpoint 'x'", hint="`koog checkpoint list --all` shows them"))
    ReplUI().error(UsageError("changed meanwhile", hint="run `koog compress` again"))
    err = capsys.readouterr().err
    assert "koog: hint: /checkpoints shows them" in err
    assert "koog: hint: run /compress again" in err


def test_rollback_with_no_id_undoes_the_turns_tool_calls_and_says_so(
    drive: Callable[..., Any], fake_model: FakeChatModel, tools: Callable[[], list[list[str]]]
) -> None:
    """§5.6: /rollback (the last change) compensates as `rollback ID` does; --no-compensate
    leaves the effects and says so."""
    fake_model.enqueue(calls(("create_user", {"name": "Alex"})), "made Alex")
    ui, ctx = drive("make Alex" + ENTER + "/rollback" + ENTER + "y" + ENTER + CTRL_D)
    assert "  undone: create_user(Alex): removed Alex" in ui.infos, ui.infos
    assert tools() == [["create_user", "Alex"], ["remove_user", "Alex"]]
    assert ctx.history.read(S).messages == []
    fake_model.enqueue(calls(("create_user", {"name": "Bo"})), "made Bo")
    ui, _ = drive("make Bo" + ENTER + "/rollback --no-compensate" + ENTER + "y" + ENTER + CTRL_D)
    assert "  left in place: create_user(Bo) (--no-compensate)" in ui.infos, ui.infos
    assert tools()[-1] == ["create_user", "Bo"]


@pytest.mark.parametrize("failure", ["cancel", "server down"])
def test_retry_after_a_failed_message_sends_that_message(
    drive: Callable[..., Any], fake_model: FakeChatModel, failure: str
) -> None:
    from koogcli.core.errors import ModelError

    fake_model.enqueue(
        "first answer", KeyboardInterrupt() if failure == "cancel" else ModelError(failure)
    )
    ui, ctx = drive("first" + ENTER + "second" + ENTER + "/retry" + ENTER + CTRL_D)
    stored = [(m.role, m.text) for m in ctx.history.read(S).messages if m.role != "system"]
    assert stored == [
        ("user", "first"),
        ("assistant", "first answer"),
        ("user", "second"),
        ("assistant", "echo: second"),
    ]
    assert "sending the last message again" in ui.infos


def test_a_killed_rollback_is_finished_by_the_next_command(
    drive: Callable[..., Any], fake_model: FakeChatModel, tools: Callable[[], list[list[str]]]
) -> None:
    from koogcli.core.checkpoints import CompensationEntry
    from koogcli.core.messages import utc_now

    fake_model.enqueue(calls(("create_user", {"name": "Cy"})), "made Cy")
    _, ctx = drive("make Cy" + ENTER + CTRL_D)
    call = next(c for m in ctx.history.read(S).messages for c in m.tool_calls)
    # What a rollback killed after restoring the history and before compensating leaves.
    ctx.checkpoints.record_compensations(S, [CompensationEntry(call, "pending", None, utc_now())])
    ctx.history.write(S, [], expected_revision=ctx.history.read(S).revision)
    ui, _ = drive("/history" + ENTER + "/history" + ENTER + CTRL_D)
    assert tools() == [["create_user", "Cy"], ["remove_user", "Cy"]]  # once, not twice
    assert any(i.startswith("finished the compensations") for i in ui.infos), ui.infos


def test_a_killed_rollback_is_finished_as_the_repl_opens(
    drive: Callable[..., Any], fake_model: FakeChatModel, tools: Callable[[], list[list[str]]]
) -> None:
    from koogcli.core.checkpoints import CompensationEntry
    from koogcli.core.messages import utc_now

    fake_model.enqueue(calls(("create_user", {"name": "Di"})), "made Di")
    _, ctx = drive("make Di" + ENTER + CTRL_D)
    call = next(c for m in ctx.history.read(S).messages for c in m.tool_calls)
    ctx.checkpoints.record_compensations(S, [CompensationEntry(call, "pending", None, utc_now())])
    ctx.history.write(S, [], expected_revision=ctx.history.read(S).revision)
    ui, _ = drive(CTRL_D)  # opened and left: no command typed
    assert tools() == [["create_user", "Di"], ["remove_user", "Di"]]
    assert "  undone: create_user(Di): removed Di" in ui.infos, ui.infos


def test_why_shows_what_shaped_the_last_reply_and_any_turn(drive: Callable[..., Any]) -> None:
    ui, _ = drive("first" + ENTER + "second" + ENTER + "/why" + ENTER + "/why 1" + ENTER + CTRL_D)
    shown = "\n".join(ui.shown)
    assert "turn 2 of 2 in r," in shown and "turn 1 of 2 in r," in shown
    assert "system prompt:" in shown and "long-term memory: retrieval off" in shown
    ui, _ = drive("/why 9" + ENTER + "/why x" + ENTER + CTRL_D)
    assert any("has 2 turns" in e for e in ui.errors), ui.errors
    assert any("usage: /why [N]" in e for e in ui.errors), ui.errors


def test_fork_continues_in_a_new_session_and_leaves_the_old_one(
    drive: Callable[..., Any],
) -> None:
    ui, ctx = drive(
        "one" + ENTER + "two" + ENTER + "/fork side 3" + ENTER + "three" + ENTER + CTRL_D
    )
    assert "forked r at message 3; now in side" in ui.infos, ui.infos
    side = [m.text for m in ctx.history.read(SessionName("side")).messages if m.role != "system"]
    assert side == ["one", "echo: one", "three", "echo: three"]
    old = [m.text for m in ctx.history.read(S).messages if m.role != "system"]
    assert old == ["one", "echo: one", "two", "echo: two"]
    ui, _ = drive("/fork side" + ENTER + "/fork x y" + ENTER + CTRL_D)
    assert any("exists already" in e for e in ui.errors), ui.errors
    assert any("usage: /fork NEW [N]" in e for e in ui.errors), ui.errors
