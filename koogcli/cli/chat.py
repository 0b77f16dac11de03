"""`koog chat`: the REPL on a terminal, otherwise exactly one turn (SPEC §2)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import typer

from koogcli.cli import process
from koogcli.cli.options import Globals, complete_roles, globals_of, session_option, with_endpoint
from koogcli.core.errors import ModelError, UsageError
from koogcli.core.names import SessionName
from koogcli.ui import render, views

if TYPE_CHECKING:
    from koogcli.cli import pipeline
    from koogcli.cli.pipeline import Output
    from koogcli.services.context import AppContext
    from koogcli.services.prompt_input import Attachment
    from koogcli.services.turn import TurnEvents, TurnResult


def chat(
    ctx: typer.Context,
    prompt: list[str] | None = typer.Argument(
        None,
        metavar="PROMPT",
        help="The message (words are joined with spaces).",
        show_default=False,
    ),
    session: str | None = session_option("Session to use (default: a new one)."),
    continue_: bool = typer.Option(
        False, "-c", "--continue", help="Continue the most recently used session."
    ),
    model: str | None = typer.Option(None, "-m", "--model", metavar="MODEL", help="Model to use."),
    system: str | None = typer.Option(
        None, "--system", metavar="TEXT", help="System prompt for this turn."
    ),
    role: str | None = typer.Option(
        None,
        "-r",
        "--role",
        metavar="NAME",
        help="A role from config ([roles.NAME]).",
        autocompletion=complete_roles,
    ),
    attach: list[str] | None = typer.Option(
        None,
        "-a",
        "--attach",
        metavar="PATH|URL",
        help="Add a file: text, or an image, PDF or audio file ('-': stdin); repeatable.",
    ),
    no_save: bool = typer.Option(False, "--no-save", help="Read the session, write nothing."),
    usage: bool = typer.Option(False, "-u", "--usage", help="Print token usage on stderr."),
    no_stream: bool = typer.Option(False, "--no-stream", help="Wait for the whole reply."),
    ask_tools: bool = typer.Option(
        False, "--ask-tools", help="Ask before every tool call (refused without a terminal)."
    ),
    yes: bool = typer.Option(
        False, "--yes", "-y", help="Run tool calls that would ask (approval), without asking."
    ),
    resume: bool | None = typer.Option(
        None,
        "--resume/--no-resume",
        help="Finish the turn a killed process left behind, or abandon it.",
    ),
    as_json: bool = typer.Option(False, "--json", help="One-shot: print one JSON object."),
    max_tokens: int | None = typer.Option(
        None, "--max-tokens", min=1, metavar="N", help="The longest reply, in tokens."
    ),
    schema: str | None = typer.Option(
        None,
        "--schema",
        metavar="SCHEMA",
        help="Reply as JSON fitting SCHEMA: a JSON schema (inline or a file) or "
        "'name, age int, bio: a short bio'; stdout is the JSON alone.",
    ),
    schema_multi: str | None = typer.Option(
        None, "--schema-multi", metavar="SCHEMA", help='A list of such objects: {"items": [...]}.'
    ),
    extract: bool = typer.Option(
        False, "-x", "--extract", help="Print only the reply's first fenced code block."
    ),
    extract_last: bool = typer.Option(
        False, "--extract-last", help="Print only the reply's last fenced code block."
    ),
    option: list[str] | None = typer.Option(
        None,
        "-o",
        "--option",
        metavar="KEY VALUE",
        help="A model option for this call (temperature 0.3, seed 7, top_p, ...); repeatable.",
    ),
    template: str | None = typer.Option(
        None, "-t", "--template", metavar="NAME", help="Run a saved prompt ([templates.NAME])."
    ),
    param: list[str] | None = typer.Option(
        None, "-p", "--param", metavar="KEY VALUE", help="Fill $KEY in the template; repeatable."
    ),
    save: str | None = typer.Option(
        None,
        "--save",
        metavar="NAME",
        help="Save the prompt, system prompt, model, options and schema as a template; "
        "no model call.",
    ),
    force: bool = typer.Option(False, "--force", help="With --save: replace that template."),
) -> None:
    """Chat with the model: a REPL, or one turn.

    A prompt argument or piped input means one turn; neither, the REPL.
    """
    from koogcli.cli import pipeline

    asked = (schema, schema_multi, extract, extract_last)
    options, params = pipeline.pairs(option, "-o"), pipeline.pairs(param, "-p")
    pipe = pipeline.Args(*asked, options, template, params, save, force)
    pipe.check()
    pipe.check_with(as_json, bool(attach), role is not None)
    if save is not None:
        return pipeline.save(globals_of(ctx), pipe, " ".join(prompt or []), system, model)
    if session is not None and continue_:
        raise UsageError("-s and -c both name a session; give one of them")
    flags: dict[str, object] = {
        "llm.model": model,
        "llm.system_prompt": system,
        "llm.max_tokens": max_tokens,
    }
    if no_stream:
        flags["chat.stream"] = False
    if ask_tools:
        flags["tool_settings.ask"] = True
    request = ChatRequest(
        prompt or [],
        attach or [],
        not no_save,
        usage,
        as_json,
        resume,
        session,
        continue_,
        role,
        pipe,
    )
    chosen = plan(request, render.is_tty(sys.stdin))
    app_ctx, name, generated = _open(globals_of(ctx), flags, request)
    app_ctx.approve_all = yes
    if isinstance(chosen, Resume):
        finish_interrupted(app_ctx, name, as_json)
    elif isinstance(chosen, Repl):
        _repl(globals_of(ctx), flags, app_ctx, name, request)
    else:
        _one_shot(app_ctx, name, generated, request)


@dataclass(frozen=True)
class ChatRequest:
    """What `koog chat` was asked, parsed."""

    prompt: list[str]
    files: list[str]
    save: bool
    usage: bool
    as_json: bool
    resume: bool | None  # --resume / --no-resume / neither
    session: str | None
    continue_: bool
    role: str | None
    pipe: pipeline.Args  # --schema, -x, -o, templates


@dataclass(frozen=True)
class Repl:
    """No prompt, nothing piped, a terminal: the REPL."""


@dataclass(frozen=True)
class OneShot:
    """A prompt, piped text or attachments: exactly one turn."""


@dataclass(frozen=True)
class Resume:
    """--resume: finish the turn a killed process left."""


Plan = Repl | OneShot | Resume


def plan(request: ChatRequest, stdin_is_tty: bool) -> Plan:
    """Which of the three `koog chat` runs; usage errors before anything is opened."""
    if request.resume:
        if request.prompt:
            raise UsageError("--resume finishes the interrupted turn; send the prompt next")
        return Resume()
    if not request.prompt and not request.files and stdin_is_tty and not request.pipe.template:
        if request.as_json:
            raise UsageError("--json needs a one-shot turn", hint="give a prompt or pipe text in")
        if request.pipe.one_shot_only:
            raise UsageError(
                "--schema, -x and -t need a one-shot turn", hint="give a prompt or pipe text in"
            )
        return Repl()
    return OneShot()


def _open(
    options: Globals, flags: dict[str, object], request: ChatRequest
) -> tuple[AppContext, SessionName, bool]:
    """The context (a role's settings under the command line's), the session and whether
    it is new; a turn a killed process left is abandoned here with --no-resume."""
    from koogcli.cli import pipeline
    from koogcli.services import sessions, turn

    app_ctx = options.build(flags)
    spec = pipeline.template(app_ctx, request.pipe.template)
    if request.role is not None or spec is not None:
        given = {k: v for k, v in flags.items() if v is not None}  # the command line wins
        role = sessions.role_flags(app_ctx, request.role) if request.role is not None else {}
        shaped = pipeline.template_flags(spec, request.pipe.params) if spec is not None else {}
        app_ctx = options.build({**role, **shaped, **given})
    name, generated = sessions.choose(app_ctx, request.session, request.continue_)
    app_ctx = with_endpoint(app_ctx, isinstance(plan(request, sys.stdin.isatty()), Repl))
    if (
        request.resume is False
        and not (request.save and turn.close_stored(app_ctx, name))
        and (abandoned := turn.abandon(app_ctx, name)) is not None
    ):
        render.note(f"abandoned the interrupted turn of {name.value} (after step {abandoned.step})")
    return app_ctx, name, generated


def _repl(
    options: Globals,
    flags: dict[str, object],
    app_ctx: AppContext,
    name: SessionName,
    request: ChatRequest,
) -> None:
    from koogcli.repl.loop import run

    def rebuild(role: dict[str, object]) -> AppContext:  # /role: the later choice wins
        built = options.build({**flags, **role})
        built.approve_all = app_ctx.approve_all
        return built

    with process.long_lived():
        run(
            app_ctx,
            name,
            offer_resume=request.resume is None,
            save=request.save,
            rebuild=rebuild,
            per_line=process.per_line,
        )


def _one_shot(
    app_ctx: AppContext, name: SessionName, generated: bool, request: ChatRequest
) -> None:
    from koogcli.cli import pipeline
    from koogcli.services import prompt_input, turn

    limit = app_ctx.settings.chat.max_attachment_bytes
    max_input = app_ctx.settings.chat.max_input_bytes
    attachments, piped = _attachments(request.files, limit, max_input)
    words, pipe = " ".join(request.prompt), request.pipe
    spec = pipeline.template(app_ctx, pipe.template)
    if spec is not None:
        words, piped = pipeline.fill(spec, words, piped, pipe.params)
    text = prompt_input.compose(words, piped, attachments, max_input)
    call = pipeline.call_options(app_ctx, pipe, spec, prompt_input.media_parts(attachments))
    shown = pipeline.output(pipe, spec, call.schema is not None)
    look = turn.unfinished if request.save else turn.interrupted  # --no-save writes nothing
    if request.resume is None and (pending := look(app_ctx, name)) is not None:
        render.note(
            f"session {name.value} has an interrupted turn (after step {pending.step}); "
            f"`koog chat -s {name.value} --resume` finishes it"
        )
    if generated and request.save:  # the README's promise: its name on stderr, always
        # Tools that cannot be imported fail first: no name of a session never created.
        app_ctx.toolbox  # noqa: B018
        render.note(f"session {name.value}")
    turn_request = turn.TurnRequest(name, text, save=request.save, call=call)
    try:
        show(
            lambda events: turn.run_turn(app_ctx, turn_request, events),
            app_ctx,
            request.as_json,
            request.usage,
            unnamed=generated and not request.save,  # --no-save made no session: none named
            output=shown,
        )
    except ModelError as err:
        if call.parts and err.status == 400 and err.hint is None:
            err.hint = "the model may not take images, PDFs or audio; -m chooses one that does"
        raise


def _attachments(
    files: list[str], limit: int, max_input: int
) -> tuple[list[Attachment], str | None]:
    """Each `-a` (`-` reads standard input as a file: text, or an image, PDF or audio),
    and the piped text when standard input is not one of them."""
    from koogcli.services import prompt_input

    if prompt_input.STDIN in files and not render.is_tty(sys.stdin):
        data = sys.stdin.buffer.read(limit + 1)
        stdin = prompt_input.attachment("stdin", data, limit)
        found = [
            stdin if path == prompt_input.STDIN else prompt_input.read_attachment(path, limit)
            for path in files
        ]
        return found, None
    piped = None if render.is_tty(sys.stdin) else render.read_stdin(max_input)
    listed = [p for p in files if p != prompt_input.STDIN]
    return [prompt_input.read_attachment(path, limit) for path in listed], piped


def finish_interrupted(app_ctx: AppContext, name: SessionName, as_json: bool) -> None:
    from koogcli.services import turn

    app_ctx.require_session(name)  # exit 2 for a name that is no session (SPEC §2)
    pending = turn.unfinished(app_ctx, name)
    if pending is None:
        render.note(f"nothing to resume in session {name.value}")
        return
    render.note(f"resuming the interrupted turn of {name.value} after step {pending.step}")
    show(lambda events: turn.resume_turn(app_ctx, name, events), app_ctx, as_json)


def show(
    run: Callable[[TurnEvents], TurnResult | None],
    app_ctx: AppContext,
    as_json: bool,
    usage: bool = False,
    unnamed: bool = False,
    output: Output | None = None,
) -> None:
    """Run a one-shot turn: the reply alone on stdout (or one JSON object, or what `output`
    keeps of it: the JSON document of `--schema`, a fenced block of `-x`), tools on stderr."""
    from koogcli.services.turn import TurnEvents
    from koogcli.ui.reply import ReplyWriter, Silent, turn_handlers

    chat_settings = app_ctx.settings.chat
    writer = (
        Silent()
        if as_json or (output is not None and not output.whole)
        else ReplyWriter(
            markdown=chat_settings.markdown,
            reflows=render.terminal_reflows(chat_settings.terminal_reflows),
        )
    )
    events = TurnEvents(
        **turn_handlers(writer, render.note, render.warning),
        approve=render.tool_approver(writer=writer),
    )
    try:
        result = run(events)
    except BaseException:
        writer.abort()
        raise
    if result is None:
        return
    writer.finish(result.reply)
    if output is not None and not output.whole and not as_json:
        render.out(output.shown(result.reply))
    cut = views.cut_reply(result.finish_reason, app_ctx.settings.llm.max_tokens)
    if cut is not None:
        render.warning(cut)
    if as_json:
        from koogcli.ui.views import usage_dict

        render.json_out(
            {
                "session": None if unnamed else result.session,
                "reply": result.reply,
                "model": result.model,
                "usage": usage_dict(result.usage),
                "checkpoint": result.checkpoint,
                "finish_reason": result.finish_reason,
            }
        )
    if usage:
        render.usage_line(result.usage)
