"""The checkpoint documents of one session in one append-only file,
`checkpoints/<session>/checkpoints.jsonl`.

A file per checkpoint cost a 4 KiB block for a document of about 1 KiB: 200 of them took
more disk than the transcript they describe. Here:
- Each line is one checkpoint document (the shape file_checkpoints.py writes, with its `id`
  and `seq`), or `{"format": "koog.checkpoint-deleted", "ids": [...]}` removing earlier
  ones. A later document with the same id replaces the earlier one.
- Appends go through atomic.append_text: a torn last line is closed off first, and a line
  without its newline is never read. A line that does not parse is such a torn append: it
  is skipped, and dropped when the file is rewritten.
- Once deleted documents outnumber live ones (and the file is over REWRITE_MIN_BYTES), the
  file is rewritten with the live lines only, byte for byte, and atomically replaced.
- The first line names the file: `{"format": "koog.checkpoint-pack", "version": 1, "file":
  RANDOM}`, new at every rewrite. The in-process view is refreshed from where it left off;
  a file whose first line changed was replaced by another process (its inode number may
  be the old one's, reused) and is read again from the start. Writers hold the session's
  checkpoint lock.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from koogcli.adapters import atomic

DELETED = "koog.checkpoint-deleted"
HEADER = "koog.checkpoint-pack"
REWRITE_MIN_BYTES = 64 * 1024


class CheckpointPack:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._reset(0)

    def _reset(self, inode: int, head: bytes = b"") -> None:
        self.inode = inode  # 0: no file
        self.head = head  # the first line: which file this view is of
        self.offset = 0
        self.docs: dict[str, dict[str, Any]] = {}  # id -> document, in file order
        self.lines: dict[str, bytes] = {}  # id -> the line as stored
        self.dead = 0  # lines that no longer count: replaced, deleted, deletions, torn

    @property
    def exists(self) -> bool:
        return self.inode != 0

    def refresh(self) -> None:
        try:
            handle = atomic.open_binary(self.path)
        except FileNotFoundError:
            self._reset(0)
            return
        with handle:
            info = os.fstat(handle.fileno())
            head = handle.readline(4096)
            if (info.st_ino, head) != (self.inode, self.head) or info.st_size < self.offset:
                self._reset(info.st_ino, head)
            handle.seek(self.offset)
            chunk = handle.read(info.st_size - self.offset)
        complete = chunk[: chunk.rfind(b"\n") + 1]  # a torn last line is not ours yet
        self.offset += len(complete)
        for line in complete.splitlines():
            self._take(line)

    def _take(self, line: bytes) -> None:
        try:
            doc = json.loads(line)
        except (ValueError, RecursionError):
            doc = None
        if not isinstance(doc, dict):
            self.dead += 1
            return
        if doc.get("format") == HEADER:
            return
        if doc.get("format") == DELETED:
            ids = doc.get("ids")
            self.dead += 1
            for cid in ids if isinstance(ids, list) else []:
                if isinstance(cid, str) and self.docs.pop(cid, None) is not None:
                    del self.lines[cid]
                    self.dead += 1
            return
        cid = doc.get("id")
        if not isinstance(cid, str) or not cid:
            self.dead += 1
            return
        if self.docs.pop(cid, None) is not None:
            self.dead += 1
        self.docs[cid] = doc
        self.lines[cid] = line

    def max_seq(self) -> int:
        seqs = (d.get("seq") for d in self.docs.values())
        return max((s for s in seqs if type(s) is int), default=-1)

    def append(self, docs: list[dict[str, Any]], sync: bool) -> None:
        """Under the lock, after a refresh."""
        text = "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs)
        atomic.append_text(self.path, text, sync=sync)
        self.refresh()

    def delete(self, ids: list[str]) -> None:
        """Under the lock, after a refresh; rewrites the file once it is mostly dead."""
        if not ids:
            return
        self.append([{"format": DELETED, "ids": ids}], sync=True)
        if self.dead > len(self.docs) and self.offset > REWRITE_MIN_BYTES:
            self.rewrite(self.lines.values())

    def rewrite(self, lines: Iterable[bytes]) -> None:
        """Replace the file with these lines (each without its newline), atomically."""
        header = {"format": HEADER, "version": 1, "file": secrets.token_hex(8)}
        data = b"".join(line + b"\n" for line in [json.dumps(header).encode(), *lines])
        atomic.write_text(self.path, data.decode("utf-8"))
        self.refresh()
