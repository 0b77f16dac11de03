"""Long-term memory under concurrent first use (8 processes x 30 rounds), and the three
kinds of database trouble told apart."""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
from pathlib import Path

import pytest

from koogcli.adapters.sql.sqlite_memory import SqliteMemoryStore
from koogcli.core.errors import CorruptDocumentError, LockTimeoutError, StorageError
from koogcli.core.memory import MemoryRecord
from tests.support import searching


def _add(path: str, text: str, start: multiprocessing.synchronize.Event) -> None:
    start.wait()
    try:
        SqliteMemoryStore(Path(path)).add([MemoryRecord(text)])
    except Exception as exc:  # reported through the exit code to the parent
        print(f"{type(exc).__name__}: {exc}", flush=True)
        os._exit(1)
    os._exit(0)


@pytest.mark.slow  # over 2 s
def test_simultaneous_first_adds_all_succeed(tmp_path: Path) -> None:
    """20 rounds of 8 processes adding to a memory that does not exist yet; five rounds at
    a time, each on its own file (their waits for the lock overlap instead of adding up)."""
    spawn = multiprocessing.get_context("fork")
    total = 0
    for first in range(0, 20, 5):
        rounds = range(first, first + 5)
        paths = {r: tmp_path / f"round{r}" / "memory.sqlite3" for r in rounds}
        starts = {r: spawn.Event() for r in rounds}
        workers = {
            r: [
                spawn.Process(target=_add, args=(str(paths[r]), f"fact {r}.{i}", starts[r]))
                for i in range(8)
            ]
            for r in rounds
        }
        for group in workers.values():
            for w in group:
                w.start()
        for start in starts.values():
            start.set()
        for r, group in workers.items():
            for w in group:
                w.join(30)
            assert [w.exitcode for w in group] == [0] * 8, r
            total += len(SqliteMemoryStore(paths[r]).records())
    assert total == 160


def test_locked_read_only_and_corrupt_are_different_messages(tmp_path: Path) -> None:
    path = tmp_path / "memory.sqlite3"
    SqliteMemoryStore(path).add([MemoryRecord("first")])
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    with pytest.raises(LockTimeoutError, match="stayed locked") as locked:
        SqliteMemoryStore(path, busy_timeout=0.2).add([MemoryRecord("second")])
    holder.execute("ROLLBACK")
    holder.close()
    assert "another koog process" in (locked.value.hint or "")

    readonly = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        store = SqliteMemoryStore(path)
        store.db._local.conn = readonly  # the same connection a read-only file or folder gives
        with pytest.raises(StorageError, match="cannot be written") as ro:
            store.add([MemoryRecord("third")])
        assert not isinstance(ro.value, CorruptDocumentError | LockTimeoutError)
    finally:
        readonly.close()

    path.write_bytes(b"this is not a database at all" * 100)
    with pytest.raises(CorruptDocumentError, match="not a readable SQLite database"):
        SqliteMemoryStore(path).records()


def _add_and_search(path: str, worker: int, start: multiprocessing.synchronize.Event) -> None:
    """Add records with vectors one by one, deleting every third, searching after each."""
    start.wait()
    try:
        store = SqliteMemoryStore(Path(path))
        for i in range(12):
            vector = [float(worker), float(i), 1.0, 0.5]
            [rid] = store.add([MemoryRecord(f"w{worker} r{i}")], [vector], "m")
            if i % 3 == 2:
                store.delete(rid)
            searching.vectors(store, vector, None, "m", 3)
    except Exception as exc:  # reported through the exit code to the parent
        print(f"{type(exc).__name__}: {exc}", flush=True)
        os._exit(1)
    os._exit(0)


def test_the_vector_index_stays_true_under_concurrent_writers(tmp_path: Path) -> None:
    """4 processes add, delete and search at once; afterwards the index (appended to,
    rebuilt after deletes, by whichever process searched) finds exactly the records left."""
    spawn = multiprocessing.get_context("fork")
    path = tmp_path / "memory.sqlite3"
    start = spawn.Event()
    workers = [spawn.Process(target=_add_and_search, args=(str(path), w, start)) for w in range(4)]
    for w in workers:
        w.start()
    start.set()
    for w in workers:
        w.join(60)
    assert [w.exitcode for w in workers] == [0] * 4
    store = SqliteMemoryStore(path)
    left = {r.content for r in store.records()}
    assert len(left) == 4 * 8
    found = searching.vectors(store, [1.0, 1.0, 1.0, 1.0], None, "m", 100)
    assert {h.record.content for h in found} == left


def test_one_store_serves_many_threads(tmp_path: Path) -> None:
    """`koog serve` answers from a pool of threads sharing one store."""
    import threading

    store = SqliteMemoryStore(tmp_path / "memory.sqlite3")
    store.add([MemoryRecord("a first fact about skies")])
    failures: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for i in range(10):
                store.add([MemoryRecord(f"fact {n}.{i} about skies")])
                assert store.records()
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == [] and len(store.records()) == 81
