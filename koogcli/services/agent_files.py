"""The files a coding agent's edit tools change, journalled through koog serve and set
back by a rollback (SPEC §6 "The agents' file edits"; the journal's events are
core/agent_edits.py's).

- `note_calls`: a reply's edit calls, before the agent receives them: each file's content
  then (or that it did not exist), kept once per digest.
- `note_results`: the agent's next request carries the calls' results: each file's content
  now, what the call left.
- `plan`: what restoring a history does to each journalled file; a file whose content is
  not what the journal last knew (a shell, a person, an edit koog did not see) is never
  overwritten.
- `apply` and `finish`: the restores are journalled `pending` before the history changes
  and `done` after each file, so a rollback killed at any point is finished by the next
  one, each file once: a file already at its restored content is not written again.

A session's forks share its journal (they share the agent's folder): it is kept under
the family's name.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

from koogcli.core.agent_edits import (
    EDITS_KEY,
    Edit,
    Event,
    FileFate,
    FileLook,
    Journal,
    Move,
    Watch,
    line_changes,
    shown,
)
from koogcli.core.checkpoints import Checkpoint
from koogcli.core.edit_calls import absolute, base_folder, edited_paths, under, working_folder
from koogcli.core.errors import KoogError, LockTimeoutError, UsageError
from koogcli.core.messages import Message, ToolCall, clients_calls, utc_now
from koogcli.core.names import SessionName, family_name
from koogcli.services.context import AppContext


def journal_of(session: SessionName) -> SessionName:
    """The journal a session's edits are in: its family's (`work~2` → `work`)."""
    return SessionName(family_name(session.value))


def watching(watch: Watch, system_prompt: str | None, said: Sequence[Message]) -> Watch:
    """The watch with the folder the agent names in its prompt (the configured root when
    it names none)."""
    texts = [system_prompt or "", *(m.text for m in said[:3] if m.role in ("system", "user"))]
    named = working_folder(texts)
    if named == "/":  # every file of the machine: no folder at all
        named = None
    return Watch(named or watch.folder, watch.max_bytes, watch.refused)


def read(ctx: AppContext, session: SessionName) -> Journal:
    key = journal_of(session)
    if not ctx.agent_files.has_journal(key):
        return Journal()
    return Journal.of([e for e in map(Event.from_dict, ctx.agent_files.events(key)) if e])


def note_calls(
    ctx: AppContext, session: SessionName, calls: Sequence[ToolCall], watch: Watch
) -> None:
    """Journal each file the calls will edit, as it is before the agent runs them."""
    files = ctx.agent_files
    events: list[Event] = []
    now = utc_now()
    member = session.value
    folder = files.real(watch.folder) if watch.folder else ""
    for call in calls:
        base, unknown = base_folder(call, watch.folder)
        for named in edited_paths(call):
            path = absolute(named, base)
            why = watch.refused or unknown or _outside(path, watch, folder)
            if path is None or why:
                events.append(
                    Event("uncovered", path or named, call.id or "", call.name, why=why,
                          session=member)
                )  # fmt: skip
                continue
            path = _within(path, watch.folder or "", folder)
            look = files.look(path, watch.max_bytes)
            if look.problem or (look.exists and look.content is None):
                why = look.problem or _too_large(look.size, watch.max_bytes)
                events.append(
                    Event("uncovered", path, call.id or "", call.name, why=why, session=member)
                )
                continue
            before = files.keep(look.content) if look.content is not None else None
            events.append(
                Event("edit", path, call.id or "", call.name, before=before, at=now,
                      folder=folder, session=member)
            )  # fmt: skip
    if events:
        files.record(journal_of(session), [e.to_dict() for e in events])


def _outside(path: str | None, watch: Watch, real: str) -> str:
    """Why a path is not journalled, by its name alone (links are never followed when it
    is read or written, so a name under the folder stays under it)."""
    if watch.folder is None:
        return "the agent named no working folder ([serve.clients.NAME] root sets one)"
    if path is None:
        return "a relative path"
    if "\0" in path or not (under(path, watch.folder) or under(path, real)):
        return f"outside the working folder {watch.folder}"
    return ""


def _within(path: str, named: str, real: str) -> str:
    """The path under the working folder as the system has it (`/tmp` a link on some
    systems): what is read and written then has no link on its way."""
    if real == named or not under(path, named):
        return path
    return real + path[len(named.rstrip("/")) :]


def _too_large(size: int, limit: int) -> str:
    return f"{size:,} bytes, over [serve] journal_max_bytes ({limit:,})"


def note_results(
    ctx: AppContext, session: SessionName, said: Sequence[Message], watch: Watch
) -> None:
    """The results the agent sends back: each journalled file as its call left it."""
    key = journal_of(session)
    last = max((i for i, m in enumerate(said) if m.role == "assistant"), default=-1)
    answered = {m.tool_call_id for m in said[last + 1 :] if m.role == "tool" and m.tool_call_id}
    if not answered or watch.refused or not ctx.agent_files.has_journal(key):
        return  # no new results (a new prompt): the journal is not read
    waiting = [e for e in read(ctx, session).unseen() if e.call in answered]
    if not waiting:
        return
    files, member = ctx.agent_files, session.value
    events: list[Event] = []
    for edit in waiting:
        look = files.look(edit.path, watch.max_bytes)
        if look.problem or (look.exists and look.content is None):
            why = look.problem or _too_large(look.size, watch.max_bytes)
            events.append(
                Event("uncovered", edit.path, edit.call, edit.tool, why=why, session=member)
            )
            continue
        after = files.keep(look.content) if look.content is not None else None
        before = files.kept(edit.before) if edit.before is not None else None
        added, removed = line_changes(before, look.content)
        events.append(
            Event("edited", edit.path, edit.call, edit.tool, after=after, added=added,
                  removed=removed, at=utc_now(), session=member)
        )  # fmt: skip
    files.record(key, [e.to_dict() for e in events])


# --- rollback ------------------------------------------------------------------------


def client_call_ids(messages: Iterable[Message]) -> set[str]:
    return {c.id for m in messages if clients_calls(m) for c in m.tool_calls if c.id}


def plan(
    ctx: AppContext, session: SessionName, current: Sequence[Message], target: Checkpoint
) -> list[FileFate]:
    """Each journalled file restoring `target` over `current` changes, and what is found."""
    journal = read(ctx, session)
    if not journal.edits and not journal.uncovered:
        return []
    limit = ctx.settings.serve.journal_max_bytes
    now_ids, then_ids = client_call_ids(current), client_call_ids(target.messages)
    mine = journal.of_member(session.value, now_ids | then_ids)
    moves = mine.moves(position_of(target), now_ids, then_ids)
    fates = [_fate(ctx, move, limit) for move in moves]
    removed = now_ids - then_ids
    seen: set[str] = set()
    for event in mine.uncovered:
        if event.call in removed and event.path not in seen:
            seen.add(event.path)
            fates.append(FileFate(event.path, "not covered", event.why))
    return fates


POSITION = "journal_at"  # a restore point's details: how much of the edit journal it follows


def position_of(point: Checkpoint) -> int | None:
    """How much of the journal was written when the point was taken (None: a point from
    before koog kept it)."""
    found = point.details.get(POSITION)
    return found if isinstance(found, int) and not isinstance(found, bool) else None


def _fate(ctx: AppContext, move: Move, limit: int) -> FileFate:
    look = ctx.agent_files.look(move.path, limit)
    now = _state(look)
    if now == _UNKNOWN:
        return FileFate(move.path, "changed", _unreadable(look), move, now)
    if now == move.to:
        return FileFate(move.path, "unchanged", "already as restored", move, now)
    if move.folder and not under(move.path, move.folder):
        why = f"outside the working folder {move.folder}"
        return FileFate(move.path, "changed", why, move, now)
    if now != move.expected:
        kept = ctx.agent_files.kept(move.expected) if move.expected else None
        why = _what_changed(move, look.size, now, kept)
        return FileFate(move.path, "changed", why, move, now)
    if move.to is not None and ctx.agent_files.kept(move.to) is None:
        return FileFate(move.path, "not covered", "its earlier content is not kept", move, now)
    return FileFate(move.path, "remove" if move.to is None else "restore", "", move, now)


_UNKNOWN = "unknown"  # a file that cannot be read within the bound: equal to no digest


def _unreadable(look: FileLook) -> str:
    return look.problem or f"now {look.size:,} bytes, over [serve] journal_max_bytes"


def _state(look: FileLook) -> str | None:
    """A file's digest, None when absent."""
    if not look.exists:
        return None
    return look.digest if look.digest is not None and not look.problem else _UNKNOWN


