"""The archive (SPEC §4a): other tools' conversations kept as koog sessions, once, and
then only what is new.

Per source file this machine remembers its size, mtime and, for a store of many
conversations, each one's message count and last id: an unchanged file is not opened, an
unchanged conversation not stored again. What is read is appended to the session named
after the tool and the conversation's own id (the name `koog serve` gives that agent's
sessions), only the messages it does not hold by id or by what they say; a branch the
person left becomes a fork of it. A file that changed while it was read is read again
next time. Nothing is ever removed: what the source deletes stays.
"""

from __future__ import annotations

import contextlib
import queue
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from koogcli.core.archive import (
    IMPORTED,
    TOOLS,
    Conversation,
    Report,
    Skipped,
    left_branch,
    new_messages,
    path_text,
)
from koogcli.core.errors import ConflictError, KoogError, UsageError
from koogcli.core.messages import Message
from koogcli.core.names import SessionName
from koogcli.core.ports import FileRead, StoreReader, TranscriptAppender, TranscriptStore
from koogcli.core.tool_ids import normalise
from koogcli.services import tool_identity
from koogcli.services.checkpoints import restore_point
from koogcli.services.context import AppContext

Progress = Callable[[Report], None]
BATCH = 200  # files whose bookkeeping is written in one transaction
# Messages a pass appends in this process before the rest of its transcript is written by
# a process of its own (SQLite: indexing it then runs on the other core).
BACKGROUND_AFTER = 5000
STORERS = 2  # files stored at once


def machine() -> str:
    return socket.gethostname() or "localhost"


def tools_of(source: str) -> list[str]:
    if source == "all":
        return list(TOOLS)
    if source not in TOOLS:
        raise UsageError(f"unknown source {source!r}", hint=f"one of: {', '.join(TOOLS)}, all")
    return [source]


def run(
    ctx: AppContext,
    source: str,
    paths: Sequence[Path] = (),
    dry_run: bool = False,
    memory: bool = True,
    progress: Progress | None = None,
) -> Report:
    """One pass over `source`'s store (`all`: every tool's, in its default place)."""
    places, missing = _places(ctx, source, paths)
    one = _Pass(ctx, dry_run, memory and ctx.settings.long_term_memory.ingestion.enabled)
    one.report.missing += missing
    # Two files are stored at once: one's SQLite indexing and fsyncs (which run without
    # the interpreter's lock) overlap the other's Python, while a third thread reads ahead.
    try:
        with ThreadPoolExecutor(STORERS, thread_name_prefix="archive-store") as pool:
            pending: deque[Future[None]] = deque()
            for read in _read_ahead(places, one.known):
                pending.append(pool.submit(one.store_file, read))
                while len(pending) > STORERS or (pending and pending[0].done()):
                    pending.popleft().result()
                    if progress is not None:
                        progress(one.report)
            while pending:
                pending.popleft().result()
        one.sync_transcript()
        one.flush()
    finally:
        one.finish_transcript()
    return one.report


def _places(
    ctx: AppContext, source: str, paths: Sequence[Path]
) -> tuple[list[tuple[StoreReader, Path]], list[str]]:
    """Where each tool's store is read (refused before anything is opened), and the
    tools with none there."""
    if source == "all" and paths:
        raise UsageError(
            "--from all reads each tool's own place; name one tool to read a path",
            hint="e.g. koog history import --from codex ~/backup/codex",
        )
    stores = ctx.parts.stores()
    places: list[tuple[StoreReader, Path]] = []
    missing: list[str] = []
    for tool in tools_of(source):
        reader = stores[tool]
        roots = list(paths) or [p for p in [reader.default()] if p is not None]
        if not roots and source != "all":
            raise UsageError(
                f"name the {tool} export to read",
                hint=f"koog history import --from {tool} conversations.json",
            )
        if not roots:
            continue  # an export has no place of its own: read when named
        found = [root for root in roots if root.exists()]
        if paths and len(found) < len(roots):
            absent = next(root for root in roots if not root.exists())
            raise UsageError(f"cannot read {absent}: no such file or folder")
        found = [root for root in found if next(iter(reader.files(root)), None) is not None]
        places += [(reader, root) for root in found]
        if not found:
            missing.append(tool)
    return places, missing


@dataclass
class _Read:
    """One source file as read (in the reading thread), for the storing one."""

    path: Path
    before: tuple[int, int] | None  # its size and mtime before it was read; None: unreadable
    unchanged: bool = False
    conversations: list[Conversation] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)


