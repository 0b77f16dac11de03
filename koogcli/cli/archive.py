"""`koog history import --from SOURCE`: other tools' histories into the archive (SPEC §4a).
Parses, calls services/archive.py, renders: a progress line on a terminal, one summary
line otherwise, every skipped line named. Exit 1 when anything was skipped."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from koogcli.core.archive import Report
from koogcli.core.errors import KoogError, UsageError
from koogcli.services.archive import run, watch
from koogcli.services.context import AppContext
from koogcli.ui import archive_views as views
from koogcli.ui import render


def run_import(
    ctx: AppContext,
    source: str,
    paths: list[str],
    keep_watching: bool,
    dry_run: bool,
    memory: bool,
    as_json: bool,
    interval: float = 1.0,
) -> None:
    places = [Path(p).expanduser().absolute() for p in paths]  # the origin names the file
    if keep_watching:
        if dry_run:
            raise UsageError("--watch imports; drop --dry-run")
        _watch(ctx, source, places, memory, as_json, interval)
        return
    terminal = render.is_tty(sys.stderr) and not as_json
    report = run(ctx, source, places, dry_run, memory, _progress if terminal else None)
    if terminal:
        sys.stderr.write("\r\x1b[K")
    if as_json:
        render.json_out(views.archive_dict(report, dry_run))
    else:
        render.note(views.archive_line(report, dry_run))
        for line in views.archive_skipped(report):
            render.warning(line)
    if report.skipped:
        raise typer.Exit(1)


def _failed(err: KoogError) -> None:
    render.warning(f"import failed, trying again: {err.message}")


def _progress(report: Report) -> None:
    sys.stderr.write("\r\x1b[K" + views.archive_progress(report))
    sys.stderr.flush()


def _watch(
    ctx: AppContext, source: str, places: list[Path], memory: bool, as_json: bool, every: float
) -> None:
    """Until Ctrl-C (exit 0): each pass that changed something says so."""
    first = [True]

    def each(report: Report) -> None:
        if as_json:  # a JSON document a line
            if report.changed or report.skipped or first[0]:
                render.out(render.json_text(views.archive_dict(report, False), indent=None))
        elif report.changed or report.skipped or first[0]:
            render.note(views.archive_line(report, False))
            for line in views.archive_skipped(report):
                render.warning(line)
        first[0] = False

    try:
        watch(ctx, source, places, memory, each, every, failed=_failed)
    except KeyboardInterrupt:
        raise typer.Exit(0) from None
