"""The records placed after a message, remembered by the message's digest (issue 53), on
either backend: found again by digest only, never given others, apart by namespace, let go
of when unused for long or beyond the bound."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from koogcli.adapters.sql import memory as sql_memory
from koogcli.core import content_parts
from koogcli.core import memory_placement as placement
from koogcli.core.memory import MemoryRecord, SearchHit
from koogcli.core.messages import user

ENTRY = [{"id": "r1", "score": 0.5, "metric": "bm25"}]


def test_a_placement_is_found_by_the_digest_of_the_same_message(
    new_memory_store: Callable[[], Any],
) -> None:
    store = new_memory_store()
    assert store.placements("default", ["nothing"]) == {}  # a memory never written
    asked = user("Where do the ferries leave from?")
    again = user("Where do the ferries leave from?")  # another id, another time
    assert placement.digest(asked) == placement.digest(again)
    assert placement.digest(asked) != placement.digest(user("Where do the ferries leave?"))
    store.place("default", placement.digest(asked), ENTRY)
    reopened = new_memory_store()
    assert reopened.placements("default", [placement.digest(again)]) == {
        placement.digest(again): ENTRY
    }
    assert reopened.placements("other", [placement.digest(again)]) == {}
    reopened.place("default", placement.digest(asked), [{"id": "r2", "score": 1, "metric": "x"}])
    assert reopened.placements("default", [placement.digest(asked)])[placement.digest(asked)] == (
        ENTRY
    )  # the first placement stays: the message was sent with it


def test_the_digest_holds_no_text_and_sees_parts() -> None:
    hit = SearchHit(MemoryRecord("Ferries leave from pier 4", id="r9"), 0.25, "bm25")
    assert placement.entries([hit]) == [{"id": "r9", "score": 0.25, "metric": "bm25"}]
    key = placement.digest(user("pier"))
    assert "pier" not in key and len(key) == 32
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    parts = [{"type": "text", "text": "pier"}, image]
    with_image = replace(user("pier"), meta={content_parts.KEY: parts})
    assert placement.digest(with_image) != key


def test_placements_unused_for_long_are_let_go_and_the_rest_bounded(
    new_memory_store: Callable[[], Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = new_memory_store()
    clock = [1_000_000_000.0]
    monkeypatch.setattr(sql_memory.time, "time", lambda: clock[0])
    store.place("default", "old", ENTRY)
    clock[0] += 2 * 86400
    assert "old" in store.placements("default", ["old"])  # used: kept from now on
    clock[0] += (sql_memory.PLACEMENT_DAYS - 1) * 86400
    store.place("default", "new", ENTRY)  # "old" was used 29 days ago: kept
    clock[0] += 2 * 86400
    store.place("default", "newer", ENTRY)
    assert set(store.placements("default", ["old", "new", "newer"])) == {"new", "newer"}
    monkeypatch.setattr(sql_memory, "PLACEMENT_ROWS", 3)
    monkeypatch.setattr(sql_memory.random, "random", lambda: 0.0)
    for n in range(5):
        clock[0] += 1
        store.place("default", f"k{n}", ENTRY)
    kept = store.placements("default", ["new", "newer", *(f"k{n}" for n in range(5))])
    assert set(kept) == {"k2", "k3", "k4"}