def _read_ahead(
    places: Sequence[tuple[StoreReader, Path]], known: dict[str, FileRead]
) -> Iterator[_Read]:
    """Each file read in a thread of its own, a few ahead of the caller: parsing (Python)
    overlaps storing (SQLite's indexing and fsync run without the interpreter's lock)."""
    ahead: queue.Queue[_Read | BaseException | None] = queue.Queue(maxsize=4)
    stop = threading.Event()

    def reading() -> None:
        try:
            for reader, root in places:
                for path in reader.files(root):
                    if stop.is_set():
                        return
                    ahead.put(_read(reader, path, known))
            ahead.put(None)
        except BaseException as exc:  # handed to the caller, raised there
            ahead.put(exc)

    worker = threading.Thread(target=reading, name="archive-reader", daemon=True)
    worker.start()
    try:
        while (item := ahead.get()) is not None:
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        with contextlib.suppress(queue.Empty):
            while True:  # unblock a reader waiting to put
                ahead.get_nowait()


def _read(reader: StoreReader, path: Path, known: dict[str, FileRead]) -> _Read:
    try:
        before = _stat(path)
    except OSError as exc:
        return _Read(path, None, skipped=[Skipped(str(path), f"cannot read: {exc.strerror}")])
    seen = known.get(path_text(path))
    if seen is not None and (seen.size, seen.mtime_ns) == before:
        return _Read(path, before, unchanged=True)
    found = _Read(path, before)
    try:
        found.conversations = list(reader.read(path, found.skipped))
    except OSError as exc:
        found.skipped.append(Skipped(str(path), f"cannot read: {exc.strerror or exc}"))
    return found


def _stat(path: Path) -> tuple[int, int]:
    """Size and mtime; a database's with its write-ahead log (where new rows wait)."""
    size, mtime = 0, 0
    if path.is_dir():
        for item in path.rglob("*"):
            if item.is_file():
                st = item.stat()
                size, mtime = size + st.st_size, max(mtime, st.st_mtime_ns)
        return size, mtime
    for item in (path, path.with_name(path.name + "-wal")):
        try:
            st = item.stat()
        except OSError:
            continue
        size, mtime = size + st.st_size, max(mtime, st.st_mtime_ns)
    return size, mtime


