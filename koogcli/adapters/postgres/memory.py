"""PgMemoryStore: long-term memory in PostgreSQL, with the file backend's modes and scores.

- fulltext: a `tsvector` per record in the configured text search language, over the text
  with its diacritics removed (adapters/postgres/text_search.py). Question words are
  left out of the query, words held by a tenth or more of a large memory rank nothing while
  rarer ones are present, and the score is the rank relative to the best hit times the
  share of the query's words the record holds: the same rules as adapters/sql/memory_queries.py.
- jaccard: Koog's word sets in an inverted table (namespace, word) -> record with each
  record's word count; one grouped query computes the overlap.
- keyword: Koog's substring rule over the lower-cased content, in insertion order.
- embeddings: vectors are `real[]` rows. With the pgvector extension each (model, dimension)
  gets an HNSW index over the arrays cast to `vector(d)`, searched by cosine distance; a
  filtered search that comes back short is redone exactly. Without the extension vector
  modes fall back to full-text, and the store says so once.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from koogcli.adapters.postgres import text_search
from koogcli.adapters.postgres.database import Database
from koogcli.adapters.postgres.text_search import fold
from koogcli.adapters.postgres.vectors import binary, register_binary_arrays
from koogcli.adapters.sql.memory_queries import (
    Scored,
    above,
    fuse,
    query_terms,
    record_from_row,
    relative_scores,
)
from koogcli.adapters.sql.memory_search import dispatch
from koogcli.core.memory import MemoryQuery, MemoryRecord, Namespaces, SearchHit, tokenize
from koogcli.core.messages import utc_now

_COLUMNS = "seq, id, namespace, content, metadata, created_at, source"


def _spaces(namespace: Namespaces) -> list[str] | None:
    if namespace is None:
        return None
    return [namespace] if isinstance(namespace, str) else list(namespace)


def _scope(namespace: Namespaces, where: Mapping[str, str] | None) -> tuple[str, list[object]]:
    """Conditions on `r` (each led by AND) for the namespaces and metadata values."""
    sql, args = "", list[object]()
    spaces = _spaces(namespace)
    if spaces is not None:
        sql += " AND r.namespace = ANY(%s)"
        args.append(spaces)
    for key, value in (where or {}).items():
        sql += " AND (r.metadata::jsonb ->> %s) = %s"
        args += [key, value]
    return sql, args


def _store_tokens(cur: Any, records: Sequence[MemoryRecord], seqs: Mapping[str, int]) -> None:
    """Koog's word set of each record, inverted: (namespace, word) -> record, with the
    record's word count, so jaccard is one grouped query over the query's words."""
    rows = [
        (r.namespace, word, seqs[r.id], len(words))
        for r in records
        for words in [tokenize(r.content)]
        for word in sorted(words)
    ]
    if rows:
        spaces, words, records_, counts = (list(column) for column in zip(*rows, strict=True))
        cur.execute(
            "INSERT INTO memory_tokens SELECT * FROM "
            "unnest(%s::text[], %s::text[], %s::bigint[], %s::int[])",
            [spaces, words, records_, counts],
        )


class PgMemoryStore:
    def __init__(self, db: Database, language: str = "english", warn: Any = None) -> None:
        self.db = db
        self.language = language
        self.warn = warn
        self._vector_type: str | None = None
        self._stemmer: str | None = None  # a stop-word-free stemming dictionary, if any
        self._checked = False
        self._warned = False

    # -- set-up --------------------------------------------------------------------

    def _conn(self) -> Any:
        conn = self.db.conn
        if not self._checked:
            with self.db.errors():
                found = conn.execute(
                    "SELECT extnamespace::regnamespace::text FROM pg_extension "
                    "WHERE extname = 'vector'"
                ).fetchone()
                self._vector_type = f"{found[0]}.vector" if found else None
                text_search.use_language(conn, self.language)
                self._stemmer = text_search.stem_dictionary(conn, self.language)
            register_binary_arrays(conn)
            self._checked = True
        return conn

    def _forms(self, term: str) -> tuple[str, list[str]]:
        return text_search.forms(term, self.language, self._stemmer)

    def vectors_supported(self) -> bool:
        self._conn()
        if self._vector_type is None and not self._warned and self.warn is not None:
            self._warned = True
            self.warn(
                f"the PostgreSQL database at {self.db.where} has no pgvector extension: "
                "memory search uses full-text instead of embeddings"
            )
        return self._vector_type is not None

    def _ensure_index(self, model: str, dimension: int) -> None:
        """One HNSW index per (model, dimension), built by the first search that needs it
        (after a bulk load, building once is far quicker than growing it row by row);
        later additions are indexed as they are stored."""
        from psycopg import sql

        name = "memory_hnsw_" + hashlib.sha256(f"{model}\0{dimension}".encode()).hexdigest()[:16]
        conn = self._conn()
        with self.db.errors():
            if conn.execute("SELECT to_regclass(%s)", [name]).fetchone()[0] is not None:
                return
            count = self.vector_count(model)
            if count >= 20_000 and self.warn is not None:
                self.warn(f"building the vector index of {model} over {count:,} records (once)")
            with conn.transaction():
                self.db.unlimited(conn)
                conn.execute(
                    "SELECT pg_advisory_xact_lock(hashtextextended(current_schema() || %s, 0))",
                    [":" + name],
                )
                conn.execute("SET LOCAL maintenance_work_mem = '1GB'")
                conn.execute(
                    sql.SQL(
                        "CREATE INDEX IF NOT EXISTS {} ON memory_vectors USING hnsw "
                        "((vector::{}({})) vector_cosine_ops) WHERE model = {}"
                    ).format(
                        sql.Identifier(name),
                        sql.SQL(self._vector_type or "vector"),
                        sql.Literal(dimension),
                        sql.Literal(model),
                    )
                )

    # -- writes --------------------------------------------------------------------

    def add(
        self,
        records: Sequence[MemoryRecord],
        vectors: Sequence[Sequence[float]] | None = None,
        model: str = "",
    ) -> list[str]:
        if not records:
            return []
        self._conn()
        added: dict[str, int] = {}
        with self.db.transaction() as cur:
            for r in records:
                if (
                    r.source
                    and cur.execute(
                        "SELECT 1 FROM memory_forgotten WHERE source = %s", [r.source]
                    ).fetchone()
                ):
                    continue  # forgotten by the user: never added again, in any namespace
                cur.execute(
                    "INSERT INTO memory_records (id, namespace, content, content_lower, "
                    "metadata, created_at, source, search) VALUES "
                    "(%s, %s, %s, %s, %s, %s, %s, to_tsvector(%s::regconfig, %s)) "
                    "ON CONFLICT DO NOTHING RETURNING seq",  # a known id or source
                    [
                        r.id,
                        r.namespace,
                        r.content,
                        r.content.lower(),
                        json.dumps(r.metadata),
                        r.created_at,
                        r.source,
                        self.language,
                        fold(r.content),
                    ],
                )
                row = cur.fetchone()
                if row is not None:
                    added[r.id] = int(row[0])
            _store_tokens(cur, [r for r in records if r.id in added], added)
            if vectors is not None and added:
                cur.executemany(
                    "INSERT INTO memory_vectors VALUES (%s, %s, %b) ON CONFLICT DO NOTHING",
                    [
                        (added[r.id], model, binary(v))
                        for r, v in zip(records, vectors, strict=True)
                        if r.id in added
                    ],
                )
        return list(added)

    def put_vectors(self, model: str, pairs: Sequence[tuple[str, Sequence[float]]]) -> None:
        if not pairs:
            return
        self._conn()
        with self.db.transaction() as cur:
            cur.executemany(
                "INSERT INTO memory_vectors SELECT seq, %s, %b FROM memory_records "
                "WHERE id = %s ON CONFLICT DO NOTHING",
                [(model, binary(vector), record_id) for record_id, vector in pairs],
            )

    def delete(self, record_id: str) -> bool:
        self._conn()
        with self.db.transaction() as cur:
            cur.execute("DELETE FROM memory_records WHERE id = %s", [record_id])
            return cur.rowcount > 0

    def forget(self, ids: Sequence[str]) -> list[MemoryRecord]:
        """Delete records (their tokens and vectors go with them, the text search vector is
        in the row) and remember their sources, so ingestion never adds them again."""
        if not ids:
            return []
        self._conn()
        with self.db.transaction() as cur:
            cur.execute(
                f"DELETE FROM memory_records WHERE id = ANY(%s) RETURNING {_COLUMNS}",
                [list(ids)],
            )
            found = [self._record(row) for row in cur.fetchall()]
            cur.executemany(
                "INSERT INTO memory_forgotten VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
                [(r.namespace, r.source, utc_now()) for r in found if r.source],
            )
        return found

    # -- reads ---------------------------------------------------------------------

    def _rows(self, query: str, args: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        self._conn()
        return self.db.rows(query, args)

    def known_sources(self, namespace: str, sources: Sequence[str]) -> set[str]:
        if not sources:
            return set()
        found = self._rows(
            "SELECT source FROM memory_records WHERE namespace = %s AND source = ANY(%s) "
            "UNION SELECT source FROM memory_forgotten WHERE source = ANY(%s)",
            [namespace, list(sources), list(sources)],
        )
        return {r[0] for r in found}

    def records(
        self, namespace: Namespaces = None, where: Mapping[str, str] | None = None
    ) -> list[MemoryRecord]:
        condition, args = _scope(namespace, where)
        found = self._rows(
            f"SELECT {_COLUMNS} FROM memory_records r WHERE true{condition} ORDER BY seq", args
        )
        return [self._record(r) for r in found]

    def size(self, namespace: str) -> int:
        return int(
            self._rows("SELECT count(*) FROM memory_records WHERE namespace = %s", [namespace])[0][
                0
            ]
        )

    def get(self, record_id: str) -> MemoryRecord | None:
        found = self._rows(f"SELECT {_COLUMNS} FROM memory_records WHERE id = %s", [record_id])
        return self._record(found[0]) if found else None

    def namespaces(self) -> list[str]:
        return [
            r[0] for r in self._rows("SELECT DISTINCT namespace FROM memory_records ORDER BY 1")
        ]

    def ids_starting(self, prefix: str, limit: int = 10) -> list[str]:
        found = self._rows(
            "SELECT id FROM memory_records WHERE left(id, %s) = %s ORDER BY seq LIMIT %s",
            [len(prefix), prefix, limit],
        )
        return [r[0] for r in found]

    def without_vectors(self, namespace: str, model: str) -> list[MemoryRecord]:
        found = self._rows(
            f"SELECT {_COLUMNS} FROM memory_records r WHERE namespace = %s AND NOT EXISTS "
            "(SELECT 1 FROM memory_vectors v WHERE v.model = %s AND v.record = r.seq) "
            "ORDER BY seq",
            [namespace, model],
        )
        return [self._record(r) for r in found]

    def vector_count(self, model: str) -> int:
        found = self._rows("SELECT count(*) FROM memory_vectors WHERE model = %s", [model])
        return int(found[0][0])

    def vectors(self) -> list[tuple[str, str, list[float]]]:
        found = self._rows(
            "SELECT r.id, v.model, v.vector FROM memory_vectors v "
            "JOIN memory_records r ON r.seq = v.record ORDER BY v.record, v.model"
        )
        return [(rid, model, list(vector)) for rid, model, vector in found]

    def vector_dimension(self, model: str) -> int | None:
        found = self._rows(
            "SELECT cardinality(vector) FROM memory_vectors WHERE model = %s LIMIT 1", [model]
        )
        return int(found[0][0]) if found else None

    # -- search --------------------------------------------------------------------

    def search(self, query: MemoryQuery) -> list[SearchHit]:
        return dispatch(self, query)

    def _keyword(self, q: MemoryQuery) -> list[SearchHit]:
        condition, args = _scope(q.namespaces, q.where)
        found = self._rows(
            f"SELECT seq FROM memory_records r WHERE strpos(r.content_lower, %s) > 0{condition} "
            "ORDER BY seq LIMIT %s",
            [q.text.lower(), *args, q.limit],
        )
        return self._hits([(int(r[0]), 1.0) for r in found], "keyword")

    def _jaccard(self, q: MemoryQuery) -> list[SearchHit]:
        words = sorted(tokenize(q.text))
        if not words:
            return []
        spaces = _spaces(q.namespaces)
        join, condition, args = "", "", list[object]()
        if q.where:  # records are joined only for metadata filters
            condition, args = _scope(None, q.where)
            join = " JOIN memory_records r ON r.seq = t.record"
        found = self._rows(
            "SELECT t.record, count(*)::float8 / (%s + t.ntokens - count(*)) AS score "
            f"FROM memory_tokens t{join} WHERE t.token = ANY(%s)"
            f"{' AND t.namespace = ANY(%s)' if spaces is not None else ''}{condition} "
            "GROUP BY t.record, t.ntokens "
            "HAVING count(*)::float8 / (%s + t.ntokens - count(*)) >= %s "
            "ORDER BY score DESC, t.record LIMIT %s",
            [
                len(words),
                words,
                *([spaces] if spaces is not None else []),
                *args,
                len(words),
                q.threshold,
                q.limit,
            ],
        )
        return self._hits([(int(s), float(v)) for s, v in found], "jaccard")

    def _bm25(self, q: MemoryQuery) -> list[SearchHit]:
        found = self._fulltext(q.text, q.namespaces, q.where, q.limit, q.threshold)
        return self._hits(found, "bm25")

    def _fulltext(
        self,
        query: str,
        namespace: Namespaces,
        where: Mapping[str, str] | None,
        limit: int,
        threshold: float,
    ) -> Scored:
        terms = query_terms(fold(query))
        if not terms or limit <= 0:
            return []
        # A term the language drops (its own stop words) matches nothing: left out.
        frequency: dict[str, int] = {}
        for term in terms:
            sql, term_args = self._forms(term)
            row = self._rows(
                "SELECT CASE WHEN numnode(q) = 0 THEN -1 ELSE "
                "(SELECT count(*) FROM memory_records WHERE search @@ q) END "
                f"FROM (SELECT {sql} AS q) term",
                term_args,
            )[0]
            if row[0] >= 0:
                frequency[term] = int(row[0])
        if not frequency:
            return []
        size = self._rows("SELECT last_value FROM memory_records_seq_seq")[0][0]
        cutoff = max(2000, int(size) // 10)
        ranked = [t for t in frequency if frequency[t] <= cutoff] or list(frequency)
        present = [t for t in ranked if frequency[t]]
        if not present:
            return []
        built = [self._forms(t) for t in present]
        queries = " || ".join(sql for sql, _ in built)
        held = " + ".join(f"(r.search @@ ({sql}))::int" for sql, _ in built)
        pairs = [x for _, term_args in built for x in term_args]
        condition, args = _scope(namespace, where)
        found = self._rows(
            f"SELECT r.seq, ts_rank(r.search, q, 1), {held} FROM memory_records r, "
            f"(SELECT {queries} AS q) query WHERE r.search @@ q{condition} "
            "ORDER BY 2 DESC, r.seq LIMIT %s",
            [*pairs, *pairs, *args, max(limit * 4, 50)],
        )
        counted = [(int(seq), float(raw), int(held)) for seq, raw, held in found]
        return relative_scores(counted, len(ranked), limit, threshold)

    def _record(self, row: Sequence[Any]) -> MemoryRecord:
        return record_from_row(row, f"table memory_records of PostgreSQL {self.db.where}")

    def _cosine(self, q: MemoryQuery) -> list[SearchHit]:
        near = above(self._nearest(q.vector, q.namespaces, q.model, q.limit, q.where), q.floor)
        return self._hits([(seq, s) for seq, s in near if s >= q.threshold], "cosine")

    def _hybrid(self, q: MemoryQuery) -> list[SearchHit]:
        depth = max(q.limit * 4, 20)
        words = self._fulltext(q.text, q.namespaces, q.where, depth, 0.0)
        near = above(self._nearest(q.vector, q.namespaces, q.model, depth, q.where), q.floor)
        fused = [(seq, s) for seq, s in fuse([words, near], q.limit) if s >= q.threshold]
        return self._hits(fused, "hybrid")

    def _nearest(
        self,
        vector: Sequence[float],
        namespace: Namespaces,
        model: str,
        limit: int,
        where: Mapping[str, str] | None,
    ) -> list[tuple[int, float]]:
        """The `limit` nearest records as (seq, cosine): through the HNSW index, and
        exactly when filters left the index's answer short."""
        if not self.vectors_supported() or not vector:
            return []
        self._ensure_index(model, len(vector))
        kind = f"{self._vector_type}({len(vector)})"
        condition, args = _scope(namespace, where)
        from psycopg import sql

        text = binary(vector)
        distance = f"(v.vector::{kind}) <=> %b::{kind}"
        # The model as a literal, not a parameter: only then can the planner match the
        # model's partial HNSW index.
        model_literal = sql.Literal(model).as_string(self.db.conn)
        select = (
            f"SELECT r.seq, 1 - ({distance}) FROM memory_vectors v "
            f"JOIN memory_records r ON r.seq = v.record WHERE v.model = {model_literal}{condition}"
        )
        with self.db.transaction() as cur:
            # The candidate list HNSW keeps while it walks the graph: 400 gives recall@5 of
            # about 0.99 on clustered 1,536-dimension data (bench/storage_backends.py).
            cur.execute(f"SET LOCAL hnsw.ef_search = {min(1000, max(400, limit * 40))}")
            cur.execute(f"{select} ORDER BY {distance} LIMIT %s", [text, *args, text, limit])
            found = cur.fetchall()
            if len(found) < limit and (namespace is not None or where):
                cur.execute("SET LOCAL enable_indexscan = off")  # exact, over what passes
                cur.execute(f"{select} ORDER BY {distance} LIMIT %s", [text, *args, text, limit])
                found = cur.fetchall()
        return [(int(seq), round(float(score), 6)) for seq, score in found]

    def _hits(self, scored: Sequence[tuple[int, float]], metric: str) -> list[SearchHit]:
        if not scored:
            return []
        found = self._rows(
            f"SELECT {_COLUMNS} FROM memory_records WHERE seq = ANY(%s)",
            [[s for s, _ in scored]],
        )
        rows = {int(r[0]): self._record(r) for r in found}
        return [SearchHit(rows[s], score, metric) for s, score in scored if s in rows]  # type: ignore[arg-type]
