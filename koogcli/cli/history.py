"""`koog history list|show|search|clear|delete|export|import|fork`."""

from __future__ import annotations

from pathlib import Path

import typer

from koogcli.cli.confirm import confirm_destructive
from koogcli.cli.options import globals_of, session_option
from koogcli.core.errors import UsageError
from koogcli.core.messages import local_time
from koogcli.ui import archive_views, render

app = typer.Typer(help="Inspect and manage stored chat histories.", no_args_is_help=True)

SESSION = session_option()
YES = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation.")
SOURCE = typer.Option(
    None,
    "--source",
    metavar="S",
    help="One source's sessions: koog, claude-code, codex, opencode, llm, chatgpt, claude-ai.",
)


@app.command("list")
def list_(
    ctx: typer.Context,
    limit: int | None = typer.Option(
        None, "--limit", min=1, metavar="N", help="The N most recently used sessions only."
    ),
    source: str | None = SOURCE,
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """List sessions, newest first, with their source and first prompt."""
    from koogcli.services import history
    from koogcli.ui import views

    sessions = history.list_sessions(globals_of(ctx).build(), source)[:limit]
    if as_json:
        render.json_out([views.session_dict(s) for s in sessions])
    elif sessions:
        forks = any(s.forked_from for s in sessions)
        imported = any(s.source for s in sessions)
        rows = [
            (
                s.name,
                "?" if s.problem else str(s.messages),
                local_time(s.updated_at) if s.updated_at else "unreadable",
                *([archive_views.source_title(s.source)] * imported),
                *([f"{s.forked_from[0]} @{s.forked_from[1]}" if s.forked_from else ""] * forks),
                render.one_line(s.preview, 50),
            )
            for s in sessions
        ]
        heads = (
            "SESSION",
            "MESSAGES",
            "LAST USED",
            *(["SOURCE"] * imported),
            *(["FORKED FROM"] * forks),
            "FIRST MESSAGE",
        )
        render.out(render.table(rows, heads))
    else:
        render.note("no sessions yet; start one with `koog chat`")
    for s in sessions:
        if s.problem:
            render.warning(s.problem)


@app.command()
def search(
    ctx: typer.Context,
    query: list[str] = typer.Argument(
        ..., metavar="QUERY", help="The words to find (all of them; quoted or not)."
    ),
    session: str | None = typer.Option(
        None, "--session", "-s", metavar="NAME", help="Search this session only."
    ),
    limit: int = typer.Option(20, "--limit", min=1, max=1000, metavar="N", help="At most N hits."),
    source: str | None = SOURCE,
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Find a message in any session's transcript, newest first."""
    from koogcli.services import search
    from koogcli.ui import found_views

    app_ctx = globals_of(ctx).build()
    name = app_ctx.session(session) if session else None
    words = " ".join(query)
    found = search.search(app_ctx, words, name, limit, source)
    if as_json:
        render.json_out([found_views.found_dict(f) for f in found])
    elif found:
        # found_lines shows each line visibly; the marks are koog's own reverse video.
        render.out("\n".join(found_views.found_lines(found, render.emphasis())), styled=True)
    else:
        render.note(f"nothing in the transcripts holds {words!r}")


@app.command()
def show(
    ctx: typer.Context,
    session: str | None = SESSION,
    last: int | None = typer.Option(
        None, "--last", min=1, metavar="N", help="Only the last N messages (1 or more)."
    ),
    fmt: str = typer.Option(
        "text", "--format", metavar="FORMAT", help="text, markdown, json or jsonl."
    ),
    transcript: bool = typer.Option(False, "--transcript", help="Every message ever exchanged."),
    as_json: bool = typer.Option(False, "--json", help="The same as --format json."),
    tokens: bool = typer.Option(
        False, "--tokens", help="Estimated tokens per message, and the next request's size."
    ),
    whole_system: bool = typer.Option(
        False, "--system", help="A long system prompt whole (text and markdown fold it)."
    ),
) -> None:
    """Show a session's stored history (or its full transcript)."""
    from koogcli.services import agent_files, history
    from koogcli.ui import views

    fmt = "json" if as_json else fmt
    if fmt not in ("text", "markdown", "json", "jsonl"):
        raise UsageError(f"unknown --format {fmt!r}", hint="use text, markdown, json or jsonl")
    app_ctx = globals_of(ctx).build()
    name = app_ctx.session(session)
    messages = agent_files.marked(app_ctx, name, history.show(app_ctx, name, last, transcript))
    for problem in history.transcript_problems(app_ctx, name) if transcript else []:
        render.warning(problem)
    size = None
    if tokens:
        from koogcli.services import budget

        size = budget.session_size(app_ctx, name)
    counts = size.of_messages(messages) if size else None
    origin = history.source_of(app_ctx, name) if fmt in ("text", "markdown") else None
    if origin is not None:
        render.out(archive_views.source_header(origin))
    if messages or fmt == "json":
        render.out(render.format_messages(messages, fmt, counts, fold_system=not whole_system))
    elif fmt in ("text", "markdown"):
        render.note(views.empty_history(name.value))
    if size:
        line = f"next request: {size.describe()} for {size.model}"
        if fmt in ("text", "markdown"):
            render.out(line)
        else:
            render.note(line)


@app.command()
def clear(ctx: typer.Context, session: str | None = SESSION, yes: bool = YES) -> None:
    """Empty a session's chat history (its transcript is kept)."""
    from koogcli.services import history

    app_ctx = globals_of(ctx).build()
    name = app_ctx.session(session)
    confirm_destructive(f"clear the history of session {name.value!r}", yes)
    count = history.clear(app_ctx, name)
    render.note(f"cleared {count} messages from {name.value}")


@app.command()
def delete(
    ctx: typer.Context,
    names: list[str] | None = typer.Argument(None, metavar="[NAME]...", help="Sessions."),
    session: str | None = SESSION,
    older_than: float | None = typer.Option(
        None, "--older-than", min=0, metavar="DAYS", help="Every session unused for DAYS."
    ),
    yes: bool = YES,
) -> None:
    """Delete sessions: history, transcript and checkpoints."""
    from koogcli.core.names import SessionName
    from koogcli.services import history

    app_ctx = globals_of(ctx).build()
    chosen = [SessionName.parse(n) for n in [*(names or []), *([session] if session else [])]]
    if older_than is not None:
        chosen += [n for n in history.older_than(app_ctx, older_than) if n not in chosen]
    elif not chosen:
        chosen = [app_ctx.session(None)]
    if not chosen:
        render.note(f"no session is older than {older_than:g} days")
        return
    finished = {n for n in chosen if ("delete", n.value) in app_ctx.moves_finished()}
    for name in chosen:
        if name not in finished:  # a delete a stopped koog left halfway is done now
            app_ctx.require_session(name)
    listed = ", ".join(repr(n.value) for n in chosen)
    confirm_destructive(f"delete session(s) {listed} with their transcripts", yes)
    for name in chosen:
        history.delete(app_ctx, name)
        render.note(f"deleted session {name.value}")


@app.command()
def rename(
    ctx: typer.Context,
    old: str = typer.Argument(..., metavar="OLD"),
    new: str = typer.Argument(..., metavar="NEW"),
) -> None:
    """Rename a session; never over an existing one.

    History, transcript and checkpoints move together.
    """
    from koogcli.core.names import SessionName
    from koogcli.services import history

    app_ctx = globals_of(ctx).build()
    history.rename(app_ctx, SessionName.parse(old), SessionName.parse(new))
    render.note(f"renamed session {old} to {new}")


@app.command()
def fork(
    ctx: typer.Context,
    new: str = typer.Argument(..., metavar="NEW", help="The new session's name."),
    session: str | None = SESSION,
    at: int | None = typer.Option(
        None, "--at", min=1, metavar="N", help="Up to message N, as history show counts."
    ),
    checkpoint: str | None = typer.Option(
        None, "--checkpoint", metavar="ID", help="As the history was at this checkpoint."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Start a new session from a session's history up to a message."""
    from koogcli.core.names import SessionName
    from koogcli.services import history

    if at is not None and checkpoint is not None:
        raise UsageError("give --at or --checkpoint, not both")
    app_ctx = globals_of(ctx).build()
    done = history.fork(app_ctx, app_ctx.session(session), SessionName.parse(new), at, checkpoint)
    if as_json:
        render.json_out(
            {
                "session": done.session,
                "source": done.source,
                "at": done.at,
                "checkpoint": done.checkpoint,
            }
        )
    else:
        render.note(f"forked {done.source} at message {done.at} into {done.session}")


@app.command()
def export(
    ctx: typer.Context,
    session: str | None = SESSION,
    output: Path | None = typer.Option(
        None, "-o", "--output", metavar="FILE", help="Write to FILE, not stdout."
    ),
    fmt: str = typer.Option(
        "json", "--format", metavar="FORMAT", help="json (to import again), markdown or html."
    ),
) -> None:
    """Export a session as JSON, Markdown or one HTML page.

    HTML is one self-contained page (works offline). Markdown and HTML pass the redact
    preprocessors: nothing they hide is written.
    """
    from koogcli.services import history

    if fmt not in ("json", "markdown", "html"):
        raise UsageError(f"unknown --format {fmt!r}", hint="use json, markdown or html")
    app_ctx = globals_of(ctx).build()
    name = app_ctx.session(session)
    if fmt == "json":
        document = history.export(app_ctx, name)
        text = render.json_text(document) + "\n"
        count = len(document["messages"])  # type: ignore[arg-type]
    else:
        from koogcli.ui import export as shared_page

        shared = history.shareable(app_ctx, name)
        text = (shared_page.to_html if fmt == "html" else shared_page.to_markdown)(shared)
        count = len(shared.messages)
    if output is None:
        render.out(text)
        return
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot write {output}: {exc.strerror}") from exc
    render.note(f"exported {count} messages to {output}")


@app.command("import")
def import_(
    ctx: typer.Context,
    sources: list[str] | None = typer.Argument(
        None,
        metavar="[FILE|-|PATH...]",
        help="Export document, JSON Lines, or an OpenAI messages array; - for stdin. "
        "With --from: the tool's store or export (default: where the tool keeps it).",
    ),
    session: str | None = SESSION,
    replace: bool = typer.Option(
        False, "--replace", help="Replace the history instead of appending (asks first)."
    ),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask before replacing."),
    tool: str | None = typer.Option(
        None,
        "--from",
        metavar="SOURCE",
        help="Another tool's own history: claude-code, codex, opencode, llm, chatgpt, "
        "claude-ai, or all.",
    ),
    watch: bool = typer.Option(False, "--watch", help="With --from: keep importing changes."),
    interval: float | None = typer.Option(
        None,
        "--interval",
        min=0.2,
        max=3600,
        metavar="SECONDS",
        help="With --watch: how often (default 1).",
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="With --from: say, change nothing."),
    no_memory: bool = typer.Option(
        False, "--no-memory", help="With --from: no long-term memory ingestion."
    ),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Import messages, or (--from) another tool's conversations.

    Appends (ids already present are skipped) unless --replace, which asks before it
    replaces a history that has messages (`koog rollback --latest` undoes it). With
    --from, each conversation becomes a session named after the tool and its id; a second
    run adds only what is new.
    """
    app_ctx = globals_of(ctx).build()
    if tool is not None:
        if replace or session:
            raise UsageError("--from names its own sessions; drop -s/--replace")
        from koogcli.cli.archive import run_import

        if interval is not None and not watch:
            raise UsageError("--interval goes with --watch")
        every = 1.0 if interval is None else interval
        run_import(app_ctx, tool, sources or [], watch, dry_run, not no_memory, as_json, every)
        return
    if watch or dry_run or no_memory:
        raise UsageError("--watch, --dry-run and --no-memory go with --from SOURCE")
    if interval is not None:
        raise UsageError("--interval goes with --from SOURCE --watch")
    if sources and len(sources) > 1:
        raise UsageError("give one file to import (or --from SOURCE for a tool's store)")
    source = sources[0] if sources else "-"
    from koogcli.services import history

    name = app_ctx.session(session)
    if source == "-":
        text, label = render.read_stdin(), "<stdin>"
    else:
        try:
            text, label = Path(source).read_text(encoding="utf-8"), source
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"cannot read {source}: {exc}") from exc
    if replace and app_ctx.history.exists(name):
        count = len(app_ctx.history.read(name).messages)
        if count:
            confirm_destructive(
                f"replace the {count} messages of session {name.value!r} with {label}", yes
            )
    result = history.import_(app_ctx, name, text, label, replace)
    if as_json:
        render.json_out(
            {"session": result.session, "imported": result.imported, "skipped": result.skipped}
        )
        return
    render.note(
        f"imported {result.imported} messages into {result.session} "
        f"({result.skipped} already present, {result.total} in history)"
    )
