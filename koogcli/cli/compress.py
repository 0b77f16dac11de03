"""`koog compress`."""

from __future__ import annotations

import typer

from koogcli.cli.options import complete_strategies, globals_of, session_option, with_endpoint
from koogcli.ui import render, views


def compress(
    ctx: typer.Context,
    session: str | None = session_option(),
    strategy: str | None = typer.Option(
        None,
        "--strategy",
        metavar="STRATEGY",
        help="whole, last-n, since, chunked, facts or per-system.",
        autocompletion=complete_strategies,
    ),
    last: int | None = typer.Option(
        None, "--last", min=1, metavar="N", help="last-n: messages to summarise."
    ),
    since: str | None = typer.Option(
        None, "--since", metavar="ISO-8601", help="since: an ISO-8601 time."
    ),
    chunk_size: int | None = typer.Option(
        None, "--chunk-size", min=1, metavar="N", help="chunked: messages per chunk."
    ),
    concept: list[str] = typer.Option(
        [],
        "--concept",
        metavar="NAME:DESCRIPTION[:KIND]",
        help="facts: NAME:DESCRIPTION[:single|multiple], repeatable.",
    ),
    fallback: str | None = typer.Option(
        None, "--fallback", metavar="STRATEGY", help="facts: strategy when none found."
    ),
    no_preserve_memory: bool = typer.Option(
        False, "--no-preserve-memory", help="Let memory messages be summarised too."
    ),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Print the would-be history; write nothing."
    ),
    model: str | None = typer.Option(
        None,
        "-m",
        "--model",
        metavar="MODEL",
        help="Model that writes the summaries (over compression.model).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON report."),
) -> None:
    """Replace a session's history with a summary.

    `koog rollback --latest` undoes it.
    """
    from koogcli.services.compression import CompressRequest, StrategyChoice
    from koogcli.services.compression import compress as run

    app_ctx = with_endpoint(globals_of(ctx).build())  # the model chat would summarise with
    choice = StrategyChoice(strategy, last, since, chunk_size, tuple(concept), fallback)
    request = CompressRequest(
        app_ctx.session(session),
        choice,
        False if no_preserve_memory else None,
        dry_run,
        model=model,
    )
    with render.ProgressBar("summarising") as bar:
        result = run(app_ctx, request, bar.update)
    for problem in result.problems:
        render.warning(problem)
    if as_json:
        render.json_out(views.compress_dict(result))
        return
    if dry_run:
        render.out(render.format_messages(result.after, "text"))
    render.note(views.compress_line(result))
