"""PgMemoryStore: long-term memory in PostgreSQL, ranked by its own indexes with the file
backend's modes and scores; everything else is adapters/sql/memory.py.

- fulltext: a `tsvector` per record in the configured text search language, over the text
  with its diacritics removed (so no `unaccent` extension is needed), scored as
  adapters/sql/memory_scores.py says. Query words are stemmed by a Snowball dictionary
  without the language's stop-word list: "own" is an English stop word, yet it is how
  "owned" is indexed.
- embeddings: vectors are `real[]` rows. With the pgvector extension each (model, dimension)
  gets an HNSW index over the arrays cast to `vector(d)`, searched by cosine distance; a
  filtered search that comes back short is redone exactly. Without the extension vector
  modes fall back to full-text, and the store says so once.
"""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Callable, Sequence
from typing import Any

from koogcli.adapters.extras import need
from koogcli.adapters.postgres.database import Database
from koogcli.adapters.sql.memory import Scope, SqlMemoryStore
from koogcli.adapters.sql.memory_scores import Scored, query_terms, relative_scores, term_forms
from koogcli.core.memory import MemoryRecord


class PgMemoryStore(SqlMemoryStore):
    RECORDS, TOKENS = "memory_records", "memory_tokens"
    VECTORS, FORGOTTEN = "memory_vectors", "memory_forgotten"
    PLACEMENTS = "memory_placements"
    VECTOR_PARAM = "%b"  # real[] in the binary format (`binary`)

    def __init__(
        self, db: Database, language: str = "english", warn: Callable[[str], None] | None = None
    ) -> None:
        super().__init__(db)
        self.language = language
        self.warn = warn
        self._vector_type: str | None = None
        self._stemmer: str | None = None  # a stop-word-free stemming dictionary, if any
        self._checked = False
        self._warned = False

    def _ready(self) -> None:
        if self._checked:
            return
        conn = self.db.conn
        with self.db.errors():
            found = conn.execute(
                "SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'vector'"
            ).fetchone()
            self._vector_type = f"{found[0]}.vector" if found else None
            use_language(conn, self.language)
            self._stemmer = stem_dictionary(conn, self.language)
        register_binary_arrays(conn)
        self._checked = True

    def _text_column(self, r: MemoryRecord, words: set[str]) -> tuple[str, str, list[object]]:
        return "search", "to_tsvector(%s::regconfig, %s)", [self.language, fold(r.content)]

    def _pack(self, vector: Sequence[float]) -> object:
        return binary(vector)

    def _unpack(self, stored: Any) -> list[float]:
        return list(stored)

    def _metadata(self, alias: str, key: str) -> tuple[str, object]:
        return f"({alias}.metadata::jsonb ->> %s)", key

    def vectors_supported(self) -> bool:
        self._ready()
        if self._vector_type is None and not self._warned and self.warn is not None:
            self._warned = True
            self.warn(
                f"the PostgreSQL database at {self.db.where} has no pgvector extension: "
                "memory search uses full-text instead of embeddings"
            )
        return self._vector_type is not None

    def _fulltext(self, text: str, scope: Scope, limit: int, threshold: float) -> Scored:
        terms = query_terms(fold(text))
        if not terms or limit <= 0:
            return []
        # A term the language drops (its own stop words) matches nothing: left out.
        frequency: dict[str, int] = {}
        for term in terms:
            sql, term_args = forms(term, self.language, self._stemmer)
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
        # Words in a tenth or more of a large memory rank nothing while rarer ones are there.
        size = self._rows("SELECT last_value FROM memory_records_seq_seq")[0][0]
        cutoff = max(2000, int(size) // 10)
        ranked = [t for t in frequency if frequency[t] <= cutoff] or list(frequency)
        present = [t for t in ranked if frequency[t]]
        if not present:
            return []
        built = [forms(t, self.language, self._stemmer) for t in present]
        queries = " || ".join(sql for sql, _ in built)
        held = " + ".join(f"(r.search @@ ({sql}))::int" for sql, _ in built)
        pairs = [x for _, term_args in built for x in term_args]
        condition, args = self._scope(scope)
        found = self._rows(
            f"SELECT r.seq, ts_rank(r.search, q, 1), {held} FROM memory_records r, "
            f"(SELECT {queries} AS q) query WHERE r.search @@ q{condition} "
            "ORDER BY 2 DESC, r.seq LIMIT %s",
            [*pairs, *pairs, *args, max(limit * 4, 50)],
        )
        counted = [(int(seq), float(raw), int(held)) for seq, raw, held in found]
        return relative_scores(counted, len(ranked), limit, threshold)

    def _nearest(self, vector: Sequence[float], scope: Scope, model: str, limit: int) -> Scored:
        """Through the HNSW index, and exactly when filters left its answer short."""
        if not self.vectors_supported() or not vector:
            return []
        self._ensure_index(model, len(vector))
        kind = f"{self._vector_type}({len(vector)})"
        condition, args = self._scope(scope)
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
            if len(found) < limit and (scope.spaces is not None or scope.where):
                cur.execute("SET LOCAL enable_indexscan = off")  # exact, over what passes
                cur.execute(f"{select} ORDER BY {distance} LIMIT %s", [text, *args, text, limit])
                found = cur.fetchall()
        return [(int(seq), round(float(score), 6)) for seq, score in found]

    def _ensure_index(self, model: str, dimension: int) -> None:
        """One HNSW index per (model, dimension), built by the first search that needs it
        (after a bulk load, building once is far quicker than growing it row by row);
        later additions are indexed as they are stored."""
        from psycopg import sql

        name = "memory_hnsw_" + hashlib.sha256(f"{model}\0{dimension}".encode()).hexdigest()[:16]
        conn = self.db.conn
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


class Real4Array(bytes):
    """A vector already in PostgreSQL's binary `real[]` form (see `binary`)."""


def binary(vector: Sequence[float]) -> Real4Array:
    """`real[]` in the binary wire format, built by numpy: sending 1,536 floats this way
    costs microseconds where adapting a Python list element by element costs milliseconds."""
    import struct

    need("numpy")
    import numpy as np

    values = np.asarray(vector, dtype=">f4")
    header = struct.pack(">iiIii", 1, 0, 700, len(values), 1)  # 1 dim, no nulls, float4
    body = np.empty(len(values), dtype=[("size", ">i4"), ("value", ">f4")])
    body["size"], body["value"] = 4, values
    return Real4Array(header + body.tobytes())


def register_binary_arrays(conn: Any) -> None:
    from psycopg import postgres
    from psycopg.adapt import Dumper
    from psycopg.pq import Format

    class Real4ArrayDumper(Dumper):
        format = Format.BINARY
        oid = postgres.types["real"].array_oid

        def dump(self, obj: Any) -> bytes:
            return bytes(obj)

    conn.adapters.register_dumper(Real4Array, Real4ArrayDumper)


_FIND_DICTIONARY = (
    "SELECT 1 FROM pg_ts_dict d JOIN pg_namespace n ON n.oid = d.dictnamespace "
    "WHERE d.dictname = %s AND n.nspname = current_schema()"
)


def fold(text: str) -> str:
    """Lower-cased, without diacritics: "Déploiement" and "deploiement" are one word."""
    decomposed = unicodedata.normalize("NFKD", text.lower())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def use_language(conn: Any, language: str) -> None:
    """Records are indexed in one language; a new setting re-indexes them once."""
    with conn.transaction():
        conn.execute("LOCK TABLE memory_settings IN EXCLUSIVE MODE")
        row = conn.execute("SELECT value FROM memory_settings WHERE key = 'language'").fetchone()
        if row is not None and row[0] == language:
            return
        found = conn.execute("SELECT seq, content FROM memory_records").fetchall()
        with conn.cursor() as cur:
            cur.executemany(
                "UPDATE memory_records SET search = to_tsvector(%s::regconfig, %s) WHERE seq = %s",
                [(language, fold(content), seq) for seq, content in found],
            )
        conn.execute(
            "INSERT INTO memory_settings VALUES ('language', %s) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            [language],
        )


def stem_dictionary(conn: Any, language: str) -> str | None:
    """The stop-word-free stemming dictionary of the language, created once per schema;
    None for a language without a Snowball stemmer (`simple`, a custom configuration):
    then the configuration's own query parsing is used."""
    import psycopg

    name = f"koog_stem_{language}"[:63]
    if conn.execute(_FIND_DICTIONARY, [name]).fetchone():
        return name
    try:
        with conn.transaction():
            conn.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended(current_schema() || %s, 0))",
                [":" + name],
            )
            if conn.execute(_FIND_DICTIONARY, [name]).fetchone() is None:
                conn.execute(
                    f"CREATE TEXT SEARCH DICTIONARY {name} "
                    f"(TEMPLATE = snowball, Language = {language})"
                )
    except psycopg.Error:
        return None
    return name


def forms(term: str, language: str, stemmer: str | None) -> tuple[str, list[str]]:
    """A tsquery (SQL and arguments) matching one query word in any of its forms
    (memory_scores.term_forms)."""
    words = term_forms(term)
    if stemmer is None:
        sql = " || ".join(["plainto_tsquery(%s::regconfig, %s)"] * len(words))
        return sql, [x for word in words for x in (language, word)]
    one = (
        "coalesce((SELECT string_agg(quote_literal(l), ' | ')::tsquery "
        "FROM unnest(ts_lexize(%s::regdictionary, %s)) l), ''::tsquery)"
    )
    return " || ".join([one] * len(words)), [x for word in words for x in (stemmer, word)]