def _what_changed(move: Move, size: int, now: str | None, kept: bytes | None = None) -> str:
    if now is None:
        return "deleted since the agent's last edit koog saw"
    if move.expected is None:
        return "made again since the agent's last edit koog saw removed it"
    then = f", that edit left {len(kept):,}" if kept is not None else ""
    return f"changed since the agent's last edit koog saw: now {size:,} bytes{then}"


def refuse_changed(fates: Sequence[FileFate]) -> None:
    """A rollback never overwrites a file changed since the journal last saw it: without
    --force it stops, naming each (exit 2), before anything changed."""
    changed = [f for f in fates if f.status == "changed"]
    if changed:
        raise UsageError(
            "the rollback would overwrite files changed outside the agent's edits: "
            + "; ".join(f"{f.path} {f.detail}" for f in changed),
            hint="nothing was rolled back; --force rolls back the conversation and the "
            "other files and leaves these as they are",
        )


def apply(
    ctx: AppContext, session: SessionName, fates: Sequence[FileFate], point: str | None
) -> list[FileFate]:
    """Set each file back (the history is restored already); a changed file is left."""
    done: list[FileFate] = []
    for fate in fates:
        if fate.move is not None and fate.status == "unchanged":  # the journal follows it
            settled = _restore(session, fate.move, point, "done")
            ctx.agent_files.record(journal_of(session), [settled.to_dict()])
        if fate.move is not None and fate.writes:
            done.append(_settle(ctx, session, fate.move, point))
        elif fate.status == "changed":
            done.append(FileFate(fate.path, "left", fate.detail, fate.move, fate.now))
        else:
            done.append(fate)
    return done


