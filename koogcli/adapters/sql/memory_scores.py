"""How long-term memory scores, the same over SQLite and PostgreSQL.

Rankings are (record number, score) pairs, best first. Full-text search leaves question
words ("how", "do", "we") out of the query, and words held by a tenth or more of a large
memory while rarer ones are present; its score is the engine's rank relative to the best
hit times the share of the query's words the record holds, so the top hit of a query that
matches one of two words scores 0.5 and `threshold` keeps a meaning across queries.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from koogcli.core.errors import CorruptDocumentError
from koogcli.core.memory import MemoryRecord

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
