"""`koog storage status|migrate`: where sessions are kept, and the schema's version."""

from __future__ import annotations

import typer

from koogcli.cli.options import globals_of
from koogcli.ui import render

app = typer.Typer(
    help="Where sessions and memory live: files or PostgreSQL.",
    no_args_is_help=True,
)
JSON = typer.Option(False, "--json", help="Print JSON.")


@app.command()
def status(ctx: typer.Context, as_json: bool = JSON) -> None:
    """Backend, location, schema version and counts."""
    from koogcli.services import storage

    info = storage.status(globals_of(ctx).build())
    if as_json:
        render.json_out(info)
        return
    lines = [f"backend: {info['backend']}", f"where:   {info['where']}"]
    if info["backend"] == "postgresql":
        lines.append(f"schema:  {info['schema']} (PostgreSQL {info['server_version']})")
        version, ours = info["schema_version"], info["program_schema_version"]
        state = "current" if version == ours else f"this koog uses version {ours}"
        lines.append(f"version: {version} ({'not created yet' if not version else state})")
        vector = info.get("pgvector")
        lines.append(
            f"vectors: pgvector {vector} (HNSW)" if vector else "vectors: no pgvector (full-text)"
        )
    counts = info.get("counts")
    if isinstance(counts, dict):
        lines += [f"{name.replace('_', ' ')}: {count}" for name, count in counts.items()]
    render.out("\n".join(lines))


@app.command()
def migrate(ctx: typer.Context) -> None:
    """Bring storage up to this koog's version.

    PostgreSQL: schema migrations, one machine at a time, each in a transaction. Files: an
    older data dir (checkpoints/, transcripts/, memory-pending/) moved into koog.sqlite3.
    """
    from koogcli.services import storage

    app_ctx = globals_of(ctx).build()
    applied = storage.migrate(app_ctx)
    if app_ctx.storage.describe().get("backend") == "files":
        render.note(
            "moved the older layout (checkpoints/, transcripts/, memory-pending/) into koog.sqlite3"
            if applied
            else "the data dir is in this koog's layout: nothing to migrate"
        )
    elif applied:
        render.out(
            f"applied migration{'s' if len(applied) > 1 else ''} {', '.join(map(str, applied))}"
        )
    else:
        render.note("the schema is current; nothing to do")


@app.command("copy")
def copy_(
    ctx: typer.Context,
    source: str = typer.Option(..., "--from", metavar="URL_OR_DIR", help="Copy from here."),
    target: str = typer.Option(..., "--to", metavar="URL_OR_DIR", help="Copy to here."),
    as_json: bool = JSON,
) -> None:
    """Copy sessions, checkpoints and memory between backends.

    A data dir or a postgresql:// URL at each end. What the target has already is kept, so
    a copy that was interrupted completes when run again, without duplicates.
    """
    from dataclasses import asdict

    from koogcli.services import storage

    report = storage.copy(globals_of(ctx).build(), source, target)
    if as_json:
        render.json_out(asdict(report))
        return
    render.out(
        f"{_count(report.sessions, 'session')}; copied {report.histories} histories, "
        f"{report.transcript_messages} transcript messages, {report.checkpoints} checkpoints, "
        f"{report.compensations} compensation entries, {report.memory_records} memory "
        f"records and {report.memory_vectors} vectors"
    )
    for line in report.skipped:
        render.warning(line)


@app.command()
def prune(
    ctx: typer.Context,
    older_than: float = typer.Option(
        ..., "--older-than", metavar="DAYS", min=0, help="Age of what is removed."
    ),
    as_json: bool = JSON,
) -> None:
    """Remove old step checkpoints and unreferenced messages.

    Restore points stay; `koog checkpoint delete` removes those.
    """
    from dataclasses import asdict

    from koogcli.services import storage

    report = storage.prune(globals_of(ctx).build(), older_than)
    if as_json:
        render.json_out(asdict(report))
        return
    render.out(
        f"removed {_count(report.checkpoints, 'step checkpoint')} in "
        f"{_count(report.sessions, 'session')}"
    )


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")
