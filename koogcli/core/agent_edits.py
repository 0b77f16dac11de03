"""The files a coding agent's edit tools change, and what a rollback must do to them
(SPEC §6 "The agents' file edits"). Pure: the journal is read and written by
services/agent_files.py through the AgentFiles port.

koog sees each edit call on its way to the agent (Claude Code `Write` / `Edit` /
`MultiEdit` / `NotebookEdit`, Codex `apply_patch`, opencode `write` / `edit` /
`apply_patch`) and the agent's result in its next request. The journal is a list of
events, oldest first:

- `edit`: a call is about to change `path`; the file's digest then (`before`, None: it
  did not exist).
- `edited`: the agent's result came; the digest the call left (`after`) and the lines it
  added and removed.
- `uncovered`: a call's file koog does not journal (outside the working folder, too
  large), with why.
- `restore`: a rollback set `path` from digest `from` to `to` (status `pending`, then
  `done` or `left`), under the rollback's restore point.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from koogcli.core.edit_calls import under

if TYPE_CHECKING:
    from koogcli.core.names import SessionName

# Where shown messages carry their edit calls' files (never stored).
EDITS_KEY = "file_edits"


@dataclass(frozen=True, slots=True)
class FileLook:
    """A file of an agent's working folder as koog found it: its digest (None: absent),
    size, and content when within the bound asked for."""

    exists: bool
    digest: str | None = None
    size: int = 0
    content: bytes | None = None
    problem: str = ""  # why it could not be read (a folder, no permission), else ""


class AgentFiles(Protocol):
    """The journal of the files agents' edit tools change (core/agent_edits.py), the
    contents it keeps (once per digest) and the files themselves."""

    def record(self, session: SessionName, events: Sequence[Mapping[str, object]]) -> None: ...

    def events(self, session: SessionName) -> list[dict[str, object]]: ...

    def has_journal(self, session: SessionName) -> bool: ...

    def keep(self, content: bytes) -> str:
        """Keep a content once (by its digest), returning the digest."""
        ...

    def kept(self, digest: str) -> bytes | None: ...

    def position(self, session: SessionName) -> int:
        """How much of the journal is written (a restore point keeps it)."""
        ...

    def real(self, path: str) -> str:
        """The path with symbolic links resolved (where the file really is)."""
        ...

    def look(self, path: str, limit: int) -> FileLook:
        """A file, its content read when at most `limit`; no component of its absolute,
        normalised path is followed if it is a symbolic link (a problem is said)."""
        ...

    def put(self, path: str, content: bytes | None) -> None:
        """Replace a file whole (a crash leaves the old or the new), or remove it (None),
        following no symbolic link on its path; OSError when the system refuses."""
        ...

    def forget(self, session: SessionName) -> None:
        """The session's journal, and the contents no other session's journal names."""
        ...

    def copy(self, source: SessionName, target: SessionName) -> None:
        """Append one journal's events to another's (a renamed session takes them)."""
        ...


@dataclass(frozen=True, slots=True)
class Watch:
    """What koog serve journals for an agent session: files under `folder` (the one the
    agent names, else `[serve.clients.NAME] root`), up to `max_bytes` each; none at all,
    each listed with `refused` as why, when the client is not the server's own user."""

    folder: str | None
    max_bytes: int
    refused: str = ""


@dataclass(frozen=True, slots=True)
class Event:
    kind: str  # edit | edited | uncovered | restore
    path: str
    call: str = ""
    tool: str = ""
    before: str | None = None
    after: str | None = None
    why: str = ""
    point: str = ""
    status: str = ""  # a restore's: pending | done | left
    added: int = 0
    removed: int = 0
    at: str = ""
    folder: str = ""  # an edit's: the agent's working folder (paths are shown within it)
    session: str = ""  # the member of the family it happened in (`work~2`)
    offset: int = -1  # where the journal holds it (read back; orders it against points)

    def to_dict(self) -> dict[str, object]:
        data: dict[str, object] = {"kind": self.kind, "path": self.path}
        for name in ("call", "tool", "why", "point", "status", "at", "folder", "session"):
            if getattr(self, name):
                data[name] = getattr(self, name)
        if self.kind in ("edit", "restore"):
            data["before"] = self.before
        if self.kind in ("edited", "restore"):
            data["after"] = self.after
        if self.kind == "edited":
            data["added"], data["removed"] = self.added, self.removed
        return data

    @classmethod
    def from_dict(cls, raw: Mapping[str, object]) -> Event | None:
        """None for a line no koog wrote (a torn or foreign line is skipped)."""
        kind, path = raw.get("kind"), raw.get("path")
        if kind not in ("edit", "edited", "uncovered", "restore") or not isinstance(path, str):
            return None

        def text(name: str) -> str:
            value = raw.get(name, "")
            return value if isinstance(value, str) else ""

        def digest(name: str) -> str | None:
            value = raw.get(name)
            return value if isinstance(value, str) else None

        def count(name: str) -> int:
            value = raw.get(name, 0)
            return value if isinstance(value, int) else 0

        return cls(
            str(kind),
            path,
            text("call"),
            text("tool"),
            digest("before"),
            digest("after"),
            text("why"),
            text("point"),
            text("status"),
            count("added"),
            count("removed"),
            text("at"),
            text("folder"),
            text("session"),
            offset if isinstance(offset := raw.get("_offset", -1), int) else -1,
        )


