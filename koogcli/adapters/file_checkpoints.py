"""FileCheckpointStore: checkpoints under `<data>/checkpoints/<session>/`.

Layout and invariants:
- `objects.jsonl` holds every message version once (`{"s": seq, "h": digest, "m": {...}}`),
  append-only. A checkpoint refers to its messages as runs of object seqs, so storing a
  checkpoint costs a few bytes plus the messages never seen before: disk use stays a small
  multiple of the transcript however many checkpoints a session takes.
- Each checkpoint is its own document `<seq>-<id>.json`, written atomically after the
  objects it refers to are appended and synced; a crash leaves no checkpoint pointing at a
  missing object and no torn document. The seq in the name orders them without parsing.
- A document with an unknown format version is listed (so the user sees it) but `get`
  refuses it; an unparsable one is listed as unreadable. Neither is ever rewritten.
- `compensations.json` journals every compensation a rollback planned, with its status,
  rewritten atomically on each change (it is small: one entry per compensated call).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path

from koogcli.adapters import atomic
from koogcli.adapters.documents import parse_messages
from koogcli.adapters.paths import DataDir
from koogcli.core.checkpoints import CHECKPOINT_FORMAT_VERSION, Checkpoint, CompensationEntry
from koogcli.core.errors import CorruptDocumentError, StorageError, UnknownFormatError
from koogcli.core.messages import Message, ToolCall
from koogcli.core.names import SessionName

FORMAT = "koog.checkpoint"
JOURNAL_FORMAT = "koog.compensations"
_STATUSES = ("pending", "running", "done", "failed", "refused")
# <seq>-<id>-<tag>.json; the tag (r: automatic restore point, m: manual, s: step,
# t: tombstone) lets pruning decide from the folder listing without parsing documents.
_NAME = re.compile(r"^(\d{8})-([0-9a-f]+)-([rmst])\.json$")
UNREADABLE = -1


def digest(message: Message) -> str:
    canonical = json.dumps(message.to_dict(), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()[:24]


def encode_runs(seqs: Iterable[int]) -> list[list[int]]:
    runs: list[list[int]] = []
    for s in seqs:
        if runs and runs[-1][1] == s - 1:
            runs[-1][1] = s
        else:
            runs.append([s, s])
    return runs


def decode_runs(runs: Sequence[Sequence[int]]) -> list[int]:
    return [s for start, end in runs for s in range(start, end + 1)]


def _tag(checkpoint: Checkpoint) -> str:
    if checkpoint.kind == "restore":
        return "m" if checkpoint.manual else "r"
    return "s" if checkpoint.kind == "step" else "t"


class _Objects:
    """The in-process view of one session's objects file, refreshed from where it left off."""

    def __init__(self, inode: int = 0) -> None:
        self.inode = inode
        self.offset = 0
        self.by_digest: dict[str, int] = {}
        self.by_seq: dict[int, dict[str, object]] = {}
        self.next_seq = 0


