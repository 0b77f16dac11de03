"""`koog chat`: the REPL on a terminal, otherwise exactly one turn (SPEC §2)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import typer

from koogcli.cli import render
from koogcli.cli.app import globals_of
from koogcli.core.errors import UsageError
from koogcli.core.names import SessionName

if TYPE_CHECKING:
    from koogcli.services.context import AppContext


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
    session: str | None = typer.Option(None, "-s", "--session", help="Session name."),
    message: str | None = typer.Option(None, "-m", "--message", help="Send one message and exit."),
    model: str | None = typer.Option(None, "--model", help="Model for this run."),
    system: str | None = typer.Option(None, "--system", help="System prompt for this run."),
    no_stream: bool = typer.Option(False, "--no-stream", help="Wait for the whole reply."),
    as_json: bool = typer.Option(False, "--json", help="One-shot: print one JSON object."),
) -> None:
    """Chat in a session: a REPL on a terminal, one turn with -m or piped input."""
    flags: dict[str, object] = {"llm.model": model, "llm.system_prompt": system}
    if no_stream:
        flags["chat.stream"] = False
    app_ctx = globals_of(ctx).build(flags)
    name = app_ctx.session(session)
    stdin_is_tty = render.is_tty(sys.stdin)
    if message is None and stdin_is_tty:
        if as_json:
            raise UsageError("--json needs a one-shot turn", hint="pass -m TEXT or pipe text in")
        from koogcli.repl.loop import run

        run(app_ctx, name)
        return
    text = compose_message(message, None if stdin_is_tty else sys.stdin.read())
    one_shot(app_ctx, name, text, as_json)


def one_shot(app_ctx: AppContext, name: SessionName, text: str, as_json: bool) -> None:
    from koogcli.services.turn import TurnRequest, run_turn

    writer = None if as_json else render.ReplyWriter(markdown=app_ctx.settings.chat.markdown)
    try:
        result = run_turn(app_ctx, TurnRequest(name, text), writer.delta if writer else None)
    except BaseException:
        if writer:
            writer.abort()
        raise
    if writer:
        writer.finish(result.reply)
        return
    render.json_out(
        {
            "session": result.session,
            "reply": result.reply,
            "usage": result.usage.to_dict() if result.usage else None,
            "checkpoint": None,
        }
    )
