"""The SQL of long-term memory search, over a connection to `memory.sqlite3`.

Each search returns (record number, score) pairs, best first, already limited to the
namespaces and metadata asked for; `SqliteMemoryStore` turns them into hits.

- fulltext: FTS5 with the porter stemmer over unicode61 (diacritics removed), so "deploy",
  "Deploying" and "DEPLOYS" meet, and so do "déploiement" and "deploiement". Question
  words ("how", "do", "we") are left out of the query, and so are words held by a tenth
  or more of a large memory while rarer ones are present. Ranked by BM25; the score is BM25
  relative to the best hit times the share of the query's words the record holds, so the
  top hit of a query that matches one of two words scores 0.5 and `threshold` keeps a
  meaning across queries.
- jaccard: Koog's word-set overlap through the inverted `tokens` table.
- keyword: Koog's substring match through the trigram index, in insertion order.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Mapping, Sequence

from koogcli.core.errors import CorruptDocumentError
from koogcli.core.memory import MemoryRecord, tokenize

Scored = list[tuple[int, float]]
_TERMS = re.compile(r"\w+")
# Words that carry no subject in English, French, German and Spanish questions: left out of
# full-text queries (unless nothing else is left), so "how do we deploy" is about "deploy".
_STOPWORD_TEXT = """a about an and are as at be by can could did do does for from had has have how i if in
    is it its me my of on or our should so that the their them they this to us was we were
    what when where which who whom why will with would you your
    au aux avec ce ces dans de des du en est et il la le les leur ou par pour qu que qui se
    son sur un une
    auf das dem den der des die ein eine einer es für ist mit nicht und von was wer wie wo
    al con del el en es la las lo los para por que se un una y"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())


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


def query_terms(query: str) -> list[str]:
    """The words a full-text query ranks by: question words left out unless nothing else
    is left."""
    words = set(_TERMS.findall(query.lower()))
    return sorted(words - STOPWORDS) or sorted(words)


def relative_scores(
    found: Sequence[tuple[int, float, int]], ranked: int, limit: int, threshold: float
) -> Scored:
    """(record, raw rank, query words it holds) as 0-1 scores: the rank relative to the best
    hit times the share of the `ranked` query words the record holds; best first."""
    if not found:
        return []
    best = max(raw for _, raw, _ in found) or 1.0
    scored = [(seq, round(max(raw, 0.0) / best * held / ranked, 6)) for seq, raw, held in found]
    kept = [(seq, score) for seq, score in scored if score > 0 and score >= threshold]
    kept.sort(key=lambda s: (-s[1], s[0]))
    return kept[:limit]


def term_forms(term: str) -> list[str]:
    """The term, and for an agent noun the word it is made from, which the Porter stemmer
    leaves apart: "owner"/"owners" also match "own"/"owned", "scheduler" "schedule",
    "runner" "run". A query's word counts once whichever form a record holds."""
    for ending in ("ers", "er"):
        base = term[: -len(ending)]
        if term.endswith(ending) and len(base) >= 3 and base.isalpha():
            if len(base) >= 4 and base[-1] == base[-2] and base[-1] not in "aeiousl":
                base = base[:-1]  # runn -> run, plann -> plan
            return [term, base]
    return [term]


def _phrase(term: str) -> str:
    """An FTS5 match of one query word in any of its forms."""
    forms = ['"' + form.replace('"', '""') + '"' for form in term_forms(term)]
    return forms[0] if len(forms) == 1 else "(" + " OR ".join(forms) + ")"


