"""FileCheckpointStore: checkpoints under `<data>/checkpoints/<session>/`.

Layout and invariants:
- `objects.jsonl` holds every message version once (adapters/checkpoint_objects.py). A
  checkpoint refers to its messages as runs of object seqs plus a digest checked on load,
  so storing a checkpoint costs a few bytes plus the messages never seen before: disk use
  stays a small multiple of the transcript however many checkpoints a session takes.
  Pruning compacts the objects file to what live checkpoints refer to.
- Each checkpoint is its own document `<seq>-<id>.json`, written atomically after the
  objects it refers to are appended and synced; a crash leaves no checkpoint pointing at a
  missing object and no torn document. The seq in the name orders them without parsing.
  Step checkpoints skip the fsyncs (the turn's next step, its store and its tombstone are
  synced and supersede them): a killed process loses nothing the kernel already has.
- A document with an unknown format version is listed (so the user sees it) but `get`
  refuses it; an unparsable or wrongly typed one is listed as unreadable. Neither is ever
  rewritten.
- `compensations.jsonl` journals every compensation a rollback planned, with its status
  (adapters/compensation_journal.py).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from koogcli.adapters import atomic
from koogcli.adapters import compensation_journal as journal
from koogcli.adapters.checkpoint_objects import ObjectFile, decode_runs, encode_runs
from koogcli.adapters.documents import parse_messages
from koogcli.adapters.message_digests import digest
from koogcli.adapters.paths import DataDir
from koogcli.core.checkpoints import CHECKPOINT_FORMAT_VERSION, Checkpoint, CompensationEntry
from koogcli.core.errors import CorruptDocumentError, StorageError, UnknownFormatError
from koogcli.core.messages import Message
from koogcli.core.names import SessionName

if TYPE_CHECKING:
    from koogcli.adapters.document_schema import CheckpointDoc

FORMAT = "koog.checkpoint"

# <seq>-<id>-<tag>.json; the tag (r: automatic restore point, m: manual, s: step,
# t: tombstone) lets pruning decide from the folder listing without parsing documents.
_NAME = re.compile(r"^(\d{8})-([0-9a-f]+)-([rmst])\.json$")
UNREADABLE = -1


def _tag(checkpoint: Checkpoint) -> str:
    if checkpoint.kind == "restore":
        return "m" if checkpoint.manual else "r"
    return "s" if checkpoint.kind == "step" else "t"


class FileCheckpointStore:
    def __init__(self, data: DataDir, lock_timeout: float = 30.0) -> None:
        self.data = data
        self.lock_timeout = lock_timeout
        self._objects: dict[str, ObjectFile] = {}

    def _object_file(self, session: SessionName) -> ObjectFile:
        objects = self._objects.get(session.value)
        if objects is None:
            objects = self._objects[session.value] = ObjectFile(self._objects_file(session))
        return objects

    def folder(self, session: SessionName) -> Path:
        return self.data.checkpoint_dir(session)

    def save(self, checkpoint: Checkpoint) -> Checkpoint:
        session = SessionName(checkpoint.session)
        with atomic.file_lock(self.data.lock_file(session, "checkpoints"), self.lock_timeout):
            seq = self._max_seq(self.folder(session)) + 1
            self._write(checkpoint, seq)
        return replace(checkpoint, seq=seq, message_count=len(checkpoint.messages))

    def put(self, checkpoint: Checkpoint) -> None:
        session = SessionName(checkpoint.session)
        with atomic.file_lock(self.data.lock_file(session, "checkpoints"), self.lock_timeout):
            if not any(self._id_of(p) == checkpoint.id for p in self._files(session)):
                self._write(checkpoint, checkpoint.seq)

    def _write(self, checkpoint: Checkpoint, seq: int) -> None:
        """The objects it refers to first (synced), then its document; under the lock."""
        session = SessionName(checkpoint.session)
        # A step checkpoint is superseded by the turn's next step, its tombstone or the
        # store, which are synced: it needs no fsync of its own (issue 12).
        durable = checkpoint.kind != "step"
        seqs, combined = self._object_file(session).store(checkpoint.messages, digest, durable)
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
            "digest": combined,
        }
        path = self.folder(session) / f"{seq:08d}-{checkpoint.id}-{_tag(checkpoint)}.json"
        atomic.write_text(path, json.dumps(doc, ensure_ascii=False) + "\n", sync=durable)

    @staticmethod
    def _id_of(path: Path) -> str | None:
        match = _NAME.match(path.name)
        return match.group(2) if match else None

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
        objects = self._object_file(session)
        if doomed and objects.due_for_compaction(self._compaction_marker(session)):
            self.compact(session)
        return len(doomed)

    def prune_steps(self, session: SessionName, before: str, batch: int = 1000) -> int:
        """Oldest first (a turn's steps before its tombstone), then the objects file is
        compacted to what the remaining checkpoints refer to."""
        from datetime import datetime

        cutoff = datetime.fromisoformat(before)
        removed = 0
        for path in self._files(session):
            match = _NAME.match(path.name)
            if not match or match.group(3) not in ("s", "t"):
                continue
            doc = self._document(path)
            if doc is None or datetime.fromisoformat(doc["created_at"]) >= cutoff:
                continue
            removed += atomic.remove(path)
        if removed:
            self.compact(session)
        return removed

    def compact(self, session: SessionName) -> int:
        """Drop the objects no checkpoint refers to any more; returns how many."""
        with atomic.file_lock(self.data.lock_file(session, "checkpoints"), self.lock_timeout):
            referenced: set[int] = set()
            for path in self._files(session):
                doc = self._document(path)
                if doc is None:  # unreadable or newer: keep everything, lose nothing
                    return 0
                referenced.update(decode_runs(doc["messages"]))
            return self._object_file(session).compact(referenced, self._compaction_marker(session))

    def drop(self, session: SessionName) -> None:
        folder = self.folder(session)
        with atomic.file_lock(self.data.lock_file(session, "checkpoints"), self.lock_timeout):
            paths = [
                *self._files(session),
                self._objects_file(session),
                self._journal(session),
                self._compaction_marker(session),
            ]
            for path in paths:
                atomic.remove(path)
            self._objects.pop(session.value, None)
            if folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()

    def rename(self, old: SessionName, new: SessionName) -> None:
        """The whole folder moves; documents are found by folder, so none is rewritten."""
        with atomic.file_lock(self.data.lock_file(old, "checkpoints"), self.lock_timeout):
            atomic.rename(self.folder(old), self.folder(new))
            self._objects.pop(old.value, None)

    def compensations(self, session: SessionName) -> list[CompensationEntry]:
        return journal.read(self._journal(session))

    def record_compensations(
        self, session: SessionName, entries: Sequence[CompensationEntry], durable: bool = True
    ) -> None:
        journal.append(self._journal(session), entries, durable)

    # -- internals -------------------------------------------------------------------

    def _journal(self, session: SessionName) -> Path:
        return self.folder(session) / "compensations.jsonl"

    def _compaction_marker(self, session: SessionName) -> Path:
        return self.folder(session) / "objects.compacted"

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

    def _document(self, path: Path) -> CheckpointDoc | None:
        """The validated document; None when it is unreadable, wrongly typed or of another
        format version (listed, never used)."""
        from pydantic import ValidationError

        from koogcli.adapters.document_schema import CHECKPOINT_DOC

        try:
            raw = json.loads(atomic.read_bytes(path))
            if not isinstance(raw, dict) or raw.get("format") != FORMAT:
                return None
            if raw.get("version") != CHECKPOINT_FORMAT_VERSION:
                return None
            return CHECKPOINT_DOC.validate_python(raw)
        except (StorageError, OSError, ValueError, RecursionError, ValidationError):
            return None

    def _read(self, session: SessionName, path: Path, with_messages: bool) -> Checkpoint:
        match = _NAME.match(path.name)
        assert match is not None
        seq, cid = int(match.group(1)), match.group(2)
        doc = self._document(path)
        if doc is None:
            return _unusable(path, cid, session, seq)
        messages: tuple[Message, ...] = ()
        if with_messages:
            raw = self._object_file(session).resolve(
                doc["messages"], doc["message_count"], doc.get("digest"), path
            )
            messages = tuple(parse_messages(raw, str(path)))
        return Checkpoint(
            id=cid,
            session=session.value,
            seq=seq,
            kind=doc["kind"],
            created_at=doc["created_at"],
            messages=messages,
            reason=doc["reason"],
            label=doc["label"],
            manual=doc["manual"],
            turn_id=doc["turn_id"],
            step=doc["step"],
            output=doc["output"],
            details=dict(doc["details"]),
            message_count=doc["message_count"],
        )

    def _objects_file(self, session: SessionName) -> Path:
        return self.folder(session) / "objects.jsonl"


def _unusable(path: Path, cid: str, session: SessionName, seq: int) -> Checkpoint:
    """The header of a document koog will list but never use: another format version (its
    plain fields shown as far as they are readable) or unreadable."""
    try:
        raw = json.loads(atomic.read_bytes(path))
    except (StorageError, OSError, ValueError, RecursionError):
        raw = None
    version = raw.get("version") if isinstance(raw, dict) else None
    if (
        not isinstance(raw, dict)
        or raw.get("format") != FORMAT
        or not _is_int(version)
        or version == CHECKPOINT_FORMAT_VERSION  # this version, but wrongly typed
    ):
        return Checkpoint(
            cid, session.value, seq, "restore", "", reason="unreadable", format_version=UNREADABLE
        )
    assert isinstance(version, int)

    def text(key: str) -> str | None:
        value = raw.get(key)
        return value if isinstance(value, str) else None

    kind = raw.get("kind")
    return Checkpoint(
        cid,
        session.value,
        seq,
        kind if kind in ("restore", "step", "tombstone") else "restore",
        text("created_at") or "",
        reason=text("reason") or "unreadable",
        label=text("label"),
        manual=raw.get("manual") is True,
        turn_id=text("turn_id"),
        step=text("step"),
        format_version=version,
    )


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
