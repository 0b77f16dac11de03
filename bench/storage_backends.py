"""The PostgreSQL backend against the file backend, on this machine (loopback).

1. One-shot turn overhead: whole `koog chat -s NAME "hi"` processes against the local test
   server (answering instantly), files and PostgreSQL alternating, medians of wall and CPU
   time. Goal: PostgreSQL <= 1.5x the file backend's wall time.
2. Memory vector search over 100,000 records x 1,536 dimensions through PgMemoryStore
   (pgvector HNSW index, cosine): top-5 median in process, and recall@5 against exact
   cosine computed here in float64. Goals: <= 30 ms, recall@5 >= 0.95. Data (`--data`):
   `topics` (default: records and queries around 10,000 sub-topics of 200 topics, as
   embeddings of texts on related subjects) or `clustered` (bench/memory_search.py's
   generator, whose queries come from other centres than the records: no record is near
   any query, the worst case for an approximate index). The cosine of the 5th neighbour
   and its gap to the 51st are printed, so the difficulty is visible.

    python bench/storage_backends.py [--runs 15] [--records 100000] [--dims 1536]
        [--queries 50] [--url postgresql://USER@HOST:PORT/DB]

Without --url a PostgreSQL 16 with pgvector is started from the `pgserver` wheel (the test
extra) in a temp dir, as the test suite does.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

from common import KOOG, clean_env

from tests.support import searching


def cpu_and_wall(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    start = time.perf_counter()
    child = subprocess.Popen(
        argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{argv} failed: {child.stderr.read().decode()[-400:]}")  # type: ignore[union-attr]
    return wall, usage.ru_utime + usage.ru_stime


def turns(url: str, runs: int) -> None:
    from tests.fakes.openai_server import FakeOpenAIServer

    server = FakeOpenAIServer().start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            files = clean_env(Path(tmp), OPENAI_BASE_URL=server.base_url, OPENAI_API_KEY="x")
            postgres = {
                **files,
                "KOOG_DATABASE_URL": url,
                "KOOG_DATABASE_SCHEMA": f"bench_{uuid.uuid4().hex[:8]}",
            }
            argv = [KOOG, "chat", "-s", "bench", "hi"]
            measured: dict[str, list[tuple[float, float]]] = {"files": [], "postgresql": []}
            for i in range(runs + 1):  # the first pair warms up (and creates the schema)
                for name, env in (("files", files), ("postgresql", postgres)):
                    took = cpu_and_wall(argv, env)
                    if i:
                        measured[name].append(took)
            wall = {n: statistics.median(w for w, _ in m) for n, m in measured.items()}
            cpu = {n: statistics.median(c for _, c in m) for n, m in measured.items()}
            for name in measured:
                print(
                    f"one-shot turn, {name:10s}: wall {wall[name] * 1000:6.0f} ms, "
                    f"CPU {cpu[name] * 1000:6.0f} ms (median of {runs})"
                )
            ratio = wall["postgresql"] / wall["files"]
            print(f"PostgreSQL / files wall: {ratio:.2f}x   goal <= 1.5x")
    finally:
        server.stop()


def topics(count: int, dim: int, seed: int) -> list[list[float]]:
    """Records around sub-topics of topics: every record has a few clear neighbours."""
    import numpy as np

    generator = np.random.default_rng(7)  # the same topics for records and queries
    centres = generator.standard_normal((200, dim)).astype(np.float32)
    subtopics = centres[generator.integers(0, 200, 10_000)]
    subtopics += generator.standard_normal((10_000, dim)).astype(np.float32) * 0.5
    draw = np.random.default_rng(seed)
    which = draw.integers(0, 10_000, count)
    noise = draw.standard_normal((count, dim)).astype(np.float32) * 0.25
    return (subtopics[which] + noise).tolist()  # type: ignore[no-any-return]


def vectors(url: str, records: int, dim: int, queries: int, kind: str) -> None:
    import numpy as np
    from memory_search import clustered

    from koogcli.adapters.postgres.database import Database
    from koogcli.adapters.postgres.memory import PgMemoryStore
    from koogcli.core.memory import MemoryRecord

    rng = random.Random(dim)
    if kind == "topics":
        data, asked = topics(records, dim, 3), topics(queries, dim, 11)
    else:
        data, asked = clustered(rng, records, dim), clustered(rng, queries, dim, seed=11)
    store = PgMemoryStore(Database(url, f"bench_{uuid.uuid4().hex[:8]}"))
    rows = [MemoryRecord(f"record {i}") for i in range(records)]
    start = time.perf_counter()
    for i in range(0, records, 2000):
        store.add(rows[i : i + 2000], data[i : i + 2000], "bench")
    insert = time.perf_counter() - start
    start = time.perf_counter()
    searching.vectors(store, asked[0], "default", "bench", 5)
    build = time.perf_counter() - start
    times = []
    seq_of = {r.id: i for i, r in enumerate(rows)}
    exact = np.asarray(data, dtype=np.float64)
    exact /= np.linalg.norm(exact, axis=1, keepdims=True)
    hit = 0
    gaps = []
    for q in asked:
        began = time.perf_counter()
        found = searching.vectors(store, q, "default", "bench", 5)
        times.append((time.perf_counter() - began) * 1000)
        v = np.asarray(q, dtype=np.float64)
        similarity = exact @ (v / np.linalg.norm(v))
        order = np.argsort(-similarity)
        gaps.append(
            (float(similarity[order[4]]), float(similarity[order[4]] - similarity[order[50]]))
        )
        hit += len(set(order[:5].tolist()) & {seq_of[h.record.id] for h in found})
    print(
        f"vectors {records:,} x {dim} ({kind}; 5th neighbour at cosine "
        f"{statistics.median(g[0] for g in gaps):.3f}, "
        f"{statistics.median(g[1] for g in gaps):.3f} above the 51st): insert {insert:.0f} s, HNSW build (first search) "
        f"{build:.0f} s, top-5 median {statistics.median(times):.1f} ms   goal <= 30 ms; "
        f"recall@5 {hit / (5 * len(asked)):.3f}   goal >= 0.95"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--dims", type=int, default=1536)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--url", default="")
    parser.add_argument("--skip-vectors", action="store_true")
    parser.add_argument("--skip-turns", action="store_true")
    parser.add_argument("--data", default="topics")
    args = parser.parse_args()
    server = None
    url = args.url
    if not url:
        from tests.support import pg_server

        server = pg_server.start()
        url = server.url
    try:
        if not args.skip_turns:
            turns(url, args.runs)
        if not args.skip_vectors:
            for kind in args.data.split(","):
                vectors(url, args.records, args.dims, args.queries, kind)
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