def journal_pending(
    ctx: AppContext,
    session: SessionName,
    fates: Sequence[FileFate],
    point: str | None,
    status: str = "pending",
) -> None:
    """Before the history changes: what this rollback will write, so a kill finishes it
    (`cancelled` when the history write failed: they will never be due)."""
    events = [_restore(session, f.move, point, status) for f in fates if f.move and f.writes]
    if events:
        ctx.agent_files.record(journal_of(session), [e.to_dict() for e in events])


def _restore(session: SessionName, move: Move, point: str | None, status: str) -> Event:
    return Event(
        "restore", move.path, move.calls[0] if move.calls else "", before=move.expected,
        after=move.to, point=point or "", status=status, at=utc_now(), folder=move.folder,
        session=session.value,
    )  # fmt: skip


def _settle(ctx: AppContext, session: SessionName, move: Move, point: str | None) -> FileFate:
    """One file set to `move.to`, when it is still what the journal expects (or already
    there: a killed rollback wrote it before recording so)."""
    files, limit = ctx.agent_files, ctx.settings.serve.journal_max_bytes
    look = files.look(move.path, limit)
    now = _state(look)
    status, why = "left", ""
    if now == move.to:
        status = "restored" if move.to is not None else "removed"
    elif now == _UNKNOWN:
        why = _unreadable(look)
    elif now != move.expected:
        why = _what_changed(move, look.size, now)
    elif move.folder and not under(move.path, move.folder):
        why = f"outside the working folder {move.folder}"
    else:
        content = files.kept(move.to) if move.to is not None else None
        try:
            if move.to is not None and content is None:
                raise FileNotFoundError("its earlier content is not kept")
            files.put(move.path, content)
            status = "restored" if move.to is not None else "removed"
        except OSError as exc:  # no permission, a full disk: left, and said
            why = exc.strerror or str(exc)
    settled = _restore(session, move, point, "done" if status != "left" else "left")
    files.record(journal_of(session), [settled.to_dict()])
    return FileFate(move.path, status, why, move)


