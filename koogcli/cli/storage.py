"""`koog storage status|migrate`: where sessions are kept, and the schema's version."""

from __future__ import annotations

import typer

from koogcli.cli.options import globals_of
from koogcli.ui import render

app = typer.Typer(
    help="The storage backend: files (default) or PostgreSQL ([storage] url).",
    no_args_is_help=True,
)
JSON = typer.Option(False, "--json", help="Print JSON.")


@app.command()
def status(ctx: typer.Context, as_json: bool = JSON) -> None:
    """Show the backend, where it is, its schema version and what it holds."""
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
    counts = info.get("counts")
    if isinstance(counts, dict):
        lines += [f"{name.replace('_', ' ')}: {count}" for name, count in counts.items()]
    render.out("\n".join(lines))


@app.command()
def migrate(ctx: typer.Context) -> None:
    """Bring the PostgreSQL schema to this koog's version (one machine at a time)."""
    from koogcli.services import storage

    applied = storage.migrate(globals_of(ctx).build())
    if applied:
        render.out(
            f"applied migration{'s' if len(applied) > 1 else ''} {', '.join(map(str, applied))}"
        )
    else:
        render.note("the schema is current; nothing to do")
