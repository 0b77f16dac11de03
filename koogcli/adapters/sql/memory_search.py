"""One `search(query)` over the five rankings each memory store implements (SQLite and
PostgreSQL alike), so the port stays one method and the stores keep their own SQL."""

from __future__ import annotations

from typing import Protocol

from koogcli.core.memory import MemoryQuery, SearchHit


class Rankings(Protocol):
    def _keyword(self, q: MemoryQuery, /) -> list[SearchHit]: ...

    def _jaccard(self, q: MemoryQuery, /) -> list[SearchHit]: ...

    def _bm25(self, q: MemoryQuery, /) -> list[SearchHit]: ...

    def _cosine(self, q: MemoryQuery, /) -> list[SearchHit]: ...

    def _hybrid(self, q: MemoryQuery, /) -> list[SearchHit]: ...


def dispatch(store: Rankings, q: MemoryQuery) -> list[SearchHit]:
    if q.mode == "keyword" and q.threshold > 1.0:  # every keyword hit scores 1.0
        return []
    ranking = {
        "keyword": store._keyword,
        "jaccard": store._jaccard,
        "fulltext": store._bm25,
        "embedding": store._cosine,
        "hybrid": store._hybrid,
    }[q.mode]
    return ranking(q)