class _Pass:
    def __init__(self, ctx: AppContext, dry_run: bool, memory: bool) -> None:
        self.ctx = ctx
        self.dry_run = dry_run
        self.memory = memory
        self.report = Report()
        self.here = machine()
        self.known = ctx.storage.archive.files(self.here)
        self.recorded = set(ctx.storage.archive.sources())
        # Sessions' sources and files read, written a batch at a time: a pass killed
        # before its batch is written reads those files again next time, and finds their
        # messages stored (by id).
        self.sources_due: list[tuple[SessionName, Conversation]] = []
        self.files_due: dict[str, FileRead] = {}
        self.lock = threading.Lock()
        self.writing = threading.Lock()  # this process's writes to the database
        self.appended = 0
        self.background: TranscriptAppender | None = None
        self.may_background = True
        self.synced = False

    def transcript(self, count: int) -> TranscriptStore | TranscriptAppender:
        """Where the next `count` messages of the transcript go (under `writing`)."""
        self.appended += count
        if self.background is None and self.may_background and self.appended > BACKGROUND_AFTER:
            self.background = self.ctx.storage.background_transcript()
            self.may_background = self.background is not None
        return self.background or self.ctx.transcript

    def sync_transcript(self) -> None:
        """Every transcript row sent is written before the files are recorded as read."""
        if self.background is not None:
            self.background.sync()
            self.synced = True

    def finish_transcript(self) -> None:
        if self.background is not None:
            with self.writing:
                background, self.background = self.background, None
                self.may_background = False
            background.finish()

    def flush(self) -> None:
        if self.background is not None and not self.synced:
            return  # at the end, once its rows are written
        with self.lock:
            sources, self.sources_due = self.sources_due, []
            files, self.files_due = self.files_due, {}
        with self.writing:
            self.ctx.storage.archive.record(sources)
            self.ctx.storage.archive.read(self.here, files)

    def store_file(self, read: _Read) -> None:
        """What was read of one file, stored; the file remembered as read unless it
        changed meanwhile (then it is read again next time)."""
        self.report.skipped += read.skipped
        if read.unchanged:
            self.report.unchanged += 1
            return
        if read.before is None:
            return
        key = path_text(read.path)
        self.report.files += 1
        self.report.bytes += read.before[0]
        seen = self.known.get(key)
        state: dict[str, object] = dict(seen.state) if seen is not None else {}
        for found in read.conversations:
            mark = [len(found.messages), found.messages[-1].id, len(found.branches)]
            if state.get(found.source_id) == mark:
                continue
            self.store(found)
            state[found.source_id] = mark
        try:
            after = _stat(read.path)
        except OSError:
            return
        if after == read.before and not self.dry_run:
            with self.lock:
                self.files_due[key] = FileRead(read.before[0], read.before[1], state)
                full = len(self.files_due) >= BATCH
            if full:
                self.flush()

    def store(self, found: Conversation) -> None:
        name = SessionName.parse(found.session)
        count, existed = self.append(name, found.messages)
        if count:
            (self.report.grown if existed else self.report.new_sessions).append(name.value)
            self.report.messages += count
        if self.dry_run:
            return
        if count or name.value not in self.recorded:
            with self.lock:
                self.sources_due.append((name, found))
            self.recorded.add(name.value)
        for branch in found.branches:
            # Named by the branch's own first message: the same branch is the same fork
            # whichever branch the person is on now.
            fork = SessionName.parse(f"{name.value[:54]}~b{branch.messages[0].id[:6]}")
            added, had = self.append(fork, [*found.messages[: branch.shared], *branch.messages])
            if added and not had:
                with self.writing:
                    self.ctx.storage.origins.record(fork, name, branch.shared)
                with self.lock:
                    self.sources_due.append((fork, found))
                self.report.forks += 1

    def mend(self, name: SessionName, held: Sequence[Message], written: set[str]) -> None:
        """Imported messages the history holds but the transcript lacks (a writer killed
        with its input unwritten) written to the transcript now."""
        lost = [m for m in held if m.meta.get(IMPORTED) and m.id not in written]
        if lost:
            with self.writing:
                self.transcript(len(lost)).append_turns(name, _turns(lost))

    def append(self, name: SessionName, incoming: Sequence[Message]) -> tuple[int, bool]:
        """(messages added, whether the session existed); read again and retried once if
        a turn wrote it meanwhile."""
        ctx = self.ctx
        for attempt in (1, 2):
            existed = ctx.history.exists(name)
            stored = ctx.history.read(name) if existed else None
            held = stored.messages if stored is not None else []
            # The conversation went on along another branch (a rewind, an edited prompt):
            # the session follows it, and what it left is the fork of that branch.
            kept = left_branch(held, incoming)
            fresh = new_messages(kept, incoming)
            if self.dry_run:
                return len(fresh), existed
            # Which of these messages the transcript holds, asked once: a session's
            # imported ones it lacks are mended, new ones it has are not written twice.
            asked = [*(m.id for m in held if m.meta.get(IMPORTED)), *(m.id for m in fresh)]
            known = existed or ctx.transcript.exists(name)
            written = ctx.transcript.holding(name, asked) if known and asked else set()
            if existed:
                self.mend(name, held, written)
            if not fresh and len(kept) == len(held):
                return 0, existed
            taken = tool_identity.taken(ctx, name, kept, stored=existed)
            fresh = normalise(fresh, taken)
            # The transcript first: a pass killed before the history is written finds
            # these messages missing from it next time, and already in the transcript.
            unwritten = [m for m in fresh if m.id not in written]
            with self.writing:  # one thread at a time: SQLite's busy wait sleeps
                self.transcript(len(unwritten)).append_turns(name, _turns(unwritten))
            revision = stored.revision if stored is not None else 0
            if stored is not None and len(kept) < len(held):  # `rollback --latest` undoes it
                restore_point(ctx, name, "import", messages=held, revision=revision)
            try:
                ctx.history.write(name, [*kept, *fresh], expected_revision=revision)
            except ConflictError:
                if attempt == 2:
                    raise
                continue
            if self.memory:
                from koogcli.services.memory import ingest_turn

                ingest_turn(ctx, name, fresh)
            return len(fresh), existed
        raise AssertionError("unreachable")


def _turns(messages: Sequence[Message]) -> list[tuple[str, list[Message]]]:
    """The messages as turns (each prompt starts one), for the transcript's turn numbers."""
    turns: list[tuple[str, list[Message]]] = []
    for m in messages:
        if m.role == "user" or not turns:
            turns.append((f"archive:{m.id}", []))
        turns[-1][1].append(m)
    return turns


def watch(
    ctx: AppContext,
    source: str,
    paths: Sequence[Path],
    memory: bool,
    each: Callable[[Report], None],
    every: float = 1.0,
    stop: Callable[[], bool] = lambda: False,
    failed: Callable[[KoogError], None] = lambda err: None,
) -> None:
    """Import, then again every `every` seconds, until `stop()` (or Ctrl-C in the caller).
    A pass that fails (the database busy, a store unreadable for a moment) is told to
    `failed` and the next one tries again."""
    while not stop():
        try:
            each(run(ctx, source, paths, memory=memory))
        except UsageError:
            raise
        except KoogError as err:
            failed(err)
        deadline = time.monotonic() + every
        while time.monotonic() < deadline and not stop():
            time.sleep(min(0.2, every))
