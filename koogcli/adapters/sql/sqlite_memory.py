"""SqliteMemoryStore: long-term memory in `<data>/memory.sqlite3` (WAL, 0600), ranked by
SQLite's own indexes; everything else is adapters/sql/memory.py.

- fulltext: FTS5, porter over unicode61 without diacritics, so "deploy", "Deploying" and
  "DEPLOYS" meet, and so do "déploiement" and "deploiement"; ranked by BM25, scored as
  adapters/sql/memory_scores.py says.
- keyword: an FTS5 trigram index over the lower-cased content finds substrings of three
  or more characters; shorter queries use `instr` over that column.
- embeddings: float32 blobs, searched through a derived index (adapters/sql/vector_index.py).
The file's schema and its upgrades are adapters/sql/migrations.py `MEMORY`; every SQLite
failure is told as locked, read-only or unopenable, or damaged (adapters/sql/sqlite.py).
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from koogcli.adapters.sql.memory import Scope, SqlMemoryStore
from koogcli.adapters.sql.memory_scores import Scored, query_terms, relative_scores, term_forms
from koogcli.adapters.sql.migrations import MEMORY
from koogcli.adapters.sql.sqlite import SqliteDatabase
from koogcli.adapters.sql.vector_index import VectorIndex, bump_epoch
from koogcli.core.memory import MemoryRecord


class SqliteMemoryStore(SqlMemoryStore):
    VECTOR_ORDER = "v.vid"  # insertion order
    DIMENSION = f"length(vector) / {array('f').itemsize}"

    def __init__(self, path: Path, busy_timeout: float = 30.0) -> None:
        # Memory keeps SQLite's FULL sync: once a record is in, the messages it came from
        # are no longer waiting for it in koog.sqlite3.
        super().__init__(SqliteDatabase(path, busy_timeout, schema=MEMORY, synchronous="FULL"))
        self.path = path

    def _where(self) -> str:
        return str(self.path)

    def _text_column(self, r: MemoryRecord, words: set[str]) -> tuple[str, str, list[object]]:
        return "ntokens", "%s", [len(words)]

    def _index_text(self, cur: Any, seq: int, r: MemoryRecord) -> None:
        cur.execute(
            "INSERT INTO records_fts (rowid, content_lower) VALUES (%s, %s)",
            [seq, r.content.lower()],
        )
        cur.execute("INSERT INTO records_text (rowid, content) VALUES (%s, %s)", [seq, r.content])

    def _unindex_text(self, cur: Any, seq: int, lowered: str, content: str) -> None:
        cur.execute(
            "INSERT INTO records_fts (records_fts, rowid, content_lower) VALUES ('delete', %s, %s)",
            [seq, lowered],
        )
        cur.execute(
            "INSERT INTO records_text (records_text, rowid, content) VALUES ('delete', %s, %s)",
            [seq, content],
        )

    def _vectors_removed(self, cur: Any) -> None:
        bump_epoch(cur)

    def _pack(self, vector: Sequence[float]) -> object:
        return array("f", vector).tobytes()

    def _unpack(self, stored: Any) -> list[float]:
        return array("f", stored).tolist()

    def _metadata(self, alias: str, key: str) -> tuple[str, object]:
        return f"CAST(json_extract({alias}.metadata, %s) AS TEXT)", '$."' + key.replace(
            '"', '""'
        ) + '"'

    def forget(self, ids: Sequence[str]) -> list[MemoryRecord]:
        """As the base, with the text overwritten in the file: secure_delete, the full-text
        segments merged in the same transaction, then the WAL checkpointed into the
        database and emptied."""
        if self.db.exists():
            self.db.conn.execute("PRAGMA secure_delete = ON")
        found = super().forget(ids)
        if found:
            with self.db.errors():
                self.db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return found

    def _scrub(self, cur: Any) -> None:
        for index in ("records_fts", "records_text"):
            cur.execute(f"INSERT INTO {index} ({index}) VALUES ('optimize')")

    def _keyword(self, needle: str, scope: Scope, limit: int) -> Scored:
        if len(needle) < 3:
            return super()._keyword(needle, scope, limit)
        condition, args = self._scope(scope)
        found = self._rows(
            "SELECT r.seq FROM records_fts f JOIN records r ON r.seq = f.rowid "
            f"WHERE records_fts MATCH %s AND instr(r.content_lower, %s) > 0{condition} "
            "ORDER BY r.seq LIMIT %s",
            ['"' + needle.replace('"', '""') + '"', needle, *args, limit],
        )
        return [(int(seq), 1.0) for (seq,) in found]

    def _fulltext(self, text: str, scope: Scope, limit: int, threshold: float) -> Scored:
        terms = query_terms(text)
        if not terms or limit <= 0 or not self.db.exists():
            return []
        # A word in a tenth or more of a large memory says little (its BM25 weight is near
        # zero) and costs most (its list of records is long): like a search engine's
        # frequency cutoff, such words rank nothing while rarer words are present.
        frequency = {t: len(self._matching(t)) for t in terms}
        size = self._rows("SELECT seq FROM sqlite_sequence WHERE name = 'records'")
        cutoff = max(2000, (size[0][0] if size else 0) // 10)
        ranked = [t for t in terms if frequency[t] <= cutoff] or terms
        present = [t for t in ranked if frequency[t]]
        if not present:
            return []
        match = " OR ".join(_phrase(t) for t in present)
        width = max(limit * 4, 50)
        while True:  # namespaces and metadata apply to the ranked records: widen until enough
            rows = self._rows(
                "SELECT rowid, -bm25(records_text) FROM records_text WHERE records_text MATCH %s "
                "ORDER BY bm25(records_text), rowid LIMIT %s",
                [match, width],
            )
            if scope.spaces is None and not scope.where:
                kept = rows
            else:
                passing = self._within([seq for seq, _ in rows], scope)
                kept = [row for row in rows if row[0] in passing]
            if len(kept) >= width // 4 or len(rows) < width:
                break
            width *= 4
        wanted = {seq for seq, _ in kept}
        held = dict.fromkeys(wanted, 1) if len(present) == 1 else {}
        for term in present if len(present) > 1 else []:
            for seq in self._matching(term) & wanted:
                held[seq] = held.get(seq, 0) + 1
        counted = [(seq, raw, held.get(seq, 0)) for seq, raw in kept]
        return relative_scores(counted, len(ranked), limit, threshold)

    def _matching(self, term: str) -> set[int]:
        found = self._rows(
            "SELECT rowid FROM records_text WHERE records_text MATCH %s", [_phrase(term)]
        )
        return {int(seq) for (seq,) in found}

    def _nearest(self, vector: Sequence[float], scope: Scope, model: str, limit: int) -> Scored:
        if not self.db.exists():
            return []
        index = VectorIndex(self.path.parent / "memory-vectors", model)
        width = limit * (8 if scope.where else 1)
        while True:  # metadata filters apply after scoring: widen until enough pass
            with self.db.errors():
                found = index.search(self.db.conn, vector, scope.spaces, width)
            if scope.where:
                passing = self._within([seq for seq, _ in found], Scope(None, scope.where))
                kept = [(seq, score) for seq, score in found if seq in passing]
            else:
                kept = found
            if len(kept) >= limit or len(found) < width:
                return kept[:limit]
            width *= 4

    def close(self) -> None:
        self.db.close()


def _phrase(term: str) -> str:
    """An FTS5 match of one query word in any of its forms."""
    forms = ['"' + form.replace('"', '""') + '"' for form in term_forms(term)]
    return forms[0] if len(forms) == 1 else "(" + " OR ".join(forms) + ")"
