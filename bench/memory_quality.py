"""How well each memory search mode finds what people mean, on the labelled set in
bench/memory_quality_set.py (200 records, 64 questions): recall@5 (the share of a
question's answers in its top five, out of at most five) and MRR (1 / rank of the first
answer), overall and by kind of phrasing.

Goals (issue 13): fulltext recall@5 >= jaccard + 0.15; hybrid >= both.

Embeddings come from a deterministic local function standing in for an embedding model:
hashed character trigrams of accent-free words (so word forms and accents land close),
plus a few shared directions for words of the same meaning ("owns", "responsible",
"maintains"; "deploy", "release", "Bereitstellung"), as a trained model would place them.
With `--embedding-model NAME` the vectors come from that model on the endpoint in
OPENAI_BASE_URL / OPENAI_API_KEY instead.

    python bench/memory_quality.py [--embedding-model NAME] [--floor COSINE]
"""

from __future__ import annotations

import argparse
import hashlib
import math
import os
import re
import tempfile
import unicodedata
from collections.abc import Callable, Sequence
from pathlib import Path

import common  # noqa: F401  (puts the repository on sys.path)
from memory_quality_set import queries, records

from koogcli.config.schema import EmbeddingSettings
from tests.support import searching

DIM = 256
CONCEPTS = {
    "owner": "owns owned owner owners own responsible maintains maintain runs leads leading "
    "lead contact ask team équipe",
    "deploy": "deploy deploys deployed deploying deployment release rollout ship ships shipped "
    "déploiement déployé bereitstellung despliegue method process strategy",
    "runbook": "runbook runbooks outage outages incident emergency procedure guide paging "
    "pager on-call instructions down",
    "data": "data database store stores information keeps backups retain retained retention copies",
}
CONCEPT_OF = {w: c for c, words in CONCEPTS.items() for w in words.split()}


def _plain(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text.lower())
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def local_embedding(text: str) -> list[float]:
    vector = [0.0] * DIM
    for word in re.findall(r"\w+", _plain(text)):
        concept = CONCEPT_OF.get(word)
        if concept:
            slot = int(hashlib.sha256(concept.encode()).hexdigest(), 16) % DIM
            vector[slot] += 2.0
        padded = f"#{word}#"
        for i in range(len(padded) - 2):
            digest = hashlib.sha256(padded[i : i + 3].encode()).digest()
            vector[int.from_bytes(digest[:4], "big") % DIM] += 1.0 if digest[4] % 2 else -1.0
    norm = math.sqrt(sum(v * v for v in vector)) or 1.0
    return [v / norm for v in vector]


def endpoint_embedder(model: str) -> Callable[[list[str]], list[list[float]]]:
    from koogcli.adapters.model.chat_upstream import OpenAIChatModel, OpenAIEmbedder
    from koogcli.adapters.model.endpoint import resolve_endpoint

    endpoint = resolve_endpoint(
        os.environ.get("OPENAI_BASE_URL", ""), "OPENAI_API_KEY", os.environ, 60, 2
    )
    embedder = OpenAIEmbedder(OpenAIChatModel(endpoint), model)
    return embedder.embed


def score(ranked: Sequence[str], relevant: Sequence[str]) -> tuple[float, float]:
    top = list(ranked[:5])
    recall = len(set(top) & set(relevant)) / min(5, len(relevant))
    first = next((i for i, rid in enumerate(ranked, start=1) if rid in relevant), None)
    return recall, (1 / first if first else 0.0)


def main() -> None:
    from koogcli.adapters.sql.sqlite_memory import SqliteMemoryStore
    from koogcli.core.memory import MemoryRecord

    parser = argparse.ArgumentParser()
    parser.add_argument("--embedding-model", default="")
    parser.add_argument(
        "--floor",
        type=float,
        default=EmbeddingSettings().min_similarity,
        help="cosine at or below which a record without a word match is not returned",
    )
    args = parser.parse_args()
    embed = (
        endpoint_embedder(args.embedding_model)
        if args.embedding_model
        else (lambda texts: [local_embedding(t) for t in texts])
    )
    data = records()
    asked = queries()
    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteMemoryStore(Path(tmp) / "memory.sqlite3")
        store.add(
            [MemoryRecord(text, id=rid) for rid, text in data],
            embed([text for _, text in data]),
            "bench",
        )
        query_vectors = embed([q for q, _, _ in asked])
        modes: dict[str, Callable[[str, list[float]], list[str]]] = {
            "jaccard": lambda q, v: [
                h.record.id for h in searching.jaccard(store, q, "default", 10)
            ],
            "fulltext": lambda q, v: [
                h.record.id for h in searching.fulltext(store, q, "default", 10)
            ],
            "embedding": lambda q, v: [
                h.record.id
                for h in searching.vectors(store, v, "default", "bench", 10, floor=args.floor)
            ],
            "hybrid": lambda q, v: [
                h.record.id
                for h in searching.hybrid(store, q, v, "default", "bench", 10, floor=args.floor)
            ],
        }
        kinds = sorted({kind for _, _, kind in asked})
        print(
            f"{len(data)} records, {len(asked)} questions; embeddings: "
            f"{args.embedding_model or 'local function'}"
        )
        print(
            f"{'mode':10} {'recall@5':>9} {'MRR':>6}   " + "  ".join(f"{k[:14]:>14}" for k in kinds)
        )
        results: dict[str, float] = {}
        for name, run in modes.items():
            per_kind: dict[str, list[float]] = {k: [] for k in kinds}
            recalls, ranks = [], []
            for (question, relevant, kind), vector in zip(asked, query_vectors, strict=True):
                recall, rr = score(run(question, vector), relevant)
                recalls.append(recall)
                ranks.append(rr)
                per_kind[kind].append(recall)
            results[name] = sum(recalls) / len(recalls)
            by_kind = "  ".join(f"{sum(v) / len(v):14.2f}" for v in per_kind.values())
            print(f"{name:10} {results[name]:9.3f} {sum(ranks) / len(ranks):6.3f}   {by_kind}")
        store.close()
    lead = results["fulltext"] - results["jaccard"]
    print(
        f"fulltext - jaccard = {lead:+.3f} (goal >= +0.15); hybrid >= both: "
        f"{results['hybrid'] >= max(results['fulltext'], results['jaccard'])}"
    )


if __name__ == "__main__":
    main()
