"""The message objects of one session's checkpoints: `checkpoints/<session>/objects.jsonl`.

- Each line is one message version, stored once: `{"s": seq, "h": digest, "m": {...}}`.
  Checkpoints refer to messages as runs of seqs plus one digest over the referenced
  objects' digests, checked on load: a truncated or edited objects file whose seqs were
  reused by other messages is reported (exit 3), never restored as a made-up history.
- Runs are checked against the checkpoint's message count and the objects known before
  anything is expanded, so a hostile run (`[0, 3e9]`) costs nothing.
- Appends close off a torn last line first (atomic.append_text); torn lines are skipped.
- `compact` rewrites the file with only the objects live checkpoints refer to, keeping
  their seqs; pruning calls it once the file has doubled since the last compaction.
- The in-process view is refreshed from where it left off; a file replaced by another
  process (compaction, drop) is read again from the start.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from koogcli.adapters import atomic
from koogcli.core.errors import CorruptDocumentError, StorageError
from koogcli.core.messages import Message

# Compact when the file is this many times its size after the last compaction, and bigger
# than COMPACT_MIN_BYTES: amortised, a turn pays almost nothing for it.
COMPACT_GROWTH = 2
COMPACT_MIN_BYTES = 256 * 1024


def digest(message: Message) -> str:
    canonical = json.dumps(message.to_dict(), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()[:24]


def combined(keys: Iterable[str]) -> str:
    """One digest over a checkpoint's referenced objects, in order."""
    h = hashlib.sha256()
    for key in keys:
        h.update(key.encode())
        h.update(b"\n")
    return h.hexdigest()[:32]


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


def run_length(runs: Sequence[Sequence[int]]) -> int:
    return sum(end - start + 1 for start, end in runs)


class ObjectFile:
    """One session's objects; the caller holds the session's checkpoint lock to write."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.inode = 0
        self.offset = 0
        self.by_digest: dict[str, int] = {}
        self.by_seq: dict[int, tuple[str, dict[str, object]]] = {}
        self.next_seq = 0

    def _reset(self, inode: int) -> None:
        self.__init__(self.path)  # type: ignore[misc]
        self.inode = inode

    def refresh(self) -> None:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW)
        except FileNotFoundError:
            self._reset(0)
            return
        except OSError as exc:
            raise atomic.read_failure(self.path, exc) from exc
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(handle.fileno())
            if info.st_ino != self.inode or info.st_size < self.offset:
                self._reset(info.st_ino)  # replaced by another process: start over
            handle.seek(self.offset)
            chunk = handle.read()
        complete = chunk[: chunk.rfind(b"\n") + 1]  # a torn last line is not ours yet
        for line in complete.splitlines():
            try:
                record = json.loads(line)
                if isinstance(record, dict) and isinstance(record.get("next"), int):
                    self.next_seq = max(self.next_seq, record["next"])  # after a compaction
                    continue
                seq, key, message = record["s"], record["h"], record["m"]
                if not (isinstance(seq, int) and seq >= 0 and isinstance(key, str)):
                    continue
                if not isinstance(message, dict):
                    continue
            except (ValueError, KeyError, TypeError, RecursionError):
                continue  # a line torn by a crash and later closed off; never referenced
            self.by_digest[key] = seq
            self.by_seq[seq] = (key, message)
            self.next_seq = max(self.next_seq, seq + 1)
        self.offset += len(complete)

    def store(
        self, messages: Sequence[Message], keys: Sequence[str], sync: bool = True
    ) -> tuple[list[int], str]:
        """Seqs for the messages (appending the new ones) and their combined digest. With
        `sync`, the file is made durable even when nothing new is appended: the objects an
        unsynced step checkpoint appended may be what this checkpoint refers to."""
        self.refresh()
        seqs: list[int] = []
        lines: list[str] = []
        for message, key in zip(messages, keys, strict=True):
            seq = self.by_digest.get(key)
            if seq is None:
                seq = self.next_seq
                self.next_seq += 1
                data = message.to_dict()
                self.by_digest[key] = seq
                self.by_seq[seq] = (key, data)
                lines.append(json.dumps({"s": seq, "h": key, "m": data}, ensure_ascii=False))
            seqs.append(seq)
        if lines:
            atomic.append_text(self.path, "\n".join(lines) + "\n", sync=sync)
            self.refresh()
        elif sync and messages:
            atomic.sync_file(self.path)
        return seqs, combined(keys)

    def resolve(
        self, runs: Sequence[Sequence[int]], count: int, expected: str | None, where: Path
    ) -> list[dict[str, object]]:
        """The message dicts a checkpoint refers to, checked before and after expanding."""
        self.refresh()
        if run_length(runs) != count or count > len(self.by_seq):
            raise CorruptDocumentError(
                f"checkpoint {where} refers to {run_length(runs)} messages "
                f"(it says {count}; {self.path.name} holds {len(self.by_seq)})",
                hint=atomic.CORRUPT_HINT,
            )
        try:
            found = [self.by_seq[s] for s in decode_runs(runs)]
        except KeyError as exc:
            raise CorruptDocumentError(
                f"checkpoint {where} refers to a message missing from {self.path}: {exc}",
                hint=atomic.CORRUPT_HINT,
            ) from exc
        if expected is not None and combined(k for k, _ in found) != expected:
            raise CorruptDocumentError(
                f"checkpoint {where} does not match the messages in {self.path} "
                "(the objects file was truncated or changed)",
                hint="koog will not restore a history it cannot verify; use another checkpoint",
            )
        return [m for _, m in found]

    def compact(self, referenced: set[int], marker: Path) -> int:
        """Keep only the referenced objects (seqs unchanged); returns the lines dropped."""
        self.refresh()
        kept = sorted(s for s in self.by_seq if s in referenced)
        dropped = len(self.by_seq) - len(kept)
        lines = [
            json.dumps({"s": s, "h": self.by_seq[s][0], "m": self.by_seq[s][1]}, ensure_ascii=False)
            for s in kept
        ]
        # The next seq never goes back, so no freed number is ever reused.
        text = json.dumps({"next": self.next_seq}) + "\n" + "".join(line + "\n" for line in lines)
        if dropped:
            atomic.write_text(self.path, text)
        atomic.write_text(marker, json.dumps({"size": len(text.encode())}))
        self.refresh()
        return dropped

    def due_for_compaction(self, marker: Path) -> bool:
        try:
            size = os.stat(self.path, follow_symlinks=False).st_size
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise StorageError(f"cannot read {self.path}: {exc.strerror}") from exc
        if size < COMPACT_MIN_BYTES:
            return False
        try:
            last = atomic.read_json(marker)
            base = int(last["size"]) if isinstance(last, dict) else 0
        except (StorageError, KeyError, TypeError, ValueError):
            base = 0
        return size > COMPACT_GROWTH * max(base, COMPACT_MIN_BYTES // COMPACT_GROWTH)
