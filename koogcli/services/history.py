"""History actions behind `koog history ...`; no printing, no exits."""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import replace as replace_

from koogcli.core.errors import KoogError, UsageError
from koogcli.core.messages import Message, utc_now
from koogcli.core.names import SessionName
from koogcli.core.ports import SessionInfo, SessionSource
from koogcli.core.results import SharedConversation, UsageTotals
from koogcli.core.tool_ids import normalise
from koogcli.core.usage import Usage
from koogcli.services import tool_identity
from koogcli.services.checkpoints import restore_point
from koogcli.services.compose import history_document, parse_history_document
from koogcli.services.context import AppContext


def list_sessions(ctx: AppContext, source: str | None = None) -> list[SessionInfo]:
    """Newest first (by last use); unreadable ones last; forks say where they came from,
    imported sessions their source. `source`: one tool's (`koog`: koog's own) only."""
    found = ctx.history.sessions()
    origins = ctx.storage.origins.all() if found else {}
    sources = ctx.storage.archive.sources() if found else {}
    listed = sorted(
        (
            replace_(
                s,
                forked_from=origins.get(s.name),
                source=sources.get(s.name),
                updated_at=_last_use(s, sources.get(s.name)),
            )
            for s in found
        ),
        key=lambda s: s.updated_at or "",
        reverse=True,
    )
    if source is None:
        return listed
    from koogcli.services.search import check_source

    wanted = check_source(source)
    return [s for s in listed if (s.source.tool if s.source else "koog") == wanted]


def _last_use(s: SessionInfo, source: SessionSource | None) -> str | None:
    """An imported session not used in koog since its import was last used when the
    conversation was (not when it was imported)."""
    if source is None or not source.updated_at or s.updated_at is None:
        return s.updated_at
    if source.imported_at and s.updated_at <= source.imported_at:
        return source.updated_at
    return s.updated_at


def source_of(ctx: AppContext, session: SessionName) -> SessionSource | None:
    return ctx.storage.archive.source(session)


@dataclass(frozen=True, slots=True)
class Forked:
    session: str
    source: str
    at: int  # messages taken from the source
    checkpoint: str | None


def fork(
    ctx: AppContext,
    source: SessionName,
    new: SessionName,
    at: int | None = None,
    checkpoint: str | None = None,
) -> Forked:
    """A new session holding the source's history up to message `at` (1-based, as `history
    show` counts them; default: all), or as it was at a checkpoint. The source is only
    read. A tool call is never cut from its results (§5.4)."""
    _require(ctx, source)
    if ctx.history.exists(new) or ctx.transcript.exists(new) or ctx.checkpoints.headers(new):
        raise UsageError(f"a session named {new.value!r} exists already", hint="pick another name")
    if checkpoint is not None:
        from koogcli.services import checkpoints

        point = checkpoints.show(ctx, checkpoint, source)
        messages, taken = list(point.messages), point.id
        if not messages:
            raise UsageError(
                f"checkpoint {point.id} holds no messages; there is nothing to fork",
                hint="`koog checkpoint list` shows each checkpoint's message count",
            )
    else:
        around: dict[str, Sequence[Message]] = {}

        def check(total: int, before: Sequence[Message], after: Sequence[Message]) -> None:
            _cut(at or 0, total, before, after)
            around.update(before=before, after=after)

        if at is not None and ctx.history.splice(source, new, at, check):
            _inherit(ctx, source, new, at, around["before"], around["after"])
            return Forked(new.value, source.value, at, None)
        messages, taken = ctx.history.read(source).messages, None
    count = len(messages) if at is None else at
    _cut(count, len(messages), messages[:count], messages[count:])
    ctx.history.write(new, messages[:count], expected_revision=0)
    _inherit(ctx, source, new, count, messages[:count], messages[count:], taken is None)
    return Forked(new.value, source.value, count, taken)


def _inherit(
    ctx: AppContext,
    source: SessionName,
    new: SessionName,
    count: int,
    kept: Sequence[Message],
    rest: Sequence[Message],
    current: bool = True,
) -> None:
    """Where the fork came from, and its source's transcript up to the cut (a fork at a
    checkpoint: up to the checkpoint's last message the transcript holds)."""
    from koogcli.services.inherited import copy_transcript

    ctx.storage.origins.record(new, source, count)
    following = rest[0] if rest else None
    copy_transcript(ctx, source, new, kept, following, whole=current and following is None)


