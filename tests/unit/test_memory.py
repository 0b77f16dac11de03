"""Long-term memory: Koog's cases 46-51 and 55 (KOOG_SEMANTICS §5.2), and the SQLite store
checked against the record-by-record reference on random data."""

from __future__ import annotations

import random
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from koogcli.adapters.sql.sqlite_memory import SqliteMemoryStore
from koogcli.core import memory as core
from koogcli.core.errors import CorruptDocumentError, UnknownFormatError
from koogcli.core.memory import MemoryRecord, SearchHit
from koogcli.core.messages import Message, system, user
from tests.support import searching


@pytest.fixture
def store(new_memory_store: Callable[[], Any]) -> Any:
    """Koog's cases hold on either backend's store (SQLite file, PostgreSQL)."""
    return new_memory_store()


def contents(hits: list[SearchHit]) -> list[str]:
    return [h.record.content for h in hits]


def test_case46_ids_are_generated(store: Any) -> None:
    ids = store.add([MemoryRecord("Test content 1"), MemoryRecord("Test content 2")])
    assert store.size("default") == 2 and len(set(ids)) == 2 and all(ids)


def test_case47_keyword_substring(store: Any) -> None:
    store.add(
        [
            MemoryRecord(t)
            for t in [
                "Kotlin is a programming language",
                "Java is also a programming language",
                "Python is popular for data science",
            ]
        ]
    )
    assert len(searching.keyword(store, "programming", "default", 10)) == 2


def test_case48_keyword_limit_and_case(store: Any) -> None:
    store.add([MemoryRecord(f"Test {i}") for i in range(3)])
    assert len(searching.keyword(store, "Test", "default", 2)) == 2
    store.add([MemoryRecord("KOTLIN is great", "k"), MemoryRecord("kotlin is awesome", "k")])
    assert len(searching.keyword(store, "Kotlin", "k", 10)) == 2


def test_case49_jaccard(store: Any) -> None:
    store.add([MemoryRecord("apple orange banana"), MemoryRecord("car truck motorcycle")])
    hits = searching.jaccard(store, "banana apple", "default", 10)
    assert contents(hits) == ["apple orange banana"] and hits[0].score == pytest.approx(2 / 3)
    assert searching.jaccard(store, "banana apple", "default", 10, threshold=0.7) == []


def test_case50_no_overlap_no_results(store: Any) -> None:
    store.add(
        [
            MemoryRecord("Kotlin was developed by JetBrains"),
            MemoryRecord("Kotlin coroutines simplify async programming"),
        ]
    )
    assert searching.jaccard(store, "Tell me about Python and Django", "default", 10) == []


def test_case51_tokenisation_is_ascii_words() -> None:
    assert core.tokenize("Hello, world! hello_there café") == {
        "hello",
        "world",
        "hello_there",
        "caf",
    }


def test_case55_system_augmenter() -> None:
    hits = [
        SearchHit(MemoryRecord("A"), 1.0, "keyword"),
        SearchHit(MemoryRecord("B"), 1.0, "keyword"),
    ]
    out = core.augment([system("sys"), user("q")], hits, "system")
    expected = core.SYSTEM_TEMPLATE.replace(
        core.PLACEHOLDER, "Relevant information:\n[1] A\n\n[2] B"
    )
    assert out[0].text == "sys\n\n" + expected
    assert out[1].text == "q"
    no_system = [user("q")]
    assert core.augment(no_system, hits, "system") == no_system
    assert core.augment([system("s"), user("q")], [], "system")[0].text == "s"


def test_user_augmenter_targets_the_last_user_message() -> None:
    hits = [SearchHit(MemoryRecord("fact"), 1.0, "keyword")]
    out = core.augment([user("first"), user("second")], hits, "user")
    assert out[0].text == "first" and out[1].text.startswith("second\n\nSome context")
    assert "[1] fact" in out[1].text


def test_namespaces_are_isolated(store: Any) -> None:
    store.add([MemoryRecord("secret plan", "a"), MemoryRecord("public plan", "b")])
    assert contents(searching.keyword(store, "plan", "a", 10)) == ["secret plan"]
    assert contents(searching.jaccard(store, "plan", "b", 10)) == ["public plan"]
    assert searching.keyword(store, "plan", "nowhere", 10) == []


def test_store_agrees_with_the_reference_on_random_data(store: Any) -> None:
    rng = random.Random(7)
    vocabulary = [f"w{i}" for i in range(40)] + ["Kotlin", "kotlin", "café", "x_y", "Zz"]
    records = [
        MemoryRecord(" ".join(rng.choice(vocabulary) for _ in range(rng.randint(3, 12))))
        for _ in range(300)
    ]
    store.add(records)
    for _ in range(40):
        query = " ".join(rng.choice(vocabulary) for _ in range(rng.randint(1, 4)))
        threshold = rng.choice([0.0, 0.1, 0.25])
        expected = core.naive_similarity(records, query, 7, threshold)
        got = searching.jaccard(store, query, "default", 7, threshold)
        assert [(h.record.id, round(h.score, 9)) for h in got] == [
            (h.record.id, round(h.score, 9)) for h in expected
        ]
        needle = rng.choice(vocabulary)[: rng.randint(1, 4)]
        assert [h.record.id for h in searching.keyword(store, needle, "default", 9)] == [
            h.record.id for h in core.naive_keyword(records, needle, 9)
        ]


