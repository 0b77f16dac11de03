"""Long-term memory search over 100,000 records of 10-30 words (Zipf-distributed words).

Goals (issue 5): similarity top-5 median <= 50 ms, keyword <= 20 ms, through the SQLite
store's indexes; reports insert throughput and the naive record-by-record scan (Koog's
InMemoryRecordStorage) on the same data for comparison.

    python bench/memory_search.py [--records 100000] [--queries 50]
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

import common  # noqa: F401  (puts the repository on sys.path)


def words(rng: random.Random, vocabulary: list[str], weights: list[float], n: int) -> str:
    return " ".join(rng.choices(vocabulary, weights, k=n))


def median_ms(fn, queries: list[str]) -> tuple[float, int]:  # type: ignore[no-untyped-def]
    times, found = [], 0
    for q in queries:
        start = time.perf_counter()
        found += len(fn(q))
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), found


def main() -> None:
    from koogcli.adapters.sqlite_memory import SqliteMemoryStore
    from koogcli.core.memory import MemoryRecord, naive_keyword, naive_similarity

    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=50)
    args = parser.parse_args()
    rng = random.Random(42)
    syllables = ["ka", "lo", "mi", "ne", "ru", "ta", "vo", "shi", "zen", "pa", "do", "ri", "ku"]
    vocabulary = sorted(
        {"".join(rng.choices(syllables, k=rng.randint(2, 4))) for _ in range(30_000)}
    )
    weights = [1 / (rank + 1) for rank in range(len(vocabulary))]
    records = [
        MemoryRecord(words(rng, vocabulary, weights, rng.randint(10, 30)))
        for _ in range(args.records)
    ]
    similarity_queries = [
        words(rng, vocabulary, weights, rng.randint(3, 6)) for _ in range(args.queries)
    ]
    keyword_queries = [
        rng.choice(records).content.split()[rng.randint(0, 5)] for _ in range(args.queries)
    ]

    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteMemoryStore(Path(tmp) / "memory.sqlite3")
        start = time.perf_counter()
        for i in range(0, len(records), 1000):
            store.add(records[i : i + 1000])
        insert = time.perf_counter() - start
        size = sum(p.stat().st_size for p in Path(tmp).iterdir()) / 2**20
        print(
            f"insert: {len(records)} records in {insert:.1f} s ({len(records) / insert:,.0f} records/s), "
            f"{size:.0f} MiB on disk"
        )
        sim, sim_found = median_ms(
            lambda q: store.search_similarity(q, "default", 5), similarity_queries
        )
        kw, kw_found = median_ms(lambda q: store.search_keyword(q, "default", 5), keyword_queries)
        print(f"similarity top-5: median {sim:6.1f} ms ({sim_found} hits)   goal <= 50 ms")
        print(f"keyword    top-5: median {kw:6.1f} ms ({kw_found} hits)   goal <= 20 ms")
        few = max(5, args.queries // 10)
        naive_sim, _ = median_ms(
            lambda q: naive_similarity(records, q, 5), similarity_queries[:few]
        )
        naive_kw, _ = median_ms(lambda q: naive_keyword(records, q, 5), keyword_queries[:few])
        print(
            f"naive full scan (in Python, {few} queries): similarity {naive_sim:7.1f} ms, "
            f"keyword {naive_kw:6.1f} ms"
        )
        store.close()


if __name__ == "__main__":
    main()
