"""How the archive reads to people and scripts: an import's summary and progress, an
imported session's source (`history list`, `history show`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from koogcli.core.messages import local_time
from koogcli.ui.render import visible

if TYPE_CHECKING:
    from koogcli.core.archive import Report
    from koogcli.core.ports import SessionSource


def source_dict(source: SessionSource) -> dict[str, object]:
    return {
        "tool": source.tool,
        "id": source.source_id,
        "file": source.file,
        "cwd": source.cwd,
        "model": source.model,
        "started_at": source.started_at,
        "updated_at": source.updated_at,
        "imported_at": source.imported_at,
    }


def source_title(source: SessionSource | None) -> str:
    from koogcli.core.archive import TITLES

    return TITLES.get(source.tool, source.tool) if source is not None else "koog"


def source_header(source: SessionSource) -> str:
    """`history show`'s first line for an imported session: the tool, its id, the folder,
    the model and the times (one line, shown as text)."""
    words = [f"{source_title(source)} {source.source_id}"]
    if source.cwd:
        words.append(f"in {source.cwd}")
    if source.model:
        words.append(source.model)
    if source.started_at:
        span = local_time(source.started_at)
        if source.updated_at and source.updated_at != source.started_at:
            span += f" to {local_time(source.updated_at)}"
        words.append(span)
    words.append(f"from {source.file}")
    return visible("imported: " + " · ".join(words)) + "\n"


def archive_dict(report: Report, dry_run: bool) -> dict[str, object]:
    """`history import --from --json`."""
    return {
        "dry_run": dry_run,
        "sessions": {"new": report.new_sessions, "grown": report.grown},
        "messages": report.messages,
        "forks": report.forks,
        "files": {"read": report.files, "unchanged": report.unchanged, "bytes": report.bytes},
        "skipped": [{"where": s.where, "why": s.why} for s in report.skipped],
        "not_found": report.missing,
    }


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def archive_line(report: Report, dry_run: bool) -> str:
    """One summary line of an import."""
    verb = "would import" if dry_run else "imported"
    sessions = len(report.new_sessions) + len(report.grown)
    words = [
        f"{verb} {_count(report.messages, 'message')} into {_count(sessions, 'session')} "
        f"({len(report.new_sessions)} new, {len(report.grown)} grown"
        + (f", {_count(report.forks, 'fork')}" if report.forks else "")
        + ")",
        f"from {_count(report.files, 'file')} ({report.bytes / 1e6:.1f} MB)",
    ]
    if report.unchanged:
        words.append(f"{report.unchanged:,} unchanged")
    if report.missing:
        words.append("nothing found for " + ", ".join(report.missing))
    if report.skipped:
        words.append(f"{len(report.skipped):,} skipped")
    return "; ".join(words)


def archive_skipped(report: Report, shown: int = 20) -> list[str]:
    """Every line that could not be read, named in one line, each file once (`FILE: line
    3 (not JSON), line 9 (torn...)`; the first `shown`, then how many more); nothing when
    none was skipped."""
    if not report.skipped:
        return []
    files: dict[str, list[str]] = {}
    for s in report.skipped[:shown]:
        where, _, line = s.where.rpartition(":")
        if where and line.isdigit():
            files.setdefault(where, []).append(f"line {line} ({s.why})")
        else:
            files.setdefault(s.where, []).append(s.why)
    named = "; ".join(f"{where}: {', '.join(items)}" for where, items in files.items())
    more = len(report.skipped) - shown
    return [f"skipped {len(report.skipped)}: {named}" + (f", and {more} more" if more > 0 else "")]


def archive_progress(report: Report) -> str:
    sessions = len(report.new_sessions) + len(report.grown)
    return (
        f"importing: {report.files} files, {report.bytes / 1e6:.1f} MB, "
        f"{sessions} sessions, {report.messages} messages"
    )