def _cut(count: int, total: int, before: Sequence[Message], after: Sequence[Message]) -> None:
    """A fork may take 1 to all of the messages, and never cuts a tool call from its
    results (the model could not be sent such a history, §5.4)."""
    if not 1 <= count <= total:
        raise UsageError(
            f"the session holds {total} messages; cannot fork at {count}",
            hint=f"give --at from 1 to {total}",
        )
    _whole_exchanges(before, after, count)


def _whole_exchanges(kept: Sequence[Message], rest: Sequence[Message], count: int) -> None:
    """Refuse a cut right before a tool result: results always follow their call, so such
    a cut splits an exchange. `kept` may be only the messages just before the cut."""
    if not rest or rest[0].role != "tool":
        return
    calls = [i for i, m in enumerate(kept) if m.tool_calls]
    first = count - len(kept) + (calls[-1] + 1 if calls else 1)
    results = next((i for i, m in enumerate(rest) if m.role != "tool"), len(rest))
    end = f" or at {count + results}" if results < len(rest) else ""
    raise UsageError(
        f"message {count} is inside a tool exchange (its calls are message {first})",
        hint=f"fork at {first - 1}{end}",
    )


def _require(ctx: AppContext, session: SessionName) -> None:
    ctx.require_session(session)


def show(
    ctx: AppContext, session: SessionName, last: int | None = None, transcript: bool = False
) -> list[Message]:
    _require(ctx, session)
    if not transcript and not ctx.history.exists(session):
        # Only a transcript is left (a first turn that failed, or a deleted session): no
        # history to show, as `history list` says (exit 2), and where the messages are.
        from koogcli.core.errors import SessionNotFoundError

        raise SessionNotFoundError(
            f"no session named {session.value!r} (only its transcript is kept)",
            hint=f"`koog history show -s {session.value} --transcript` shows it",
        )
    if last is not None and not transcript:
        from koogcli.core.archive import shown

        return shown(ctx.history.tail(session, last))  # read from the end of a long history
    messages = ctx.transcript.read(session) if transcript else ctx.history.read(session).messages
    if last is not None:
        messages = messages[-last:] if last > 0 else []
    from koogcli.core.archive import shown

    return shown(messages)


def transcript_problems(ctx: AppContext, session: SessionName) -> list[str]:
    """Warnings about the transcript lines the last `show --transcript` skipped."""
    lines = ctx.transcript.unreadable(session)
    if not lines:
        return []
    listed = ", ".join(str(n) for n in lines[:10]) + (" ..." if len(lines) > 10 else "")
    return [
        f"skipped {len(lines)} unreadable line(s) of the transcript of {session.value} "
        f"(line {listed}), most likely torn by a crash or a full disk"
    ]


def clear(ctx: AppContext, session: SessionName) -> int:
    """Empty the chat history (the transcript, an audit log, keeps everything)."""
    _require(ctx, session)
    stored = ctx.history.read(session)
    restore_point(ctx, session, "clear", messages=stored.messages, revision=stored.revision)
    ctx.history.write(session, [], expected_revision=stored.revision)
    return len(stored.messages)


def delete(ctx: AppContext, session: SessionName) -> None:
    """Remove everything of the session at once: history, transcript, checkpoints and
    messages waiting for ingestion (records already in long-term memory stay). It waits
    for a turn running in the session, and no turn starts until it is done."""
    with ctx.turn_lock(session, exclusive=True):
        if ("delete", session.value) in ctx.finished_moves:
            return  # this very delete, left halfway by a stopped koog: done now
        _require(ctx, session)
        ctx.storage.drop_session(session)
        from koogcli.services import agent_files

        agent_files.forget(ctx, session)  # the agent's file journal, with its last session


def rename(ctx: AppContext, old: SessionName, new: SessionName) -> None:
    """Everything of the session moves to the new name at once; an existing name is never
    replaced. It waits for a turn running in either session (the turn lands in the session
    before it moves), and two renames of one session run one after the other: the second
    finds no session to rename (exit 2)."""
    first, second = sorted((old, new), key=lambda name: name.value)
    with ctx.turn_lock(first, exclusive=True), ctx.turn_lock(second, exclusive=True):
        if ("rename", old.value, new.value) in ctx.finished_moves:
            return  # this very rename, left halfway by a stopped koog: done now
        _require(ctx, old)
        if ctx.history.exists(new) or ctx.transcript.exists(new) or ctx.checkpoints.headers(new):
            raise UsageError(
                f"a session named {new.value!r} exists already", hint="pick another name"
            )
        ctx.storage.rename_session(old, new)
        from koogcli.services import agent_files

        agent_files.moved(ctx, old, new)


