"""The SQL of long-term memory search, over a connection to `memory.sqlite3`.

Each search returns (record number, score) pairs, best first, already limited to the
namespaces and metadata asked for; `SqliteMemoryStore` turns them into hits.

- fulltext: FTS5 with the porter stemmer over unicode61 (diacritics removed), so "deploy",
  "Deploying" and "DEPLOYS" meet, and so do "déploiement" and "deploiement". Ranked by
  BM25; the score is BM25 relative to the best hit times the share of the query's words
  the record holds, so the top hit of a query that matches only one of four words scores
  0.25 and `threshold` keeps a meaning across queries.
- jaccard: Koog's word-set overlap through the inverted `tokens` table.
- keyword: Koog's substring match through the trigram index, in insertion order.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Mapping, Sequence

from koogcli.core.memory import tokenize

Scored = list[tuple[int, float]]
_TERMS = re.compile(r"\w+")


def scope(
    namespaces: Sequence[str] | None, where: Mapping[str, str], alias: str = "r"
) -> tuple[str, list[object]]:
    """SQL conditions (joined with AND, each led by AND) for the namespaces (None: all)
    and the metadata values asked for (compared as text)."""
    sql, args = "", list[object]()
    if namespaces is not None:
        sql += f" AND {alias}.namespace IN (SELECT value FROM json_each(?))"
        args.append(json.dumps(list(namespaces)))
    for key, value in where.items():
        sql += f" AND CAST(json_extract({alias}.metadata, ?) AS TEXT) = ?"
        args += ['$."' + key.replace('"', '""') + '"', value]
    return sql, args


def fulltext(
    db: sqlite3.Connection,
    query: str,
    namespaces: Sequence[str] | None,
    where: Mapping[str, str],
    limit: int,
    threshold: float,
) -> Scored:
    terms = sorted({t for t in _TERMS.findall(query.lower())})
    if not terms or limit <= 0:
        return []
    match = " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
    condition, args = scope(namespaces, where)
    rows = db.execute(
        "SELECT f.rowid, -bm25(records_text) FROM records_text f JOIN records r "
        f"ON r.seq = f.rowid WHERE records_text MATCH ?{condition} "
        "ORDER BY bm25(records_text), f.rowid LIMIT ?",
        (match, *args, max(limit * 4, 50)),
    ).fetchall()
    if not rows:
        return []
    best = max(raw for _, raw in rows) or 1.0
    seqs = json.dumps([seq for seq, _ in rows])
    held: dict[int, int] = {}
    for term in terms:
        quoted = '"' + term.replace('"', '""') + '"'
        for (seq,) in db.execute(
            "SELECT rowid FROM records_text WHERE records_text MATCH ? AND rowid IN "
            "(SELECT value FROM json_each(?))",
            (quoted, seqs),
        ):
            held[seq] = held.get(seq, 0) + 1
    scored = [
        (seq, round(max(raw, 0.0) / best * held.get(seq, 0) / len(terms), 6)) for seq, raw in rows
    ]
    kept = [(seq, score) for seq, score in scored if score > 0 and score >= threshold]
    kept.sort(key=lambda s: (-s[1], s[0]))
    return kept[:limit]


def jaccard(
    db: sqlite3.Connection,
    query: str,
    namespaces: Sequence[str] | None,
    where: Mapping[str, str],
    limit: int,
    threshold: float,
) -> Scored:
    words = sorted(tokenize(query))
    if not words:
        return []
    condition, args = scope(namespaces, where)
    spaces = "" if namespaces is None else " AND t.namespace IN (SELECT value FROM json_each(?))"
    space_args = [] if namespaces is None else [json.dumps(list(namespaces))]
    rows = db.execute(
        "SELECT t.record, CAST(COUNT(*) AS REAL) / (? + t.ntokens - COUNT(*)) AS score "
        "FROM tokens t JOIN records r ON r.seq = t.record "
        f"WHERE t.token IN (SELECT value FROM json_each(?)){spaces}{condition} "
        "GROUP BY t.record HAVING score > 0 AND score >= ? ORDER BY score DESC, t.record ASC "
        "LIMIT ?",
        (len(words), json.dumps(words), *space_args, *args, threshold, limit),
    ).fetchall()
    return [(int(seq), float(score)) for seq, score in rows]


def keyword(
    db: sqlite3.Connection,
    query: str,
    namespaces: Sequence[str] | None,
    where: Mapping[str, str],
    limit: int,
) -> Scored:
    needle = query.lower()
    condition, args = scope(namespaces, where)
    if len(needle) >= 3:
        phrase = '"' + needle.replace('"', '""') + '"'
        rows = db.execute(
            "SELECT r.seq FROM records_fts f JOIN records r ON r.seq = f.rowid "
            f"WHERE records_fts MATCH ? AND instr(r.content_lower, ?) > 0{condition} "
            "ORDER BY r.seq LIMIT ?",
            (phrase, needle, *args, limit),
        )
    else:
        rows = db.execute(
            f"SELECT r.seq FROM records r WHERE instr(r.content_lower, ?) > 0{condition} "
            "ORDER BY r.seq LIMIT ?",
            (needle, *args, limit),
        )
    return [(int(seq), 1.0) for (seq,) in rows]


def allowed(db: sqlite3.Connection, seqs: Sequence[int], where: Mapping[str, str]) -> set[int]:
    """Which of `seqs` have the metadata values asked for."""
    condition, args = scope(None, where)
    rows = db.execute(
        f"SELECT r.seq FROM records r WHERE r.seq IN (SELECT value FROM json_each(?)){condition}",
        (json.dumps(list(seqs)), *args),
    )
    return {int(seq) for (seq,) in rows}


def fuse(rankings: Sequence[Scored], limit: int, k: int = 60) -> Scored:
    """Reciprocal rank fusion: each ranking gives 1 / (k + rank); the sum is scaled so a
    record first in every ranking scores 1.0."""
    total: dict[int, float] = {}
    for ranking in rankings:
        for rank, (seq, _) in enumerate(ranking, start=1):
            total[seq] = total.get(seq, 0.0) + 1.0 / (k + rank)
    top = len(rankings) / (k + 1)
    fused = sorted(
        ((seq, round(s / top, 6)) for seq, s in total.items()), key=lambda s: (-s[1], s[0])
    )
    return fused[:limit]
