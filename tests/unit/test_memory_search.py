"""Memory search in the SQLite store: full-text scores, fusion, metadata filters, and the
derived vector index staying true to the database through additions, deletes and tears."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from koogcli.adapters.sql.memory_scores import fuse
from koogcli.adapters.sql.sqlite_memory import SqliteMemoryStore
from koogcli.core.memory import MemoryRecord
from tests.support import searching


def store_with(new: Callable[[], Any], *texts: str, **meta: str) -> Any:
    store = new()
    store.add([MemoryRecord(t, metadata=dict(meta)) for t in texts])
    return store


def contents(hits: list) -> list[str]:  # type: ignore[type-arg]
    return [h.record.content for h in hits]


def test_fulltext_scores_say_how_much_of_the_query_matched(
    new_memory_store: Callable[[], Any],
) -> None:
    store = store_with(new_memory_store, "deploys are blue-green", "blue notebooks", "green tea")
    [only] = searching.fulltext(store, "how do we deploy on tuesday", "default", 5)
    assert only.record.content == "deploys are blue-green" and only.metric == "bm25"
    assert only.score == pytest.approx(0.5)  # the best hit, holding one word of two
    both = searching.fulltext(store, "blue green", "default", 5)
    assert contents(both)[0] == "deploys are blue-green" and both[0].score == pytest.approx(1.0)
    assert all(0 < h.score <= 1 for h in both)
    assert contents(searching.fulltext(store, "blue green", "default", 5, threshold=0.9)) == [
        "deploys are blue-green"
    ]
    assert searching.fulltext(store, "", "default", 5) == []
    assert searching.fulltext(store, '"; DROP TABLE records; --', "default", 5) == []


def test_fulltext_follows_deletes(new_memory_store: Callable[[], Any]) -> None:
    store = store_with(new_memory_store, "deploys are blue-green", "deploy on fridays")
    first = searching.fulltext(store, "deploy", "default", 5)
    assert len(first) == 2
    store.delete(first[0].record.id)
    assert len(searching.fulltext(store, "deploy", "default", 5)) == 1


def test_metadata_filters_and_several_namespaces(new_memory_store: Callable[[], Any]) -> None:
    store = new_memory_store()
    store.add(
        [
            MemoryRecord("pager rota", "a", metadata={"team": "infra", "level": 2}),
            MemoryRecord("pager app", "a", metadata={"team": "mobile"}),
            MemoryRecord("pager duty", "b", metadata={"team": "infra"}),
        ]
    )
    assert contents(searching.fulltext(store, "pager", "a", 5, where={"team": "infra"})) == [
        "pager rota"
    ]
    assert contents(searching.fulltext(store, "pager", "a", 5, where={"level": "2"})) == [
        "pager rota"
    ]
    assert set(
        contents(searching.fulltext(store, "pager", ["a", "b"], 5, where={"team": "infra"}))
    ) == {
        "pager rota",
        "pager duty",
    }
    assert contents(searching.keyword(store, "pager", None, 5, where={"team": "mobile"})) == [
        "pager app"
    ]
    assert contents(searching.jaccard(store, "pager duty", None, 5, where={"team": "infra"}))[
        0
    ] == ("pager duty")
    assert [r.content for r in store.records(None, {"team": "infra"})] == [
        "pager rota",
        "pager duty",
    ]


def test_fusion_rewards_agreement() -> None:
    words = [(1, 0.9), (2, 0.5), (3, 0.1)]
    vectors = [(2, 0.99), (1, 0.98), (4, 0.2)]
    fused = fuse([words, vectors], 10)
    assert [seq for seq, _ in fused][:2] in ([1, 2], [2, 1])
    assert fused[0][1] < 1.0 and fuse([[(7, 1.0)], [(7, 1.0)]], 5) == [(7, 1.0)]
    assert [seq for seq, _ in fused][2:] == [3, 4] or [seq for seq, _ in fused][2:] == [4, 3]


def vector_store(tmp_path: Path) -> SqliteMemoryStore:
    store = SqliteMemoryStore(tmp_path / "memory.sqlite3")
    records = [MemoryRecord(f"r{i}", "a" if i % 2 else "b") for i in range(6)]
    vectors = [[1.0 if j == i else 0.0 for j in range(6)] for i in range(6)]
    store.add(records, vectors, "m")
    return store


def test_the_vector_index_follows_additions_and_deletes(tmp_path: Path) -> None:
    store = vector_store(tmp_path)
    assert contents(searching.vectors(store, [0, 0, 0, 1, 0, 0], None, "m", 1)) == ["r3"]
    assert contents(searching.vectors(store, [0, 0, 0, 1, 0, 0], "b", "m", 1))[0] != "r3"
    store.add([MemoryRecord("r6", "a")], [[0, 0, 0, 0.9, 0.1, 0]], "m")  # appended
    assert contents(searching.vectors(store, [0, 0, 0, 1, 0, 0], "a", "m", 2)) == ["r3", "r6"]
    [r3] = searching.vectors(store, [0, 0, 0, 1, 0, 0], "a", "m", 1)
    for path in (tmp_path / "memory-vectors").iterdir():
        assert path.stat().st_mode & 0o777 == 0o600, path
    assert (tmp_path / "memory-vectors").stat().st_mode & 0o777 == 0o700
    store.delete(r3.record.id)  # a delete rebuilds the index
    assert contents(searching.vectors(store, [0, 0, 0, 1, 0, 0], "a", "m", 1)) == ["r6"]
    # Another process's store sees the same.
    other = SqliteMemoryStore(tmp_path / "memory.sqlite3")
    assert contents(searching.vectors(other, [0, 0, 0, 1, 0, 0], None, "m", 1)) == ["r6"]


def test_a_torn_or_lost_index_is_rebuilt_from_the_database(tmp_path: Path) -> None:
    store = vector_store(tmp_path)
    assert contents(searching.vectors(store, [0, 1, 0, 0, 0, 0], None, "m", 1)) == ["r1"]
    folder = tmp_path / "memory-vectors"
    [data] = folder.glob("*.f32")
    data.write_bytes(data.read_bytes()[:10])  # torn
    assert contents(searching.vectors(store, [0, 1, 0, 0, 0, 0], None, "m", 1)) == ["r1"]
    for path in folder.iterdir():
        path.unlink()  # lost
    assert contents(searching.vectors(store, [0, 0, 1, 0, 0, 0], None, "m", 1)) == ["r2"]
    assert searching.vectors(store, [1, 0, 0], None, "m", 1) == []  # another dimension: nothing


def test_agent_nouns_find_their_verbs(new_memory_store: Callable[[], Any]) -> None:
    """Porter keeps "owner" and "owned" apart; a question about the owner still finds who
    owns it, and "runners" finds "run", while the word itself still counts once."""
    store = store_with(
        new_memory_store,
        "The scheduler service is owned by the platform team",
        "the scheduler runbook is on the wiki",
        "we run nightly jobs",
    )
    top = searching.fulltext(store, "scheduler owner", "default", 5)
    assert contents(top)[0] == "The scheduler service is owned by the platform team"
    assert top[0].score == pytest.approx(1.0)
    assert contents(searching.fulltext(store, "runners", "default", 5)) == ["we run nightly jobs"]
    assert [h.score for h in searching.fulltext(store, "owners", "default", 5)] == [1.0]
