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
- `objects.idx` maps digests to seqs without the message bodies, so a process that only
  stores a checkpoint does not parse the whole objects file: `koog-objects-index 2 INODE`,
  then blocks `b START COUNT CRC` followed by COUNT digest lines for the seqs from START
  on (CRC: zlib.crc32 of those lines joined by newlines, so a block torn by a crash and
  followed by later appends is never read out of step), `n NEXT` after a compaction
  marker, and `@ OFFSET` lines saying how much of objects.jsonl the lines before them
  cover. Only what precedes the last `@` line is trusted, and the rest of objects.jsonl is
  parsed from that offset. An index of another version or inode (the objects file was
  replaced) or covering more than the file holds (its tail was lost) is ignored and
  rewritten: it is a cache, never the truth. Blocks are read a list at a time: 50,000
  digests load without a Python step per line. Bodies are parsed only to resolve or
  compact.
"""

from __future__ import annotations

import hashlib
import json
import operator
import os
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, cast

from koogcli.adapters import atomic
from koogcli.core.errors import CorruptDocumentError, StorageError
from koogcli.core.messages import Message

# Compact when the file is this many times its size after the last compaction, and bigger
# than COMPACT_MIN_BYTES: amortised, a turn pays almost nothing for it.
COMPACT_GROWTH = 2
COMPACT_MIN_BYTES = 256 * 1024


def combined(keys: Iterable[str]) -> str:
    """One digest over a checkpoint's referenced objects, in order."""
    h = hashlib.sha256()
    for key in keys:
        h.update(key.encode())
        h.update(b"\n")
    return h.hexdigest()[:32]


def encode_runs(seqs: Iterable[int]) -> list[list[int]]:
    return extend_runs([], seqs)


def extend_runs(runs: list[list[int]], seqs: Iterable[int]) -> list[list[int]]:
    """`runs` (changed in place) followed by `seqs`, merged into runs of consecutive seqs."""
    last = runs[-1] if runs else None
    for s in seqs:
        if last is not None and last[1] == s - 1:
            last[1] = s
        else:
            last = [s, s]
            runs.append(last)
    return runs


def decode_runs(runs: Sequence[Sequence[int]]) -> list[int]:
    return [s for start, end in runs for s in range(start, end + 1)]


def run_length(runs: Sequence[Sequence[int]]) -> int:
    return sum(end - start + 1 for start, end in runs)


INDEX_HEADER = "koog-objects-index 2"


@dataclass(frozen=True)
class _LastSave:
    messages: tuple[Message, ...]
    runs: list[list[int]]
    state: Any  # the sha256 of `combined` after these messages' keys
    inode: int


def _extends(before: Sequence[Message], now: Sequence[Message]) -> bool:
    """Whether `now` starts with the very objects of `before` (identity, not equality:
    cheap, and an object's digest never changes)."""
    return len(now) >= len(before) and all(map(operator.is_, before, now))


