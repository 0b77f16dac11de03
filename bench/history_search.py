"""`koog history search` over many large transcripts (issue 33): sessions of `--messages`
messages each, `--sessions` of them, in one koog.sqlite3; the median time of a search in
process (the index, not start-up), for a word in every session, a rare word and a prefix.

    python bench/history_search.py [--sessions 20] [--messages 50000] [--runs 9]

Goal: at most 100 ms per search at 20 sessions of 50,000 messages.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from common import ROOT  # noqa: F401  (puts the checkout on sys.path)

from koogcli.adapters.sql.sqlite import SqliteDatabase
from koogcli.adapters.sql.transcript import SqlTranscriptStore
from koogcli.core.messages import assistant, user

WORDS = [
    "harbour",
    "quay",
    "ferry",
    "tide",
    "nets",
    "gulls",
    "boats",
    "pier",
    "lantern",
    "anchor",
    "rope",
]


def seed(store: SqlTranscriptStore, sessions: int, messages: int) -> None:
    """Each session a turn per two messages, as chats write them; rows inserted in
    batches straight through the store's database (the same rows `append` writes)."""
    from koogcli.adapters.sql import rows

    for s in range(sessions):
        batch: list[tuple[str, str, str]] = []
        for i in range(messages):
            text = f"message {i} about the {WORDS[i % len(WORDS)]} and the {WORDS[(i * 7) % len(WORDS)]}"
            if i == messages // 2 and s == sessions // 2:
                text += " and one zeppelin"
            m = user(text) if i % 2 == 0 else assistant(text)
            batch.append((f"s{s}", f"t{s}-{i // 2}", rows.body(m)))
            if len(batch) == 10_000 or i == messages - 1:
                with store.db.transaction() as cur:
                    cur.executemany(
                        "INSERT INTO transcript (session, turn_id, body) VALUES (%s, %s, %s)", batch
                    )
                batch = []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = SqlTranscriptStore(SqliteDatabase(Path(tmp) / "koog.sqlite3"))
        start = time.perf_counter()
        seed(store, args.sessions, args.messages)
        total = args.sessions * args.messages
        print(f"seeded {total:,} messages in {time.perf_counter() - start:.1f} s")
        for words in ("harbour", "zeppelin", "zep", "ferry lantern"):
            times = []
            for _ in range(args.runs):
                begin = time.perf_counter()
                hits = store.search(words, None, 20)
                times.append(time.perf_counter() - begin)
            numbered = []
            for _ in range(args.runs):
                begin = time.perf_counter()
                found = store.search(words, None, 20)
                for name in {hit.session for hit in found}:
                    store.turn_numbers(name, [h.position for h in found if h.session == name])
                numbered.append(time.perf_counter() - begin)
            print(
                f"search {words!r}: {len(hits)} hits, median {statistics.median(times) * 1000:.1f}"
                f" ms; with turn numbers {statistics.median(numbered) * 1000:.1f} ms"
            )


if __name__ == "__main__":
    main()