def finish(ctx: AppContext, session: SessionName) -> list[FileFate]:
    """The restores a killed rollback journalled: each finished once, or cancelled when the
    rollback never restored the history."""
    journal = read(ctx, session)
    if not journal.pending:
        return []
    revision = ctx.history.read(session).revision
    points = {e.point for e in journal.pending}
    done = [  # what the killed rollback did before it was stopped
        FileFate(e.path, "restored" if e.after is not None else "removed",
                 "before the rollback was stopped")
        for e in journal.settled if e.point in points and e.status == "done"
    ]  # fmt: skip
    for event in journal.pending:
        move = Move(event.path, event.before, event.after, (event.call,), event.folder)
        if _never_restored(ctx, session, event.point, revision):
            cancelled = _restore(session, move, event.point, "cancelled")
            ctx.agent_files.record(journal_of(session), [cancelled.to_dict()])
            continue
        done.append(_settle(ctx, session, move, event.point or None))
    return done


def _never_restored(ctx: AppContext, session: SessionName, point: str, revision: int) -> bool:
    """The killed rollback never wrote the history: it is still at the revision the
    rollback's own restore point recorded."""
    if not point:
        return False
    try:
        taken = ctx.checkpoints.get(session, point)
    except KoogError:
        return False
    return taken.details.get("history_revision") == revision


def finish_held(ctx: AppContext, session: SessionName, wait: bool = False) -> list[FileFate]:
    """The file restores a killed rollback journalled, finished under the undo lock (a live
    rollback holds it while it writes its own)."""
    if not ctx.settings.persistence.enabled or not read(ctx, session).pending:
        return []
    try:
        with ctx.undo_lock(session, wait):
            return finish(ctx, session)
    except LockTimeoutError:
        if wait:
            raise
        return []


# --- what people read ----------------------------------------------------------------


def marks(ctx: AppContext, session: SessionName) -> dict[str, list[Edit]]:
    """Each edit call's files, by call id (`why`, `history show`)."""
    if not ctx.agent_files.has_journal(journal_of(session)):
        return {}
    return read(ctx, session).marks()


def marked(ctx: AppContext, session: SessionName, messages: Sequence[Message]) -> list[Message]:
    """The messages with each edit call's files in `meta.file_edits` (`edited notes.txt
    (+3 -1)`), for showing; nothing is stored."""
    edits = marks(ctx, session)
    if not edits:
        return list(messages)
    out: list[Message] = []
    for m in messages:
        found = [shown(e) for c in m.tool_calls for e in edits.get(c.id or "", ())]
        out.append(dataclasses.replace(m, meta={**m.meta, EDITS_KEY: found}) if found else m)
    return out


def forget(ctx: AppContext, session: SessionName) -> None:
    """The journal goes with the session (with the last session of its family)."""
    key = journal_of(session)
    if not ctx.agent_files.has_journal(key):
        return
    others = [n for n in ctx.history.names() if family_name(n) == key.value]
    if not [n for n in others if n != session.value]:
        ctx.agent_files.forget(key)


def point_files(
    ctx: AppContext, session: SessionName, points: Sequence[Checkpoint]
) -> dict[str, list[str]]:
    """For each restore point, the journalled files rolling back to it would change
    (`checkpoint list`): from the journal alone when only this session wrote it, from the
    point's history too when another member of the family did."""
    journal = read(ctx, session) if points else Journal()
    if not journal.edits:
        return {}
    current = client_call_ids(ctx.history.read(session).messages)
    shared = any(e.session not in ("", session.value) for e in journal.events)
    found: dict[str, list[str]] = {}
    for point in points:
        if point.kind != "restore" or not point.readable:
            continue
        position = position_of(point)
        then: set[str] = set()
        if shared or position is None:
            then = client_call_ids(ctx.checkpoints.get(session, point.id).messages)
        mine = journal.of_member(session.value, current | then) if shared else journal
        found[point.id] = [move.path for move in mine.moves(position, current, then)]
    return found


def moved(ctx: AppContext, old: SessionName, new: SessionName) -> None:
    """A renamed session takes its family's journal along (the family keeps it while any
    other member is left)."""
    source, target = journal_of(old), journal_of(new)
    if source != target and ctx.agent_files.has_journal(source):
        ctx.agent_files.copy(source, target)
        forget(ctx, old)
