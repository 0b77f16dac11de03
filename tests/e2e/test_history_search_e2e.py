"""`koog history search` (SPEC §2): full text over every session's transcript, on both
backends; what was cleared or compressed away is still found."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAIServer

pytestmark = pytest.mark.e2e

Run = Callable[..., subprocess.CompletedProcess[str]]


def test_a_phrase_is_found_in_whichever_session_it_was_said(backend: str, run_koog: Run) -> None:
    for session, text in (
        ("alpha", "the zeppelin hangar is north of the river"),
        ("beta", "where do we keep the helium?"),
        ("beta", "Zeppelin parts arrive on Monday"),
    ):
        assert run_koog("chat", "-s", session, text).returncode == 0
    assert run_koog("history", "clear", "-s", "alpha", "--yes").returncode == 0
    found = json.loads(run_koog("history", "search", "zeppelin", "--json").stdout)
    assert [(f["session"], f["turn"], f["role"]) for f in found] == [
        ("beta", 2, "assistant"),
        ("beta", 2, "user"),
        ("alpha", 1, "assistant"),
        ("alpha", 1, "user"),
    ]
    both = json.loads(run_koog("history", "search", "zep hangar", "--json").stdout)
    assert {f["content"] for f in both} == {
        "the zeppelin hangar is north of the river",
        "echo: the zeppelin hangar is north of the river",
    }
    one = run_koog("history", "search", "helium", "-s", "beta")
    assert one.returncode == 0 and one.stdout.count("\n") == 2
    assert "beta  turn 1  " in one.stdout and "where do we keep the helium?" in one.stdout
    assert "\x1b" not in one.stdout  # no escape codes in a pipe
    none = run_koog("history", "search", "submarine")
    assert (
        none.returncode == 0 and none.stdout == "" and "nothing in the transcripts" in none.stderr
    )
    assert run_koog("history", "search", "x", "-s", "nosuch").returncode == 2
    assert run_koog("history", "search", "  ").returncode == 2


def test_a_large_message_costs_a_small_multiple_of_its_size_on_disk(
    run_koog: Run, server: FakeOpenAIServer, data_dir: Path
) -> None:
    """Issue 51: a 4 MiB message and a short reply take less than five times the message in
    the data dir (its session document, its checkpoint row, its transcript row, their
    index and at most 4 MiB of WAL; before: 6.9 times, the index kept a copy of the text
    and the WAL stayed as large as the write)."""
    size = 4 << 20
    server.enqueue({"content": "ok"})
    done = run_koog("chat", "-s", "big", "summarise", input="zebra " * (size // 6))
    assert done.returncode == 0, done.stderr
    used = sum(p.stat().st_size for p in data_dir.rglob("*") if p.is_file())
    assert used < 5 * size, f"{used / size:.1f} times the message"
    found = run_koog("history", "search", "zebra", "--json")
    assert len(json.loads(found.stdout)) == 1, found.stdout
    assert run_koog("history", "delete", "big", "--yes").returncode == 0
    assert json.loads(run_koog("history", "search", "zebra", "--json").stdout) == []
