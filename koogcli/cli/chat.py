"""`koog chat`: the REPL on a terminal, otherwise exactly one turn (SPEC §2)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

import typer

from koogcli.cli import render
from koogcli.cli.options import globals_of
from koogcli.core.errors import UsageError
from koogcli.core.names import SessionName

if TYPE_CHECKING:
    from koogcli.services.context import AppContext
    from koogcli.services.turn import TurnEvents, TurnResult


def compose_message(message: str | None, piped: str | None) -> str:
    """`-m` text, then piped standard input after a blank line (SPEC §2)."""
    parts = [p for p in (message, piped.strip("\n") if piped else None) if p]
    text = "\n\n".join(parts)
    if not text.strip():
        raise UsageError(
            "nothing to send: the message is empty", hint="pass -m TEXT or pipe text in"
        )
    return text


def chat(
    ctx: typer.Context,
    session: str | None = typer.Option(
        None, "-s", "--session", metavar="NAME", help="Session name."
    ),
    message: str | None = typer.Option(
        None, "-m", "--message", metavar="TEXT", help="Send one message and exit."
    ),
    model: str | None = typer.Option(None, "--model", metavar="MODEL", help="Model for this run."),
    system: str | None = typer.Option(
        None, "--system", metavar="TEXT", help="System prompt for this run."
    ),
    no_stream: bool = typer.Option(False, "--no-stream", help="Wait for the whole reply."),
    ask_tools: bool = typer.Option(
        False, "--ask-tools", help="Ask before every tool call (refused without a terminal)."
    ),
    resume: bool | None = typer.Option(
        None,
        "--resume/--no-resume",
        help="Finish the turn a killed process left behind, or abandon it.",
    ),
    as_json: bool = typer.Option(False, "--json", help="One-shot: print one JSON object."),
) -> None:
    """Chat in a session: a REPL on a terminal, one turn with -m or piped input."""
    from koogcli.services import turn

    flags: dict[str, object] = {"llm.model": model, "llm.system_prompt": system}
    if no_stream:
        flags["chat.stream"] = False
    if ask_tools:
        flags["tool_settings.ask"] = True
    app_ctx = globals_of(ctx).build(flags)
    name = app_ctx.session(session)
    app_ctx.require_endpoint()
    if resume:
        if message is not None:
            raise UsageError("--resume finishes the interrupted turn; send -m in the next command")
        finish_interrupted(app_ctx, name, as_json)
        return
    if resume is False and (abandoned := turn.abandon(app_ctx, name)) is not None:
        render.note(f"abandoned the interrupted turn of {name.value} (after step {abandoned.step})")
    stdin_is_tty = render.is_tty(sys.stdin)
    if message is None and stdin_is_tty:
        if as_json:
            raise UsageError("--json needs a one-shot turn", hint="pass -m TEXT or pipe text in")
        from koogcli.repl.loop import run

        run(app_ctx, name, offer_resume=resume is None)
        return
    text = compose_message(message, None if stdin_is_tty else render.read_stdin())
    if resume is None and (pending := turn.interrupted(app_ctx, name)) is not None:
        render.note(
            f"session {name.value} has an interrupted turn (after step {pending.step}); "
            f"`koog chat -s {name.value} --resume` finishes it"
        )
    show(
        lambda events: turn.run_turn(app_ctx, turn.TurnRequest(name, text), events),
        app_ctx,
        as_json,
    )


def finish_interrupted(app_ctx: AppContext, name: SessionName, as_json: bool) -> None:
    from koogcli.services import turn

    pending = turn.interrupted(app_ctx, name)
    if pending is None:
        render.note(f"nothing to resume in session {name.value}")
        return
    render.note(f"resuming the interrupted turn of {name.value} after step {pending.step}")
    show(lambda events: turn.resume_turn(app_ctx, name, events), app_ctx, as_json)


def show(
    run: Callable[[TurnEvents], TurnResult | None], app_ctx: AppContext, as_json: bool
) -> None:
    """Run a one-shot turn: the reply alone on stdout (or one JSON object), tools on stderr."""
    from koogcli.services.turn import TurnEvents

    writer = None if as_json else render.ReplyWriter(markdown=app_ctx.settings.chat.markdown)
    events = TurnEvents(
        on_delta=writer.delta if writer else None,
        on_tool_call=lambda call: render.note(render.tool_call_line(call)),
        on_tool_result=lambda call, outcome: render.note(render.tool_result_line(outcome)),
        on_note=render.note,
        on_warning=render.warning,
        approve=render.tool_approver(),
    )
    try:
        result = run(events)
    except BaseException:
        if writer:
            writer.abort()
        raise
    if result is None:
        return
    if writer:
        writer.finish(result.reply)
        return
    render.json_out(
        {
            "session": result.session,
            "reply": result.reply,
            "usage": result.usage.to_dict() if result.usage else None,
            "checkpoint": result.checkpoint,
        }
    )
