"""FileCheckpointStore: checkpoints under `<data>/checkpoints/<session>/`.

Layout and invariants:
- `objects.jsonl` holds every message version once (adapters/checkpoint_objects.py). A
  checkpoint refers to its messages as runs of object seqs plus a digest checked on load,
  so storing a checkpoint costs a few bytes plus the messages never seen before: disk use
  stays a small multiple of the transcript however many checkpoints a session takes.
  Pruning compacts the objects file to what live checkpoints refer to.
- The checkpoint documents are lines of `checkpoints.jsonl` (adapters/checkpoint_pack.py),
  each appended after the objects it refers to are appended and synced; a crash leaves no
  checkpoint pointing at a missing object. Step checkpoints skip the fsyncs (the turn's
  next step, its store and its tombstone are synced and supersede them): a killed process
  loses nothing the kernel already has. Reading every checkpoint of a session (is a turn
  interrupted?) is one read of one file.
- Earlier versions wrote a document per checkpoint, `<seq>-<id>-<tag>.json`. The first write
  to such a folder moves them into checkpoints.jsonl. `00000000-0-m.json` (PACKED_MARKER) is
  a document of format version 2 that tells an older koog, which only reads the separate
  documents, that the folder holds checkpoints it cannot read: it lists it, refuses to
  restore it and never compacts the objects file under it. Documents an older koog writes
  there later are moved in by the next write, numbered after the others.
- A document with an unknown format version is listed (so the user sees it) but `get`
  refuses it; a wrongly typed one is listed as unreadable. Neither is ever rewritten.
- `compensations.jsonl` journals every compensation a rollback planned, with its status
  (adapters/compensation_journal.py).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from koogcli.adapters import atomic
from koogcli.adapters import compensation_journal as journal
from koogcli.adapters.checkpoint_docs import FORMAT, UNREADABLE, seq_of, unusable, valid
from koogcli.adapters.checkpoint_objects import ObjectFile, decode_runs
from koogcli.adapters.checkpoint_pack import CheckpointPack
from koogcli.adapters.documents import parse_messages
from koogcli.adapters.message_digests import digests
from koogcli.adapters.paths import DataDir
from koogcli.core.checkpoints import CHECKPOINT_FORMAT_VERSION, Checkpoint, CompensationEntry
from koogcli.core.errors import CorruptDocumentError, StorageError, UnknownFormatError
from koogcli.core.messages import Message
from koogcli.core.names import SessionName

# <seq>-<id>-<tag>.json, a document per file as earlier versions wrote them (the tag: r
# automatic restore point, m manual, s step, t tombstone).
_NAME = re.compile(r"^(\d{8})-([0-9a-f]+)-([rmst])\.json$")
PACK = "checkpoints.jsonl"
PACKED_MARKER = "00000000-0-m.json"
MARKER_VERSION = 2


class FileCheckpointStore:
    def __init__(self, data: DataDir, lock_timeout: float = 30.0) -> None:
        self.data = data
        self.lock_timeout = lock_timeout
        self._objects: dict[str, ObjectFile] = {}
        self._packs: dict[str, CheckpointPack] = {}

    def _object_file(self, session: SessionName) -> ObjectFile:
        objects = self._objects.get(session.value)
        if objects is None:
            objects = self._objects[session.value] = ObjectFile(self._objects_file(session))
        return objects

    def _pack(self, session: SessionName) -> CheckpointPack:
        pack = self._packs.get(session.value)
        if pack is None:
            pack = self._packs[session.value] = CheckpointPack(self.folder(session) / PACK)
        pack.refresh()
        return pack

    def folder(self, session: SessionName) -> Path:
        return self.data.checkpoint_dir(session)

    def save(self, checkpoint: Checkpoint) -> Checkpoint:
        session = SessionName(checkpoint.session)
        with atomic.file_lock(self.data.lock_file(session, "checkpoints"), self.lock_timeout):
            pack = self._packed(session)
            seq = pack.max_seq() + 1
            self._write(pack, checkpoint, seq)
        return replace(checkpoint, seq=seq, message_count=len(checkpoint.messages))

    def put(self, checkpoint: Checkpoint) -> None:
        session = SessionName(checkpoint.session)
        with atomic.file_lock(self.data.lock_file(session, "checkpoints"), self.lock_timeout):
            pack = self._packed(session)
            if checkpoint.id not in pack.docs:
                self._write(pack, checkpoint, checkpoint.seq)

    def _write(self, pack: CheckpointPack, checkpoint: Checkpoint, seq: int) -> None:
        """The objects it refers to first (synced), then its document; under the lock."""
        session = SessionName(checkpoint.session)
        # A step checkpoint is superseded by the turn's next step, its tombstone or the
        # store, which are synced: it needs no fsync of its own (issue 12).
        durable = checkpoint.kind != "step"
        runs, combined = self._object_file(session).store(checkpoint.messages, digests, durable)
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
            "messages": runs,
            "digest": combined,
        }
        pack.append([doc], sync=durable)

    def _packed(self, session: SessionName) -> CheckpointPack:
        """The session's pack with every separate document of this version moved into it
        (see the module docstring); under the lock."""
        pack = self._pack(session)
        loose = self._files(session)
        if pack.exists and not loose:
            return pack
        docs = [
            {
                "format": FORMAT,
                "version": CHECKPOINT_FORMAT_VERSION,
                **doc,
                "id": entry.cid,
                "session": session.value,
                "seq": entry.seq,
            }
            for entry in self._loose(session, pack)
            if (doc := valid(entry.raw)) is not None  # others: listed, never rewritten
        ]
        if not pack.exists:  # the marker first: no pack is ever there without it
            marker = self.folder(session) / PACKED_MARKER
            atomic.write_text(marker, json.dumps(_marker(session)) + "\n")
            pack.rewrite([json.dumps(d, ensure_ascii=False).encode() for d in docs])
        elif docs:
            pack.append(docs, sync=True)
        for path in loose:  # moved now, or by a process that stopped before removing them
            if self._id_of(path) in pack.docs:
                atomic.remove(path)
        return pack

    @staticmethod
    def _id_of(path: Path) -> str | None:
        match = _NAME.match(path.name)
        return match.group(2) if match else None

    def headers(self, session: SessionName) -> list[Checkpoint]:
        return [self._checkpoint(session, e, with_messages=False) for e in self._entries(session)]

    def get(self, session: SessionName, checkpoint_id: str) -> Checkpoint:
        for entry in self._entries(session):
            if entry.cid != checkpoint_id:
                continue
            checkpoint = self._checkpoint(session, entry, with_messages=True)
            if checkpoint.format_version == UNREADABLE:
                raise CorruptDocumentError(
                    f"checkpoint {entry.where} is not readable", hint=atomic.CORRUPT_HINT
                )
            if not checkpoint.readable:
                raise UnknownFormatError(
                    f"checkpoint {entry.where} has format version {checkpoint.format_version}; "
                    f"this koog reads version {CHECKPOINT_FORMAT_VERSION}",
                    hint="use a newer koog; it is listed but never used or rewritten",
                )
            return checkpoint
        raise StorageError(f"no checkpoint {checkpoint_id} in session {session.value}")

    def delete(self, session: SessionName, checkpoint_id: str) -> bool:
        with atomic.file_lock(self.data.lock_file(session, "checkpoints"), self.lock_timeout):
            pack = self._pack(session)
            if checkpoint_id in pack.docs:
                pack.delete([checkpoint_id])
                return True
            return any(
                atomic.remove(p) for p in self._files(session) if self._id_of(p) == checkpoint_id
            )

    def sessions(self) -> list[str]:
        root = self.data.root / "checkpoints"
        if not root.is_dir():
            return []
        return sorted(name for name in os.listdir(root) if (root / name).is_dir())

    def prune(self, session: SessionName, keep_last: int) -> int:
        """Keep the newest `keep_last` turn checkpoints (steps and tombstones) and the newest
        `keep_last` automatic restore points; manual ones always stay."""
        with atomic.file_lock(self.data.lock_file(session, "checkpoints"), self.lock_timeout):
            pack = self._packed(session)
            docs = [(cid, d) for cid, d in pack.docs.items() if valid(d) is not None]
            docs.sort(key=lambda item: seq_of(item[1]))  # copies may arrive out of order
            steps = [cid for cid, d in docs if d["kind"] != "restore"]
            automatic = [cid for cid, d in docs if d["kind"] == "restore" and not d["manual"]]
            doomed = steps[: max(0, len(steps) - keep_last)]
            doomed += automatic[: max(0, len(automatic) - keep_last)]
            pack.delete(doomed)
            objects = self._object_file(session)
            if doomed and objects.due_for_compaction(self._compaction_marker(session)):
                self._compact(session)
        return len(doomed)

    def prune_steps(self, session: SessionName, before: str, batch: int = 1000) -> int:
        """Steps and tombstones older than `before`, then the objects file is compacted to
        what the remaining checkpoints refer to."""
        from datetime import datetime

        cutoff = datetime.fromisoformat(before)
        with atomic.file_lock(self.data.lock_file(session, "checkpoints"), self.lock_timeout):
            pack = self._packed(session)
            doomed = [
                cid
                for cid, raw in pack.docs.items()
                if (doc := valid(raw)) is not None
                and doc["kind"] != "restore"
                and datetime.fromisoformat(doc["created_at"]) < cutoff
            ]
            pack.delete(doomed)
            if doomed:
                self._compact(session)
        return len(doomed)

    def compact(self, session: SessionName) -> int:
        """Drop the objects no checkpoint refers to any more; returns how many."""
        with atomic.file_lock(self.data.lock_file(session, "checkpoints"), self.lock_timeout):
            return self._compact(session)

    def _compact(self, session: SessionName) -> int:
        referenced: set[int] = set()
        for entry in self._entries(session):
            doc = valid(entry.raw)
            if doc is None:  # unreadable or newer: keep everything, lose nothing
                return 0
            referenced.update(decode_runs(doc["messages"]))
        return self._object_file(session).compact(referenced, self._compaction_marker(session))

    def drop(self, session: SessionName) -> None:
        folder = self.folder(session)
        with atomic.file_lock(self.data.lock_file(session, "checkpoints"), self.lock_timeout):
            paths = [
                *self._files(session),
                self.folder(session) / PACK,
                self.folder(session) / PACKED_MARKER,
                self._objects_file(session),
                self._object_file(session).index_path,
                self._journal(session),
                self._compaction_marker(session),
            ]
            for path in paths:
                atomic.remove(path)
            self._objects.pop(session.value, None)
            self._packs.pop(session.value, None)
            if folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()

    def rename(self, old: SessionName, new: SessionName) -> None:
        """The whole folder moves; documents are found by folder, so none is rewritten."""
        with atomic.file_lock(self.data.lock_file(old, "checkpoints"), self.lock_timeout):
            atomic.rename(self.folder(old), self.folder(new))
            self._objects.pop(old.value, None)
            self._packs.pop(old.value, None)

    def compensations(self, session: SessionName) -> list[CompensationEntry]:
        return journal.read(self._journal(session))

    def record_compensations(
        self, session: SessionName, entries: Sequence[CompensationEntry], durable: bool = True
    ) -> None:
        journal.append(self._journal(session), entries, durable)

    def used_ids(self, session: SessionName, candidates: Sequence[str]) -> set[str]:
        found: set[str] = set()
        for path in (self._objects_file(session), self._journal(session)):
            if len(found) == len(candidates):
                break
            try:
                data = atomic.read_bytes(path)
            except FileNotFoundError:
                continue
            found.update(
                c for c in candidates if json.dumps(c, ensure_ascii=False).encode() in data
            )
        return found

    # -- internals -------------------------------------------------------------------

    def _journal(self, session: SessionName) -> Path:
        return self.folder(session) / "compensations.jsonl"

    def _compaction_marker(self, session: SessionName) -> Path:
        return self.folder(session) / "objects.compacted"

    def _files(self, session: SessionName) -> list[Path]:
        """Documents written one per file (by an earlier koog), the marker left out."""
        folder = self.folder(session)
        if not folder.is_dir():
            return []
        names = sorted(os.listdir(folder))
        return [folder / n for n in names if _NAME.match(n) and n != PACKED_MARKER]

    def _entries(self, session: SessionName) -> list[_Entry]:
        """Every checkpoint of the session, oldest first: the pack's, then any separate
        documents not moved into it yet."""
        pack = self._pack(session)
        entries = [
            _Entry(cid, seq_of(doc), doc, f"{pack.path} ({cid})") for cid, doc in pack.docs.items()
        ]
        entries.sort(key=lambda e: e.seq)
        return [*entries, *self._loose(session, pack)]

    def _loose(self, session: SessionName, pack: CheckpointPack) -> list[_Entry]:
        """Separate documents not in the pack, in file order; numbered after the pack's
        when it exists (an older koog wrote them after it)."""
        entries: list[_Entry] = []
        next_seq = pack.max_seq() + 1
        for path in self._files(session):
            cid = self._id_of(path)
            if cid is None or cid in pack.docs:
                continue
            try:
                raw: object = json.loads(atomic.read_bytes(path))
            except (StorageError, OSError, ValueError, RecursionError):
                raw = None
            seq = int(path.name[:8])
            if pack.exists:
                seq, next_seq = next_seq, next_seq + 1
            entries.append(_Entry(cid, seq, raw, str(path)))
        return entries

    def _checkpoint(self, session: SessionName, entry: _Entry, with_messages: bool) -> Checkpoint:
        doc = valid(entry.raw)
        if doc is None:
            return unusable(entry.raw, entry.cid, session, entry.seq)
        messages: tuple[Message, ...] = ()
        if with_messages:
            raw = self._object_file(session).resolve(
                doc["messages"], doc["message_count"], doc.get("digest"), Path(entry.where)
            )
            messages = tuple(parse_messages(raw, entry.where))
        return Checkpoint(
            id=entry.cid,
            session=session.value,
            seq=entry.seq,
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


@dataclass(frozen=True)
class _Entry:
    cid: str
    seq: int
    raw: object  # the parsed document; None when it does not parse
    where: str  # for messages: the file, and the id inside the pack


def _marker(session: SessionName) -> dict[str, object]:
    return {
        "format": FORMAT,
        "version": MARKER_VERSION,
        "id": "0",
        "session": session.value,
        "seq": 0,
        "kind": "restore",
        "manual": True,
        "created_at": "",
        "reason": "this session's checkpoints are in checkpoints.jsonl, kept by a newer koog",
    }