def test_sources_deduplicate(store: Any) -> None:
    first = store.add([MemoryRecord("x", source="s/1"), MemoryRecord("y", source="s/2")])
    again = store.add([MemoryRecord("x", source="s/1"), MemoryRecord("z", source="s/3")])
    assert len(first) == 2 and len(again) == 1 and store.size("default") == 3
    assert store.known_sources("default", ["s/1", "s/9"]) == {"s/1"}


def test_delete_removes_from_every_index(store: Any) -> None:
    [gone, _] = store.add([MemoryRecord("alpha beta"), MemoryRecord("alpha gamma")])
    assert store.delete(gone) and not store.delete(gone)
    assert contents(searching.jaccard(store, "alpha beta", "default", 10)) == ["alpha gamma"]
    assert contents(searching.keyword(store, "alpha", "default", 10)) == ["alpha gamma"]


def test_vectors_rank_by_cosine(store: Any) -> None:
    store.add([MemoryRecord("east"), MemoryRecord("north")], [[1.0, 0.0], [0.0, 1.0]], "m")
    hits = searching.vectors(store, [0.9, 0.1], "default", "m", 10)
    assert contents(hits) == ["east", "north"] and hits[0].metric == "cosine"
    assert store.vector_count("m") == 2 and store.without_vectors("default", "m") == []


def test_database_is_private_and_reads_do_not_create_it(tmp_path: Path) -> None:
    path = tmp_path / "m.sqlite3"
    reader = SqliteMemoryStore(path)
    assert searching.keyword(reader, "x", "default", 5) == [] and not path.exists()
    SqliteMemoryStore(path).add([MemoryRecord("x")])
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_corrupt_database_is_exit_3_and_untouched(tmp_path: Path) -> None:
    path = tmp_path / "m.sqlite3"
    path.write_bytes(b"this is not sqlite at all" * 100)
    for action in (
        lambda s: searching.keyword(s, "x", "default", 5),
        lambda s: s.add([MemoryRecord("x")]),
    ):
        with pytest.raises(CorruptDocumentError) as info:
            action(SqliteMemoryStore(path))
        assert str(path) in info.value.message and info.value.exit_code == 3
    assert path.read_bytes() == b"this is not sqlite at all" * 100


def test_foreign_sqlite_database_is_refused(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "m.sqlite3"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE other (x)")
    db.commit()
    db.close()
    with pytest.raises(UnknownFormatError):
        SqliteMemoryStore(path).records()


def test_query_extraction_and_ingestion_records() -> None:
    msgs = [user("one"), Message(role="assistant", content="reply"), user("two")]
    assert core.query_from(msgs, "last_user_message") == "two"
    assert core.query_from(msgs, "last_user_messages:2") == "one\ntwo"
    assert core.query_from([system("s")], "last_user_message") is None
    records = core.records_from_messages(msgs, ["assistant"], "ns", "sess")
    assert [r.content for r in records] == ["reply"]
    assert (
        records[0].metadata["messageRole"] == "Assistant"
        and records[0].source == f"sess/{msgs[1].id}"
    )
    assert core.records_from_messages(msgs, [], "ns", "sess") == []


def test_recall_message_carries_the_marker() -> None:
    pinned = core.recall_message("deploys", [SearchHit(MemoryRecord("blue-green"), 1.0, "keyword")])
    assert pinned.text.startswith("Here are the relevant facts from memory")
    assert pinned.meta == {"kind": "memory"} and "- blue-green" in pinned.text


@pytest.mark.parametrize(
    "vectors, dimension, problem",
    [
        ([[0.1, float("-inf")]], None, "value -inf"),
        ([[0.1, float("nan")]], None, "value nan"),
        ([[0.1, 1e39]], None, r"value 1e\+39"),
        ([[0.1, 0.2, 0.3]], 2, "3-dimensional"),
        ([[0.1, 0.2], [0.1]], None, "1-dimensional"),
        ([], None, "0 vectors for 1 texts"),
    ],
)
def test_bad_vectors_are_refused(
    vectors: list[list[float]], dimension: int | None, problem: str
) -> None:
    from koogcli.core.errors import ModelError
    from koogcli.core.memory import check_vectors

    with pytest.raises(ModelError, match=problem):
        check_vectors(vectors, "m", max(1, len(vectors)), dimension)
    check_vectors([[0.1, 0.2]], "m", 1, 2)