class ObjectFile:
    """One session's objects; the caller holds the session's checkpoint lock to write."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.index_path = path.with_name("objects.idx")
        self._reset(0)

    def _reset(self, inode: int) -> None:
        self.inode = inode
        self.offset = 0  # bytes of the objects file the digest map covers
        self.by_digest: dict[str, int] = {}
        self.next_seq = 0
        self.index_loaded = False
        self.index_valid = False  # the index file on disk matches this objects file
        self.bodies_offset = 0  # bytes the bodies map covers
        self.by_seq: dict[int, tuple[str, dict[str, object]]] = {}
        self._last: _LastSave | None = None

    def _open(self) -> tuple[BinaryIO | None, int, int]:
        try:
            handle = atomic.open_binary(self.path)
        except FileNotFoundError:
            return None, 0, 0
        info = os.fstat(handle.fileno())
        return handle, info.st_ino, info.st_size

    def refresh(self, write_index: bool = False) -> None:
        """Bring the digest map up to date: from the index, then the objects appended
        since. With `write_index` (the caller holds the lock), the index is extended."""
        handle, inode, size = self._open()
        if handle is None:
            self._reset(0)
            return
        with handle:
            if inode != self.inode or size < self.offset:
                self._reset(inode)  # replaced by another process: start over
            if not self.index_loaded:
                self._load_index(size)
            handle.seek(self.offset)
            chunk = handle.read(size - self.offset)
        complete = chunk[: chunk.rfind(b"\n") + 1]  # a torn last line is not ours yet
        added: list[tuple[str | None, int]] = []  # (digest, seq); (None, next) for `n`
        for key, seq, _message in _records(complete):
            if key is None:
                self.next_seq = max(self.next_seq, seq)
                added.append((None, seq))
                continue
            self.by_digest[key] = seq
            self.next_seq = max(self.next_seq, seq + 1)
            added.append((key, seq))
        self.offset += len(complete)
        if write_index and (added or not self.index_valid):
            self._write_index(added)

    def _load_index(self, size: int) -> None:
        self.index_loaded = True
        try:
            text = atomic.read_bytes(self.index_path).decode("ascii")
        except (FileNotFoundError, UnicodeDecodeError, StorageError):
            return
        header, _, body = text.partition("\n")
        if header != f"{INDEX_HEADER} {self.inode}":
            return
        trusted = _read_index(body, size)
        if trusted is not None:
            self.by_digest, self.next_seq, self.offset = trusted
            self.index_valid = True

    def _write_index(self, added: list[tuple[str | None, int]]) -> None:
        mark = f"@ {self.offset}"
        if self.index_valid:
            text = "".join(_index_lines(added)) + mark + "\n"
            atomic.append_text(self.index_path, text, sync=False)
            return
        entries = sorted(self.by_digest.items(), key=operator.itemgetter(1))
        lines = [f"{INDEX_HEADER} {self.inode}\n", f"n {self.next_seq}\n"]
        lines += _index_lines(entries)
        atomic.write_text(self.index_path, "".join([*lines, mark, "\n"]), sync=False)
        self.index_valid = True

    def _bodies(self) -> dict[int, tuple[str, dict[str, object]]]:
        """Every object with its message, parsed from where the last call left off."""
        for _attempt in range(3):  # another process may replace the file meanwhile
            self.refresh()
            handle, inode, _size = self._open()
            if handle is None or inode == self.inode:
                break
            handle.close()
        else:
            raise StorageError(f"{self.path} kept being replaced while read; try again")
        if handle is None:
            return self.by_seq
        with handle:
            handle.seek(self.bodies_offset)
            chunk = handle.read(max(0, self.offset - self.bodies_offset))
        complete = chunk[: chunk.rfind(b"\n") + 1]
        for key, seq, message in _records(complete):
            if key is not None and message is not None:
                self.by_seq[seq] = (key, message)
        self.bodies_offset += len(complete)
        return self.by_seq

    def store(
        self,
        messages: Sequence[Message],
        keys_of: Callable[[Sequence[Message]], list[str]],
        sync: bool = True,
    ) -> tuple[list[list[int]], str]:
        """Runs of seqs for the messages (appending the new ones) and their combined digest.
        With `sync`, the file is made durable even when nothing new is appended: the objects
        an unsynced step checkpoint appended may be what this checkpoint refers to.

        A turn saves the same history step after step, each time with a few messages more:
        when the messages begin with the very objects of this process's last save (and the
        file was not replaced since), its runs and digest state are reused, and only the
        messages after them are hashed and looked up. The rest is done a list at a time, not
        a message at a time: the first save of a 50,000-message history is one pass."""
        self.refresh(write_index=True)
        last = self._last if self._last is not None and self._last.inode == self.inode else None
        if last is not None and _extends(last.messages, messages):
            runs, state = [list(run) for run in last.runs], last.state.copy()
            start = len(last.messages)
        else:
            runs, state, start = [], hashlib.sha256(), 0
        keys = keys_of(messages[start:])
        if keys:
            state.update(("\n".join(keys) + "\n").encode())
        seqs = list(map(self.by_digest.get, keys))
        lines: list[str] = []
        for i in [i for i, seq in enumerate(seqs) if seq is None] if None in seqs else []:
            seq = self.by_digest.get(keys[i])  # the same new message twice: one object
            if seq is None:
                seq = self.by_digest[keys[i]] = self.next_seq
                self.next_seq += 1
                data = messages[start + i].to_dict()
                lines.append(json.dumps({"s": seq, "h": keys[i], "m": data}, ensure_ascii=False))
            seqs[i] = seq
        extend_runs(runs, cast(list[int], seqs))
        if lines:
            atomic.append_text(self.path, "\n".join(lines) + "\n", sync=sync)
            self.refresh(write_index=True)
        elif sync and messages:
            atomic.sync_file(self.path)
        self._last = _LastSave(
            tuple(messages), [list(run) for run in runs], state.copy(), self.inode
        )
        return runs, state.hexdigest()[:32]

    def resolve(
        self, runs: Sequence[Sequence[int]], count: int, expected: str | None, where: Path
    ) -> list[dict[str, object]]:
        """The message dicts a checkpoint refers to, checked before and after expanding."""
        by_seq = self._bodies()
        if run_length(runs) != count or count > len(by_seq):
            raise CorruptDocumentError(
                f"checkpoint {where} refers to {run_length(runs)} messages "
                f"(it says {count}; {self.path.name} holds {len(by_seq)})",
                hint=atomic.CORRUPT_HINT,
            )
        try:
            found = [by_seq[s] for s in decode_runs(runs)]
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
        self._verify(found, where)
        return [m for _, m in found]

    def _verify(self, found: Sequence[tuple[str, dict[str, object]]], where: Path) -> None:
        """Every message restored is the message stored: its body still has its digest, and
        no message is named twice (a history never holds one id twice)."""
        seen: set[object] = set()
        for number, (key, message) in enumerate(found, start=1):
            line = json.dumps(message, ensure_ascii=False).encode()
            if hashlib.sha256(line).hexdigest()[:24] != key[:24]:
                raise CorruptDocumentError(
                    f"{self.path}: message {number} of checkpoint {where.name} was changed "
                    "after it was stored (its digest no longer matches)",
                    hint="koog will not restore a history it cannot verify; use another checkpoint",
                )
            if message.get("id") in seen:
                raise CorruptDocumentError(
                    f"checkpoint {where.name} in {self.path.parent} names message "
                    f"{message.get('id')} twice; it was recorded from a damaged digests file",
                    hint="koog will not restore it; use another checkpoint",
                )
            seen.add(message.get("id"))

    def compact(self, referenced: set[int], marker: Path) -> int:
        """Keep only the referenced objects (seqs unchanged); returns the lines dropped."""
        by_seq = self._bodies()
        kept = sorted(s for s in by_seq if s in referenced)
        dropped = len(by_seq) - len(kept)
        lines = [
            json.dumps({"s": s, "h": by_seq[s][0], "m": by_seq[s][1]}, ensure_ascii=False)
            for s in kept
        ]
        # The next seq never goes back, so no freed number is ever reused.
        text = json.dumps({"next": self.next_seq}) + "\n" + "".join(line + "\n" for line in lines)
        if dropped:
            atomic.write_text(self.path, text)  # a new inode: the index no longer applies
            atomic.remove(self.index_path)
        atomic.write_text(marker, json.dumps({"size": len(text.encode())}))
        self.refresh(write_index=True)
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


def _index_lines(entries: Iterable[tuple[str | None, int]]) -> list[str]:
    """Index text for (digest, seq) entries in order, (None, next) for an `n` line:
    consecutive seqs as one block."""
    out: list[str] = []
    block: list[str] = []
    start = 0

    def close() -> None:
        if block:
            keys = "\n".join(block)
            out.append(f"b {start} {len(block)} {zlib.crc32(keys.encode())}\n{keys}\n")
            block.clear()

    for key, seq in entries:
        if key is None:
            close()
            out.append(f"n {seq}\n")
        elif block and seq == start + len(block):
            block.append(key)
        else:
            close()
            start = seq
            block.append(key)
    close()
    return out


def _read_index(body: str, size: int) -> tuple[dict[str, int], int, int] | None:
    """(digest -> seq, next seq, bytes covered) from the index lines before its last `@`
    line; None when there is none, or when one says more than `size` bytes are covered
    (the objects file lost its tail). A malformed line or block ends what is read. The
    blocks are counted at each `@` line, never copied (a copy per `@` line made a turn's
    cost grow with the turns since the index was last written)."""
    lines = body.split("\n")
    last = len(lines) - 1  # the last piece is torn or empty
    blocks: list[tuple[list[str], int]] = []
    next_seq, i = 0, 0
    trusted: tuple[int, int, int] | None = None  # blocks, next seq, bytes covered
    while i < last:
        kind, _, rest = lines[i].partition(" ")
        try:
            if kind == "b":
                start, count, crc = map(int, rest.split(" "))
                keys = lines[i + 1 : i + 1 + count]
                if start < 0 or count < 1 or i + count >= last:
                    break
                if zlib.crc32("\n".join(keys).encode()) != crc:
                    break
                blocks.append((keys, start))
                next_seq = max(next_seq, start + count)
                i += 1 + count
                continue
            if kind == "@":
                covered = int(rest)
                if covered > size:
                    return None
                trusted = (len(blocks), next_seq, covered)
            elif kind == "n":
                next_seq = max(next_seq, int(rest))
            else:
                break
        except ValueError:
            break
        i += 1
    if trusted is None:
        return None
    by_digest: dict[str, int] = {}
    for keys, start in blocks[: trusted[0]]:
        by_digest.update(zip(keys, range(start, start + len(keys)), strict=True))
    return by_digest, trusted[1], trusted[2]


def _records(complete: bytes) -> Iterable[tuple[str | None, int, dict[str, object] | None]]:
    """(digest, seq, message) per well-formed line; (None, next, None) for a compaction's
    `{"next": N}`. Lines torn by a crash and later closed off are skipped: never referenced."""
    for line in complete.splitlines():
        try:
            record = json.loads(line)
            if isinstance(record, dict) and isinstance(record.get("next"), int):
                yield None, record["next"], None
                continue
            seq, key, message = record["s"], record["h"], record["m"]
        except (ValueError, KeyError, TypeError, RecursionError):
            continue
        valid = isinstance(seq, int) and seq >= 0 and isinstance(message, dict)
        if valid and isinstance(key, str) and key and not set(key) & {" ", "\n"}:
            yield key, seq, message
