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

import os
import socket
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from koogcli.core.archive import TOOLS, Conversation, Report, Skipped, new_messages
from koogcli.core.errors import ConflictError, UsageError
from koogcli.core.messages import Message
from koogcli.core.names import SessionName
from koogcli.core.ports import FileRead, StoreReader
from koogcli.core.tool_ids import normalise
from koogcli.services import tool_identity
from koogcli.services.context import AppContext

Progress = Callable[[Report], None]


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
    stores = ctx.parts.stores()
    one = _Pass(ctx, dry_run, memory and ctx.settings.long_term_memory.ingestion.enabled)
    for tool in tools_of(source):
        reader = stores[tool]
        roots = list(paths) or [p for p in [reader.default()] if p is not None]
        if not roots and source != "all":
            raise UsageError(
                f"name the {tool} export to read",
                hint=f"koog history import --from {tool} conversations.json",
            )
        found_any = False
        for root in roots:
            if not root.exists():
                if paths:
                    raise UsageError(f"cannot read {root}: no such file or folder")
                continue
            found_any = True
            for path in reader.files(root):
                one.file(reader, path)
                if progress is not None:
                    progress(one.report)
        if not found_any:
            one.report.missing.append(tool)
    return one.report


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

    def file(self, reader: StoreReader, path: Path) -> None:
        key = str(path)
        try:
            before = _stat(path)
        except OSError as exc:
            self.report.skipped.append(Skipped(key, f"cannot read: {exc.strerror}"))
            return
        seen = self.known.get(key)
        if seen is not None and (seen.size, seen.mtime_ns) == before:
            self.report.unchanged += 1
            return
        self.report.files += 1
        self.report.bytes += before[0]
        skipped: list[Skipped] = []
        state: dict[str, object] = dict(seen.state) if seen is not None else {}
        try:
            conversations: Iterable[Conversation] = reader.read(path, skipped)
            for found in conversations:
                mark = [len(found.messages), found.messages[-1].id, len(found.branches)]
                if state.get(found.source_id) == mark:
                    continue
                self.store(found)
                state[found.source_id] = mark
        except OSError as exc:
            skipped.append(Skipped(key, f"cannot read: {exc.strerror or exc}"))
        self.report.skipped += skipped
        try:
            after = _stat(path)
        except OSError:
            return
        if after == before and not self.dry_run:  # else read again next time
            self.ctx.storage.archive.read(self.here, key, FileRead(before[0], before[1], state))

    def store(self, found: Conversation) -> None:
        name = SessionName.parse(found.session)
        count, existed = self.append(name, found.messages)
        if count:
            (self.report.grown if existed else self.report.new_sessions).append(name.value)
            self.report.messages += count
        if self.dry_run:
            return
        if count or name.value not in self.recorded:
            self.ctx.storage.archive.record(name, found)
            self.recorded.add(name.value)
        for number, branch in enumerate(found.branches, start=1):
            fork = SessionName.parse(f"{name.value[:58]}~b{number}")
            added, had = self.append(fork, [*found.messages[: branch.shared], *branch.messages])
            if added and not had:
                self.ctx.storage.origins.record(fork, name, branch.shared)
                self.ctx.storage.archive.record(fork, found)
                self.report.forks += 1

    def append(self, name: SessionName, incoming: Sequence[Message]) -> tuple[int, bool]:
        """(messages added, whether the session existed); read again and retried once if
        a turn wrote it meanwhile."""
        ctx = self.ctx
        for attempt in (1, 2):
            existed = ctx.history.exists(name)
            stored = ctx.history.read(name) if existed else None
            held = stored.messages if stored is not None else []
            fresh = new_messages(held, incoming)
            if not fresh or self.dry_run:
                return len(fresh), existed
            taken = tool_identity.taken(ctx, name, held, stored=existed)
            fresh = normalise(fresh, taken)
            try:
                revision = stored.revision if stored is not None else 0
                ctx.history.write(name, [*held, *fresh], expected_revision=revision)
            except ConflictError:
                if attempt == 2:
                    raise
                continue
            ctx.transcript.append_turns(name, _turns(fresh))
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
) -> None:
    """Import, then again every `every` seconds, until `stop()` (or Ctrl-C in the caller)."""
    while not stop():
        each(run(ctx, source, paths, memory=memory))
        deadline = time.monotonic() + every
        while time.monotonic() < deadline and not stop():
            time.sleep(min(0.2, every))


def home_relative(path: str) -> str:
    home = os.path.expanduser("~")
    return "~" + path[len(home) :] if home != "/" and path.startswith(home + "/") else path