class FileCheckpointStore:
    def __init__(self, data: DataDir, lock_timeout: float = 30.0) -> None:
        self.data = data
        self.lock_timeout = lock_timeout
        self._objects: dict[str, _Objects] = {}
        # Messages are immutable and a turn saves the same objects step after step: hash
        # each once. The message is kept in the value so its id() cannot be reused.
        self._digests: dict[int, tuple[Message, str]] = {}

    def _digest(self, message: Message) -> str:
        cached = self._digests.get(id(message))
        if cached is not None and cached[0] is message:
            return cached[1]
        key = digest(message)
        self._digests[id(message)] = (message, key)
        return key

    def folder(self, session: SessionName) -> Path:
        return self.data.checkpoint_dir(session)

    def save(self, checkpoint: Checkpoint) -> Checkpoint:
        session = SessionName(checkpoint.session)
        folder = self.folder(session)
        with atomic.file_lock(self.data.lock_file(session, "checkpoints"), self.lock_timeout):
            seqs = self._store_objects(session, checkpoint.messages)
            seq = self._max_seq(folder) + 1
            doc = {
                "format": FORMAT,
                "version": CHECKPOINT_FORMAT_VERSION,
                "id": checkpoint.id,
                "session": checkpoint.session,
                "seq": seq,
                "kind": checkpoint.kind,
                "created_at": checkpoint.created_at,
                "reason": checkpoint.reason,
                "label": checkpoint.label,
                "manual": checkpoint.manual,
                "turn_id": checkpoint.turn_id,
                "step": checkpoint.step,
                "output": checkpoint.output,
                "details": checkpoint.details,
                "message_count": len(checkpoint.messages),
                "messages": encode_runs(seqs),
            }
            path = folder / f"{seq:08d}-{checkpoint.id}-{_tag(checkpoint)}.json"
            atomic.write_text(path, json.dumps(doc, ensure_ascii=False) + "\n")
        return replace(checkpoint, seq=seq, message_count=len(checkpoint.messages))

    def headers(self, session: SessionName) -> list[Checkpoint]:
        return [self._read(session, path, with_messages=False) for path in self._files(session)]

    def get(self, session: SessionName, checkpoint_id: str) -> Checkpoint:
        for path in self._files(session):
            match = _NAME.match(path.name)
            if match and match.group(2) == checkpoint_id:
                checkpoint = self._read(session, path, with_messages=True)
                if checkpoint.format_version == UNREADABLE:
                    raise CorruptDocumentError(
                        f"checkpoint {path} is not readable", hint=atomic.CORRUPT_HINT
                    )
                if not checkpoint.readable:
                    raise UnknownFormatError(
                        f"checkpoint {path} has format version {checkpoint.format_version}; "
                        f"this koog reads version {CHECKPOINT_FORMAT_VERSION}",
                        hint="use a newer koog; it is listed but never used or rewritten",
                    )
                return checkpoint
        raise StorageError(f"no checkpoint {checkpoint_id} in session {session.value}")

    def delete(self, session: SessionName, checkpoint_id: str) -> bool:
        for path in self._files(session):
            match = _NAME.match(path.name)
            if match and match.group(2) == checkpoint_id:
                return atomic.remove(path)
        return False

    def sessions(self) -> list[str]:
        root = self.data.root / "checkpoints"
        if not root.is_dir():
            return []
        return sorted(name for name in os.listdir(root) if (root / name).is_dir())

    def prune(self, session: SessionName, keep_last: int) -> int:
        """Keep the newest `keep_last` turn checkpoints (steps and tombstones) and the newest
        `keep_last` automatic restore points; manual ones always stay."""
        files = self._files(session)
        tags = [m.group(3) if (m := _NAME.match(p.name)) else "" for p in files]
        steps = [p for p, t in zip(files, tags, strict=True) if t in ("s", "t")]
        automatic = [p for p, t in zip(files, tags, strict=True) if t == "r"]
        doomed = steps[: max(0, len(steps) - keep_last)]
        doomed += automatic[: max(0, len(automatic) - keep_last)]
        for path in doomed:
            atomic.remove(path)
        return len(doomed)

    def drop(self, session: SessionName) -> None:
        folder = self.folder(session)
        with atomic.file_lock(self.data.lock_file(session, "checkpoints"), self.lock_timeout):
            paths = [*self._files(session), self._objects_file(session), self._journal(session)]
            for path in paths:
                atomic.remove(path)
            self._objects.pop(session.value, None)
            if folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()

    def compensations(self, session: SessionName) -> list[CompensationEntry]:
        path = self._journal(session)
        if not path.exists():
            return []
        raw = atomic.read_json(path)
        try:
            if not isinstance(raw, dict) or raw.get("format") != JOURNAL_FORMAT:
                raise ValueError("not a koog compensation journal")
            if raw.get("version") != 1:
                raise ValueError(f"unknown version {raw.get('version')!r}")
            return [_entry(item) for item in raw["entries"]]
        except (KeyError, TypeError, ValueError) as exc:
            raise CorruptDocumentError(
                f"{path} is not a readable compensation journal: {exc}", hint=atomic.CORRUPT_HINT
            ) from exc

    def record_compensations(
        self, session: SessionName, entries: Sequence[CompensationEntry]
    ) -> None:
        """Add or update entries (by call id and rollback point), durably, before returning."""
        with atomic.file_lock(self.data.lock_file(session, "checkpoints"), self.lock_timeout):
            current = self.compensations(session)
            index = {(e.call.id, e.rollback_point): i for i, e in enumerate(current)}
            for entry in entries:
                key = (entry.call.id, entry.rollback_point)
                if key in index:
                    current[index[key]] = entry
                else:
                    index[key] = len(current)
                    current.append(entry)
            doc = {
                "format": JOURNAL_FORMAT,
                "version": 1,
                "entries": [e.to_dict() for e in current],
            }
            atomic.write_text(self._journal(session), json.dumps(doc, ensure_ascii=False) + "\n")

    # -- internals -------------------------------------------------------------------

    def _journal(self, session: SessionName) -> Path:
        return self.folder(session) / "compensations.json"

    def _files(self, session: SessionName) -> list[Path]:
        folder = self.folder(session)
        if not folder.is_dir():
            return []
        return [folder / n for n in sorted(os.listdir(folder)) if _NAME.match(n)]

    def _max_seq(self, folder: Path) -> int:
        if not folder.is_dir():
            return -1
        seqs = [int(m.group(1)) for n in os.listdir(folder) if (m := _NAME.match(n))]
        return max(seqs, default=-1)

    def _read(self, session: SessionName, path: Path, with_messages: bool) -> Checkpoint:
        match = _NAME.match(path.name)
        assert match is not None
        seq, cid = int(match.group(1)), match.group(2)
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(raw, dict) or raw.get("format") != FORMAT:
                raise ValueError("not a koog checkpoint")
            version = int(raw.get("version", UNREADABLE))
        except (OSError, ValueError, TypeError):
            return Checkpoint(
                cid,
                session.value,
                seq,
                "restore",
                "",
                reason="unreadable",
                format_version=UNREADABLE,
            )
        common = dict(
            id=cid,
            session=session.value,
            seq=seq,
            format_version=version,
            created_at=str(raw.get("created_at", "")),
            label=raw.get("label"),
            kind=raw.get("kind")
            if raw.get("kind") in ("restore", "step", "tombstone")
            else "restore",
            reason=str(raw.get("reason", "")),
            manual=bool(raw.get("manual", False)),
        )
        if version != CHECKPOINT_FORMAT_VERSION:
            return Checkpoint(**common)  # type: ignore[arg-type]
        messages: tuple[Message, ...] = ()
        if with_messages:
            messages = tuple(self._messages(session, raw.get("messages", []), path))
        return Checkpoint(
            **common,  # type: ignore[arg-type]
            messages=messages,
            turn_id=raw.get("turn_id"),
            step=raw.get("step"),
            output=raw.get("output"),
            details=dict(raw.get("details") or {}),
            message_count=int(raw.get("message_count", 0)),
        )

    def _messages(self, session: SessionName, runs: list[list[int]], path: Path) -> list[Message]:
        objects = self._refresh(session)
        try:
            raw = [objects.by_seq[s] for s in decode_runs(runs)]
        except KeyError as exc:
            raise CorruptDocumentError(
                f"checkpoint {path} refers to a missing message {exc}", hint=atomic.CORRUPT_HINT
            ) from exc
        return parse_messages(raw, str(path))

    def _objects_file(self, session: SessionName) -> Path:
        return self.folder(session) / "objects.jsonl"

    def _refresh(self, session: SessionName) -> _Objects:
        path = self._objects_file(session)
        objects = self._objects.setdefault(session.value, _Objects())
        try:
            with path.open("rb") as handle:
                info = os.fstat(handle.fileno())
                if info.st_ino != objects.inode or info.st_size < objects.offset:
                    # Another process dropped the session since: start over from this file.
                    objects = self._objects[session.value] = _Objects(info.st_ino)
                handle.seek(objects.offset)
                chunk = handle.read()
        except FileNotFoundError:
            objects = self._objects[session.value] = _Objects()
            return objects
        except OSError as exc:
            raise StorageError(f"cannot read {path}: {exc.strerror}") from exc
        complete = chunk[: chunk.rfind(b"\n") + 1]  # a torn last line is not ours yet
        for line in complete.splitlines():
            try:
                record = json.loads(line)
                seq, key, message = int(record["s"]), str(record["h"]), record["m"]
            except (ValueError, KeyError, TypeError):
                continue  # a line torn by a crash and later closed off; never referenced
            objects.by_digest[key] = seq
            objects.by_seq[seq] = message
            objects.next_seq = max(objects.next_seq, seq + 1)
        objects.offset += len(complete)
        return objects

    def _store_objects(self, session: SessionName, messages: Sequence[Message]) -> list[int]:
        objects = self._refresh(session)
        path = self._objects_file(session)
        seqs: list[int] = []
        lines: list[str] = []
        for message in messages:
            key = self._digest(message)
            seq = objects.by_digest.get(key)
            if seq is None:
                seq = objects.next_seq
                objects.next_seq += 1
                data = message.to_dict()
                objects.by_digest[key] = seq
                objects.by_seq[seq] = data
                lines.append(json.dumps({"s": seq, "h": key, "m": data}, ensure_ascii=False))
            seqs.append(seq)
        if lines:
            prefix = "" if _ends_with_newline(path) else "\n"
            atomic.append_text(path, prefix + "\n".join(lines) + "\n")
            self._refresh(session)
        return seqs


def _entry(item: object) -> CompensationEntry:
    if not isinstance(item, dict):
        raise TypeError("an entry is not an object")
    call, status = item["call"], item["status"]
    if status not in _STATUSES or not isinstance(call, dict):
        raise ValueError(f"bad entry status {status!r}")
    function = call["function"]
    name, arguments = function["name"], function["arguments"]
    point = item.get("rollback_point")
    if not isinstance(name, str) or not isinstance(arguments, str):
        raise TypeError("a call's name and arguments must be strings")
    return CompensationEntry(
        ToolCall(call.get("id") if isinstance(call.get("id"), str) else None, name, arguments),
        status,
        point if isinstance(point, str) else None,
        str(item.get("at", "")),
    )


def _ends_with_newline(path: Path) -> bool:
    try:
        with path.open("rb") as handle:
            handle.seek(-1, os.SEEK_END)
            return handle.read(1) == b"\n"
    except FileNotFoundError:
        return True
    except OSError:
        return True  # empty file
