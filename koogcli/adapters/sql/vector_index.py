"""A read copy of one embedding model's vectors, laid out for one matrix product per search.

`memory.sqlite3` stays the truth: a vector is written there in the same transaction as its
record. This index is derived from it and may be lost or torn at any time: each search
first brings it up to date (appending vectors added since, or rebuilding after a delete or
a change of `vectors_epoch`), then scores every vector at once with numpy on a memory map.
Exact cosine over unit vectors, so recall is that of a full scan; at 100,000 x 1,536 the
product over the page-cached file takes about 40 ms (bench/memory_search.py).

Files, in `<data>/memory-vectors/`, named by a hash of the model: `.f32` (unit vectors,
row-major float32), `.seq` (int64 record numbers), `.ns` (int32 namespace numbers) and a
JSON header written last, naming how many rows are valid. A shared lock covers a search,
an exclusive one an update.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from koogcli.adapters.atomic import write_text
from koogcli.adapters.extras import need
from koogcli.adapters.paths import ensure_dir

_FLOAT, _SEQ, _NS = 4, 8, 4  # bytes per value in the three files


@dataclass
class _Header:
    epoch: str
    max_vid: int
    rows: int
    dim: int
    namespaces: list[str]


class VectorIndex:
    def __init__(self, folder: Path, model: str) -> None:
        self.folder = folder
        stem = hashlib.sha256(model.encode()).hexdigest()[:16]
        self.model = model
        self.base = folder / stem

    def _file(self, suffix: str) -> Path:
        return self.base.with_suffix(suffix)

    @contextmanager
    def _locked(self, exclusive: bool) -> Iterator[None]:
        ensure_dir(self.folder)
        fd = os.open(self._file(".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            yield
        finally:
            os.close(fd)  # releases the lock

    def _header(self) -> _Header | None:
        try:
            raw = json.loads(self._file(".json").read_text())
            epoch, max_vid, rows, dim = (raw[k] for k in ("epoch", "max_vid", "rows", "dim"))
            names = [str(n) for n in raw["namespaces"]]
            return _Header(str(epoch), int(max_vid), int(rows), int(dim), names)
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _write_header(self, header: _Header) -> None:
        write_text(self._file(".json"), json.dumps(header.__dict__), sync=False)

    def _sizes_hold(self, h: _Header) -> bool:
        """The data files hold at least the rows the header names (a torn append may
        have left more, never fewer)."""
        try:
            return (
                self._file(".f32").stat().st_size >= h.rows * h.dim * _FLOAT
                and self._file(".seq").stat().st_size >= h.rows * _SEQ
                and self._file(".ns").stat().st_size >= h.rows * _NS
            )
        except OSError:
            return False

    def refresh(self, db: sqlite3.Connection) -> _Header | None:
        """Bring the index up to date with the database; None when it has no vectors."""
        epoch = _epoch(db)
        top = db.execute("SELECT MAX(vid) FROM vectors WHERE model = ?", (self.model,)).fetchone()
        max_vid = int(top[0] or 0)
        h = self._header()
        if h is not None and h.epoch == epoch and h.max_vid == max_vid and self._sizes_hold(h):
            return h if h.rows else None
        with self._locked(exclusive=True):
            h = self._header()  # another process may have done it meanwhile
            if h is None or h.epoch != epoch or not self._sizes_hold(h):
                h = _Header(epoch, 0, 0, 0, [])
                for suffix in (".f32", ".seq", ".ns"):  # emptied, private like every file
                    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
                    os.close(os.open(self._file(suffix), flags, 0o600))
            if h.max_vid < max_vid:
                h = self._append(db, h)
            return h if h.rows else None

    def _append(self, db: sqlite3.Connection, h: _Header) -> _Header:
        need("numpy")
        import numpy as np

        rows = db.execute(
            "SELECT v.vid, v.record, v.vector, r.namespace FROM vectors v "
            "JOIN records r ON r.seq = v.record WHERE v.model = ? AND v.vid > ? ORDER BY v.vid",
            (self.model, h.max_vid),
        ).fetchall()
        if not rows:
            return h
        last_vid = int(rows[-1][0])
        dim = h.dim or len(rows[0][2]) // _FLOAT
        rows = [r for r in rows if len(r[2]) == dim * _FLOAT]  # a stray size is never mixed in
        vectors = np.frombuffer(b"".join(r[2] for r in rows), dtype=np.float32).reshape(-1, dim)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        unit = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
        names = list(h.namespaces)
        number = {n: i for i, n in enumerate(names)}
        for r in rows:
            if r[3] not in number:
                number[r[3]] = len(names)
                names.append(r[3])
        seqs = np.array([r[1] for r in rows], dtype=np.int64)
        spaces = np.array([number[r[3]] for r in rows], dtype=np.int32)
        for suffix, data, width in (
            (".f32", unit.astype(np.float32), dim * _FLOAT),
            (".seq", seqs, _SEQ),
            (".ns", spaces, _NS),
        ):
            with open(self._file(suffix), "r+b") as f:
                f.truncate(h.rows * width)  # drop what a torn append left
                f.seek(0, os.SEEK_END)
                f.write(data.tobytes())
        new = _Header(h.epoch, last_vid, h.rows + len(rows), dim, names)
        self._write_header(new)
        return new

    def search(
        self,
        db: sqlite3.Connection,
        query: Sequence[float],
        namespaces: Sequence[str] | None,
        limit: int,
    ) -> list[tuple[int, float]]:
        """The `limit` best (record number, cosine) pairs, best first, among `namespaces`
        (None: all)."""
        need("numpy")
        import numpy as np

        if self.refresh(db) is None or limit <= 0:
            return []
        q = np.asarray(query, dtype=np.float32)
        norm = float(np.linalg.norm(q))
        if norm == 0:
            return []
        with self._locked(exclusive=False):
            # Read again under the lock: another process may have rebuilt the files since.
            h = self._header()
            if h is None or not h.rows or len(query) != h.dim or not self._sizes_hold(h):
                return []
            matrix: Any = np.memmap(self._file(".f32"), np.float32, "r", shape=(h.rows, h.dim))
            scores = matrix @ (q / norm)
            if namespaces is not None:
                wanted = [h.namespaces.index(n) for n in namespaces if n in h.namespaces]
                spaces = np.fromfile(self._file(".ns"), dtype=np.int32, count=h.rows)
                scores = np.where(np.isin(spaces, wanted), scores, -np.inf)
            seqs = np.fromfile(self._file(".seq"), dtype=np.int64, count=h.rows)
        k = min(limit, h.rows)
        best = np.argpartition(-scores, k - 1)[:k]
        best = best[np.argsort(-scores[best], kind="stable")]
        return [(int(seqs[i]), float(scores[i])) for i in best if np.isfinite(scores[i])]


def _epoch(db: sqlite3.Connection) -> str:
    row = db.execute("SELECT value FROM meta WHERE key = 'vectors_epoch'").fetchone()
    return str(row[0]) if row else "0"


def bump_epoch(db: sqlite3.Connection) -> None:
    """Vectors were removed or replaced: every index rebuilds at its next search. Call it
    inside the write transaction that changed them."""
    db.execute(
        "INSERT INTO meta VALUES ('vectors_epoch', '1') ON CONFLICT (key) DO UPDATE SET "
        "value = CAST(CAST(value AS INTEGER) + 1 AS TEXT)"
    )