def older_than(ctx: AppContext, days: float) -> list[SessionName]:
    """Sessions last used more than `days` days ago."""
    from datetime import UTC, datetime, timedelta

    cutoff = (datetime.now(UTC) - timedelta(days=days)).isoformat()
    return [
        SessionName(s.name)
        for s in ctx.history.sessions()
        if s.updated_at and not s.problem and _utc(s.updated_at) < cutoff
    ]


def _utc(stamp: str) -> str:
    from datetime import UTC, datetime

    return datetime.fromisoformat(stamp).astimezone(UTC).isoformat()


def export(ctx: AppContext, session: SessionName) -> dict[str, object]:
    _require(ctx, session)
    stored = ctx.history.read(session)
    return history_document(
        session, stored.messages, stored.revision, stored.updated_at or utc_now()
    )


def shareable(ctx: AppContext, session: SessionName) -> SharedConversation:
    """The history to share, with the redact preprocessors applied again (a history
    imported, or stored before a pattern was configured, holds nothing they hide)."""
    _require(ctx, session)
    stored = ctx.history.read(session)
    messages = ctx.pipeline.redact(stored.messages)
    return SharedConversation(session.value, tuple(messages), stored.updated_at)


@dataclass(frozen=True, slots=True)
class ImportResult:
    session: str
    imported: int
    skipped: int
    total: int


def import_(
    ctx: AppContext, session: SessionName, text: str, source: str, replace: bool = False
) -> ImportResult:
    """Append (or with `replace`, substitute) messages from an export document or a list.

    Messages whose id is already in the session are skipped, so importing twice is harmless.
    """
    # Tool calls that arrive by import were never run here: marked, so rollback does not
    # compensate them unless asked (`--compensate-imported`).
    incoming = [
        replace_(m, meta={**m.meta, "imported": True}) if m.tool_calls else m
        for m in _parse_import(text, source)
    ]
    stored = ctx.history.read(session)
    base = [] if replace else stored.messages
    known = {m.id for m in base}
    # §5.15: ids unique within the session, as a turn's calls get them.
    taken = tool_identity.taken(ctx, session, stored.messages)
    fresh = normalise([m for m in incoming if m.id not in known], taken)
    restore_point(ctx, session, "import", messages=stored.messages, revision=stored.revision)
    ctx.history.write(session, [*base, *fresh], expected_revision=stored.revision)
    return ImportResult(
        session.value, len(fresh), len(incoming) - len(fresh), len(base) + len(fresh)
    )


def _parse_import(text: str, source: str) -> list[Message]:
    try:
        return parse_history_document(text, source)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{source} is not valid JSON (line {exc.lineno}: {exc.msg})") from exc
    except KoogError as exc:
        raise UsageError(exc.message, hint="expected the output of `koog history export`") from exc


def usage_totals(ctx: AppContext, session: SessionName) -> UsageTotals:
    """Tokens the session's model requests used, from the transcript: every answer ever
    received, including those compression or a rollback later removed from the history
    (not those a fork inherited: its source's requests used them)."""
    from koogcli.services.inherited import is_inherited

    entries = ctx.transcript.entries(session) if ctx.transcript.exists(session) else []
    messages = [m for m, turn in entries if not is_inherited(turn)]
    answers = [m for m in messages if m.role == "assistant" and not m.meta.get("cancelled")]
    counted: list[dict[str, object]] = [
        u for m in answers if isinstance(u := m.meta.get("usage"), dict)
    ]
    cached = [
        Usage(_count(u, "prompt_tokens"), cached_tokens=_count(u, "cached_tokens"))
        for u in counted
        if "cached_tokens" in u
    ]
    return UsageTotals(
        len(answers),
        len(counted),
        sum(_count(u, "prompt_tokens") for u in counted),
        sum(_count(u, "completion_tokens") for u in counted),
        functools.reduce(Usage.plus, cached[1:], cached[0]) if cached else None,
    )


def _count(usage: dict[str, object], key: str) -> int:
    value = usage.get(key)
    return value if isinstance(value, int) else 0
