"""Memory searches in the shape tests and benchmarks ask them, each one `MemoryQuery`
through the store's single `search` (the port)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from koogcli.core.memory import MemoryQuery, Mode, Namespaces, SearchHit
from koogcli.core.ports import MemoryStore

Where = Mapping[str, str] | None
ByWords = Callable[..., list[SearchHit]]


def _by_words(mode: Mode) -> ByWords:
    def search(
        store: MemoryStore,
        text: str,
        ns: Namespaces,
        limit: int,
        threshold: float = 0.0,
        where: Where = None,
    ) -> list[SearchHit]:
        return store.search(MemoryQuery(mode, text, ns, limit, threshold, where))

    return search


keyword, jaccard, fulltext = _by_words("keyword"), _by_words("jaccard"), _by_words("fulltext")


def hybrid(
    store: MemoryStore,
    text: str,
    vector: Sequence[float],
    ns: Namespaces,
    model: str,
    limit: int,
    threshold: float = 0.0,
    where: Where = None,
    floor: float = -1.0,
    mode: Mode = "hybrid",
) -> list[SearchHit]:
    return store.search(MemoryQuery(mode, text, ns, limit, threshold, where, vector, model, floor))


def vectors(
    store: MemoryStore, vector: Sequence[float], *rest: Any, **named: Any
) -> list[SearchHit]:
    """`hybrid` without the text: (namespaces, model, limit, threshold, where, floor)."""
    return hybrid(store, "", vector, *rest, **named, mode="embedding")