@dataclass(frozen=True, slots=True)
class Move:
    """One file a rollback sets back (or forward): from the digest the journal last knew
    (`expected`) to `to`; None is "absent"."""

    path: str
    expected: str | None
    to: str | None
    calls: tuple[str, ...]  # the edit calls the move undoes (or redoes), newest first
    folder: str = ""  # the agent's working folder: nothing is written outside it


@dataclass(frozen=True, slots=True)
class FileFate:
    """What a rollback does, or did, to one file."""

    path: str
    status: str  # restore | remove | unchanged | changed | not covered | restored | removed | left
    detail: str = ""
    move: Move | None = None
    now: str | None = None  # the digest found when planned

    @property
    def writes(self) -> bool:
        return self.status in ("restore", "remove")

    def describe(self) -> str:
        detail = f", {self.detail}" if self.detail else ""
        return f"{self.status}: {self.path}{detail}"


@dataclass(frozen=True, slots=True)
class Edit:
    call: str
    tool: str
    path: str
    before: str | None
    after: str | None = None
    seen: bool = False  # the agent's result came (`after` is what the call left)
    added: int = 0
    removed: int = 0
    folder: str = ""


@dataclass
class Journal:
    """A session's events folded: each file's edits in order and the digest the journal
    last knows it at; the files koog left out, with why."""

    events: list[Event] = field(default_factory=list)
    edits: list[Edit] = field(default_factory=list)
    known: dict[str, str | None] = field(default_factory=dict)
    uncovered: list[Event] = field(default_factory=list)
    pending: list[Event] = field(default_factory=list)  # restores a killed rollback left
    settled: list[Event] = field(default_factory=list)  # restores done, left or cancelled

    @classmethod
    def of(cls, events: Sequence[Event]) -> Journal:
        folded = cls(list(events))
        by_call: dict[tuple[str, str], int] = {}
        restores: dict[tuple[str, str], Event] = {}
        for event in events:
            key = (event.call, event.path)
            if event.kind == "edit":
                by_call[key] = len(folded.edits)
                edit = Edit(event.call, event.tool, event.path, event.before, folder=event.folder)
                folded.edits.append(edit)
                folded.known[event.path] = event.before
            elif event.kind == "edited" and key in by_call:
                index = by_call[key]
                edit = folded.edits[index]
                folded.edits[index] = Edit(
                    edit.call, edit.tool, edit.path, edit.before, event.after, True,
                    event.added, event.removed, edit.folder,
                )  # fmt: skip
                folded.known[event.path] = event.after
            elif event.kind == "uncovered":
                folded.uncovered.append(event)
                if key in by_call:  # its result outgrew the bound: seen, not followed
                    edit = folded.edits[by_call[key]]
                    folded.edits[by_call[key]] = Edit(
                        edit.call, edit.tool, edit.path, edit.before, None, True,
                        folder=edit.folder,
                    )  # fmt: skip
            elif event.kind == "restore":
                if event.status == "pending":
                    restores[(event.point, event.path)] = event
                else:
                    restores.pop((event.point, event.path), None)
                    folded.settled.append(event)
                    if event.status == "done":
                        folded.known[event.path] = event.after
        folded.pending = list(restores.values())
        return folded

    def unseen(self) -> list[Edit]:
        """Edits whose result has not come yet."""
        return [e for e in self.edits if not e.seen]

    def of_member(self, session: str, calls: Iterable[str]) -> Journal:
        """The events of one member of a family: its own, and the edits of the calls its
        histories hold (inherited from the session it forked from). Another member's edit
        of a shared file is then a change this one did not make: refused, not undone."""
        held = set(calls)
        return Journal.of(
            [
                e
                for e in self.events
                if e.session in ("", session) or (e.kind != "restore" and e.call in held)
            ]
        )

    def moves(
        self, position: int | None, current: Iterable[str], target: Iterable[str]
    ) -> list[Move]:
        """What restoring a restore point does to each journalled file: each is set to
        what it was when the point was taken (`position`: how much of the journal was
        written then), from what the journal knows it at now. A point taken before this
        journal existed (no position): back to before the earliest edit whose call the
        history loses, or forward to what the newest edit it regains left. Newest file
        first; a file that outgrew the bound is never moved."""
        if position is None:
            return self._by_calls(set(current), set(target))
        lost = {u.path for u in self.uncovered}
        moves: list[Move] = []
        for path in dict.fromkeys(e.path for e in reversed(self.edits)):
            states = self._states(path)
            if path in lost or not states:
                continue
            earlier = [value for offset, value in states if offset < position]
            to = earlier[-1] if earlier else states[0][1]
            expected = self.known.get(path)
            if to == expected:
                continue
            edits = [e for e in self.events if e.kind == "edit" and e.path == path]
            undone = tuple(e.call for e in reversed(edits) if e.offset >= position)
            folder = edits[-1].folder if edits else ""
            moves.append(Move(path, expected, to, undone or (edits[-1].call,), folder))
        return moves

    def _states(self, path: str) -> list[tuple[int, str | None]]:
        """The file's contents in journal order: before each edit, after each result,
        after each restore done."""
        edited = {e.call for e in self.events if e.kind == "edit" and e.path == path}
        states: list[tuple[int, str | None]] = []
        for e in self.events:
            if e.path != path:
                continue
            if e.kind == "edit":
                states.append((e.offset, e.before))
            elif (e.kind == "edited" and e.call in edited) or (
                e.kind == "restore" and e.status == "done"
            ):
                states.append((e.offset, e.after))
        return states

    def _by_calls(self, now: set[str], then: set[str]) -> list[Move]:
        moves: list[Move] = []
        lost = {u.path for u in self.uncovered}
        for path in dict.fromkeys(e.path for e in reversed(self.edits)):
            if path in lost:
                continue
            edits = [e for e in self.edits if e.path == path]
            removed = [e for e in edits if e.call in now and e.call not in then]
            added = [e for e in edits if e.call in then and e.call not in now]
            expected, folder = self.known.get(path), edits[-1].folder
            if removed:
                calls = tuple(e.call for e in reversed(removed))
                moves.append(Move(path, expected, removed[0].before, calls, folder))
            elif added and added[-1].seen:
                calls = tuple(e.call for e in reversed(added))
                moves.append(Move(path, expected, added[-1].after, calls, folder))
        return [m for m in moves if m.to != m.expected]

    def marks(self) -> dict[str, list[Edit]]:
        """Each call's edits, for `why` and `history show`."""
        marks: dict[str, list[Edit]] = {}
        for edit in self.edits:
            marks.setdefault(edit.call, []).append(edit)
        return marks


def line_changes(before: bytes | None, after: bytes | None) -> tuple[int, int]:
    """Lines added and removed from `before` to `after` (a diff's + and -)."""
    import difflib

    old = (before or b"").decode("utf-8", "replace").splitlines()
    new = (after or b"").decode("utf-8", "replace").splitlines()
    added = removed = 0
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(
        None, old, new, autojunk=False
    ).get_opcodes():
        if tag in ("replace", "delete"):
            removed += i2 - i1
        if tag in ("replace", "insert"):
            added += j2 - j1
    return added, removed


def shown(edit: Edit) -> str:
    """`edited notes.txt (+3 -1)` (with a minus sign), the path within the working folder."""
    path, folder = edit.path, edit.folder
    if folder and under(path, folder):
        path = posixpath.relpath(path, folder)
    if not edit.seen:
        return f"editing {path} (the agent's result has not come)"
    if edit.after is None:
        return f"deleted {path}"
    verb = "created" if edit.before is None else "edited"
    return f"{verb} {path} (+{edit.added} \u2212{edit.removed})"
