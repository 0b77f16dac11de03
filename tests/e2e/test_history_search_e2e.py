"""`koog history search` (SPEC §2): full text over every session's transcript, on both
backends; what was cleared or compressed away is still found."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable

import pytest

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