def fulltext(
    db: sqlite3.Connection,
    query: str,
    namespaces: Sequence[str] | None,
    where: Mapping[str, str],
    limit: int,
    threshold: float,
) -> Scored:
    terms = query_terms(query)
    if not terms or limit <= 0:
        return []
    # A word in a tenth or more of a large memory says little (its BM25 weight is near
    # zero) and costs most (its list of records is long): like a search engine's
    # frequency cutoff, such words rank nothing while rarer words are present.
    frequency = {
        t: db.execute(
            "SELECT count(*) FROM records_text WHERE records_text MATCH ?", (_phrase(t),)
        ).fetchone()[0]
        for t in terms
    }
    size = db.execute("SELECT seq FROM sqlite_sequence WHERE name = 'records'").fetchone()
    cutoff = max(2000, (size[0] if size else 0) // 10)
    ranked = [t for t in terms if frequency[t] <= cutoff] or terms
    present = [t for t in ranked if frequency[t]]
    if not present:
        return []
    match = " OR ".join(_phrase(t) for t in present)
    width = max(limit * 4, 50)
    while True:  # namespaces and metadata apply to the ranked records: widen until enough
        rows = db.execute(
            "SELECT rowid, -bm25(records_text) FROM records_text WHERE records_text MATCH ? "
            "ORDER BY bm25(records_text), rowid LIMIT ?",
            (match, width),
        ).fetchall()
        if namespaces is None and not where:
            kept = rows
        else:
            passing = within(db, [seq for seq, _ in rows], namespaces, where)
            kept = [row for row in rows if row[0] in passing]
        if len(kept) >= width // 4 or len(rows) < width:
            break
        width *= 4
    if not kept:
        return []
    held: dict[int, int] = {}
    wanted = {seq for seq, _ in kept}
    for term in present if len(present) > 1 else []:
        for (seq,) in db.execute(
            "SELECT rowid FROM records_text WHERE records_text MATCH ?", (_phrase(term),)
        ):
            if seq in wanted:
                held[seq] = held.get(seq, 0) + 1
    if len(present) == 1:  # every ranked record holds the one word
        held = dict.fromkeys(wanted, 1)
    counted = [(seq, raw, held.get(seq, 0)) for seq, raw in kept]
    return relative_scores(counted, len(ranked), limit, threshold)


def within(
    db: sqlite3.Connection,
    seqs: Sequence[int],
    namespaces: Sequence[str] | None,
    where: Mapping[str, str],
) -> set[int]:
    """Which of `seqs` are in the namespaces (None: any) with the metadata values asked for."""
    condition, args = scope(namespaces, where)
    rows = db.execute(
        f"SELECT r.seq FROM records r WHERE r.seq IN (SELECT value FROM json_each(?)){condition}",
        (json.dumps(list(seqs)), *args),
    )
    return {int(seq) for (seq,) in rows}


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
    # The (namespace, token, record) key answers most of it; records are joined only for
    # metadata filters.
    if namespaces is None:
        spaces, space_args = "", []
    elif len(namespaces) == 1:
        spaces, space_args = " AND t.namespace = ?", [namespaces[0]]
    else:
        spaces = " AND t.namespace IN (SELECT value FROM json_each(?))"
        space_args = [json.dumps(list(namespaces))]
    join, condition, args = "", "", list[object]()
    if where:
        condition, args = scope(None, where)
        join = " JOIN records r ON r.seq = t.record"
    rows = db.execute(
        "SELECT t.record, CAST(COUNT(*) AS REAL) / (? + t.ntokens - COUNT(*)) AS score "
        f"FROM tokens t{join} "
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


def above(ranking: Scored, floor: float) -> Scored:
    """A cosine ranking without the records at or below `floor` (§5.16): the nearest
    records are returned whether or not anything is near, and an unrelated record must
    never be returned or injected because nothing better exists."""
    return [(seq, score) for seq, score in ranking if score > floor]


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


def record_from_row(row: Sequence[object], where: str) -> MemoryRecord:
    """A record from its row (seq, id, namespace, content, metadata, created_at, source); a
    damaged row (metadata that is not a JSON object, a field of the wrong type) is a
    storage error naming `where` and the record, never an internal error."""
    _, rid, namespace, content, metadata, created_at, source = row
    try:
        parsed = json.loads(str(metadata))
    except (ValueError, RecursionError):
        parsed = None
    fields = (rid, namespace, content, created_at)
    if not isinstance(parsed, dict) or not all(isinstance(f, str) for f in fields):
        what = (
            "metadata that is not a JSON object"
            if not isinstance(parsed, dict)
            else "a field of the wrong type"
        )
        raise CorruptDocumentError(
            f"memory record {rid} in {where} is damaged: {what}",
            hint="delete the record (`koog memory delete ID --yes`) or restore the database from a backup",
        )
    return MemoryRecord(
        str(content),
        str(namespace),
        str(rid),
        parsed,
        str(created_at),
        source if isinstance(source, str) else None,
    )
