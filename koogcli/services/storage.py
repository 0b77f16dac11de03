"""`koog storage`: which backend holds the sessions, its schema version, migrations and
copies between backends."""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import groupby
from typing import TYPE_CHECKING

from koogcli.core.errors import StorageError, UsageError
from koogcli.core.names import SessionName

if TYPE_CHECKING:
    from koogcli.core.ports import MemoryStore, StorageBackend
    from koogcli.services.context import AppContext


def status(ctx: AppContext) -> dict[str, object]:
    """Backend, where it is (never a password), schema version and counts."""
    return ctx.storage.describe()


def migrate(ctx: AppContext) -> list[int]:
    """The schema versions applied now; empty when the schema was current already."""
    return ctx.storage.migrate()


@dataclass
class CopyReport:
    """What a copy wrote; zero everywhere on a rerun of a finished copy."""

    sessions: int = 0
    histories: int = 0
    transcript_messages: int = 0
    checkpoints: int = 0
    compensations: int = 0
    memory_records: int = 0
    memory_vectors: int = 0
    skipped: list[str] = field(default_factory=list)  # what could not be copied, and why


def copy(ctx: AppContext, source: str, target: str) -> CopyReport:
    """Copy every session (history, transcript, checkpoints, compensation journal, pending
    ingestion) and long-term memory (records with their vectors) from one backend to another. Idempotent: what the target has already is
    left alone, so a copy killed halfway and run again completes without duplicates. The
    history goes last, so a session is listed at the target once the rest is there."""
    from koogcli.services.compose import open_backend

    if source == target:
        raise UsageError("--from and --to name the same storage")
    settings = ctx.settings.storage
    src = open_backend(source, settings.db_schema, settings.language)
    dst = open_backend(target, settings.db_schema, settings.language)
    report = CopyReport()
    _copy_memory(src.memory(ctx.warn), dst.memory(ctx.warn), report)
    names = sorted(
        set(src.history.names()) | set(src.transcript.sessions()) | set(src.checkpoints.sessions())
    )
    for name in names:
        session = SessionName(name)
        report.sessions += 1
        _copy_checkpoints(src, dst, session, report)
        _copy_transcript(src, dst, session, report)
        pending = src.pending().load(session)
        if pending and dst.pending().load(session) != pending:
            dst.pending().save(session, pending)
        if src.history.exists(session):
            stored = src.history.read(session)
            there = dst.history.read(session) if dst.history.exists(session) else None
            if there is None or (there.revision, there.messages, there.updated_at) != (
                stored.revision,
                stored.messages,
                stored.updated_at,
            ):
                dst.history.put(session, stored.messages, stored.revision, stored.updated_at or "")
                report.histories += 1
    return report


def _copy_memory(src: MemoryStore, dst: MemoryStore, report: CopyReport) -> None:
    """Records keep their ids, times and metadata, and their order; vectors follow their
    records in batches per model."""
    have = {r.id for r in dst.records()}
    records = [r for r in src.records() if r.id not in have]
    for start in range(0, len(records), 500):
        report.memory_records += len(dst.add(records[start : start + 500]))
    stored = {(rid, model) for rid, model, _ in dst.vectors()}
    missing = [(rid, model, v) for rid, model, v in src.vectors() if (rid, model) not in stored]
    for model in dict.fromkeys(model for _, model, _ in missing):
        pairs = [(rid, v) for rid, m, v in missing if m == model]
        for start in range(0, len(pairs), 500):
            dst.put_vectors(model, pairs[start : start + 500])
        report.memory_vectors += len(pairs)


def _copy_checkpoints(
    src: StorageBackend, dst: StorageBackend, session: SessionName, report: CopyReport
) -> None:
    have = {c.id for c in dst.checkpoints.headers(session)}
    for header in src.checkpoints.headers(session):
        if header.id in have:
            continue
        try:
            checkpoint = src.checkpoints.get(session, header.id)
        except StorageError as err:  # unreadable or of another version: never guessed at
            report.skipped.append(f"{session.value}: checkpoint {header.id}: {err.message}")
            continue
        dst.checkpoints.put(checkpoint)
        report.checkpoints += 1
    journal = src.checkpoints.compensations(session)
    there = {(e.call.id, e.rollback_point): e for e in dst.checkpoints.compensations(session)}
    missing = [e for e in journal if there.get((e.call.id, e.rollback_point)) != e]
    if missing:
        dst.checkpoints.record_compensations(session, missing)
        report.compensations += len(missing)


def _copy_transcript(
    src: StorageBackend, dst: StorageBackend, session: SessionName, report: CopyReport
) -> None:
    """Appends what the target lacks; a target transcript that is not a prefix of the
    source's is left alone and reported (two different sessions of one name)."""
    entries = src.transcript.entries(session)
    there = dst.transcript.entries(session)
    if entries[: len(there)] != there:
        report.skipped.append(f"{session.value}: the target's transcript differs; left as it is")
        return
    for turn, group in groupby(entries[len(there) :], key=lambda e: e[1]):
        messages = [m for m, _turn in group]
        dst.transcript.append(session, messages, turn)
        report.transcript_messages += len(messages)


@dataclass
class PruneReport:
    sessions: int = 0
    checkpoints: int = 0


def prune(ctx: AppContext, older_than_days: float) -> PruneReport:
    """Step checkpoints and tombstones older than the given days (turns long finished or
    abandoned), and the stored messages nothing refers to after that. Restore points stay:
    they are the user's undo history (`koog checkpoint delete` removes those)."""
    from datetime import UTC, datetime, timedelta

    before = (datetime.now(UTC) - timedelta(days=older_than_days)).isoformat()
    report = PruneReport()
    for name in sorted(set(ctx.history.names()) | set(ctx.checkpoints.sessions())):
        report.sessions += 1
        report.checkpoints += ctx.checkpoints.prune_steps(SessionName(name), before)
    return report
