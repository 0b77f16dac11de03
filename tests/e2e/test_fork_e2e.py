"""`koog history fork` (SPEC §5.17): a new session with the history up to message N (or as
at a checkpoint), the original untouched, `history list` saying where it came from."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import forked_run_koog

pytestmark = pytest.mark.e2e

Run = Callable[..., subprocess.CompletedProcess[str]]


# koog processes forked from the zygote (tests/conftest.py: forked_run_koog).
run_koog = pytest.fixture(name="run_koog")(forked_run_koog)


def _ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stderr
    return done.stdout


def _shown(run_koog: Run, name: str) -> list[dict[str, object]]:
    return json.loads(_ok(run_koog("history", "show", "-s", name, "--json")))


def _original(run_koog: Run, data_dir: Path, backend: str, name: str) -> object:
    if backend == "files":
        return [p.read_bytes() for p in sorted((data_dir / "sessions").glob(f"{name}.*"))]
    return _shown(run_koog, name)


def test_a_fork_at_message_4_holds_those_4_and_the_original_is_untouched(
    backend: str, run_koog: Run, data_dir: Path
) -> None:
    for word in ("one", "two", "three", "four", "five"):  # 11 messages with the system prompt
        _ok(run_koog("chat", "-s", "a", word))
    before = _original(run_koog, data_dir, backend, "a")
    history = _shown(run_koog, "a")
    assert len(history) == 11
    said = _ok(run_koog("history", "fork", "-s", "a", "--at", "4", "b", "--json"))
    assert json.loads(said) == {"session": "b", "source": "a", "at": 4, "checkpoint": None}
    assert _shown(run_koog, "b") == history[:4]
    assert _original(run_koog, data_dir, backend, "a") == before
    listed = {s["session"]: s for s in json.loads(_ok(run_koog("history", "list", "--json")))}
    assert listed["b"]["forked_from"] == {"session": "a", "at": 4}
    assert listed["a"]["forked_from"] is None and listed["b"]["message_count"] == 4
    assert "a @4" in _ok(run_koog("history", "list"))
    # The fork is a session like any other: it goes on, is renamed with its origin.
    assert _ok(run_koog("chat", "-s", "b", "six")).strip() == "echo: six"
    assert [m["content"] for m in _shown(run_koog, "b")][4:] == ["six", "echo: six"]
    _ok(run_koog("history", "rename", "b", "c"))
    listed = {s["session"]: s for s in json.loads(_ok(run_koog("history", "list", "--json")))}
    assert listed["c"]["forked_from"] == {"session": "a", "at": 4}
    assert _original(run_koog, data_dir, backend, "a") == before


def test_forks_of_windowed_logs_checkpoints_and_refusals(
    backend: str, run_koog: Run, tmp_path: Path
) -> None:
    config = tmp_path / "window.toml"
    config.write_text('[[chat_memory.preprocessors]]\ntype = "window"\nsize = 6\nstep = 1\n')
    env = {"KOOG_CONFIG": str(config)}
    for n in range(6):  # the window drops from the front: log lines with drops
        _ok(run_koog("chat", "-s", "w", f"q{n}", env=env))
    history = _shown(run_koog, "w")
    _ok(run_koog("history", "fork", "-s", "w", "--at", "5", "w2"))
    assert _shown(run_koog, "w2") == history[:5]
    points = json.loads(_ok(run_koog("checkpoint", "list", "-s", "w", "--json")))
    oldest = next(p for p in reversed(points) if p["message_count"])
    _ok(run_koog("history", "fork", "-s", "w", "--checkpoint", oldest["id"], "w3"))
    assert len(_shown(run_koog, "w3")) == oldest["message_count"]

    too_far = run_koog("history", "fork", "-s", "w", "--at", "99", "w4")
    assert too_far.returncode == 2 and "cannot fork at 99" in too_far.stderr
    taken = run_koog("history", "fork", "-s", "w", "--at", "2", "w2")
    assert taken.returncode == 2 and "exists already" in taken.stderr
    both = run_koog("history", "fork", "-s", "w", "--at", "2", "--checkpoint", "x", "w5")
    assert both.returncode == 2
    imported = tmp_path / "tools.json"
    imported.write_text(
        json.dumps(
            [
                {"role": "user", "content": "make it"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "f", "arguments": "{}"},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "c1", "content": "done"},
                {"role": "assistant", "content": "made"},
            ]
        )
    )
    _ok(run_koog("history", "import", str(imported), "-s", "t"))
    inside = run_koog("history", "fork", "-s", "t", "--at", "2", "t2")
    assert inside.returncode == 2 and "inside a tool exchange" in inside.stderr
    assert "fork at 1" in inside.stderr
    _ok(run_koog("history", "fork", "-s", "t", "--at", "3", "t3"))
    assert [m["role"] for m in _shown(run_koog, "t3")] == ["user", "assistant", "tool"]


def _transcript(run_koog: Run, name: str) -> list[object]:
    shown = _ok(run_koog("history", "show", "-s", name, "--transcript", "--json"))
    return [m["content"] for m in json.loads(shown)]


def test_a_cleared_fork_keeps_the_transcript_it_inherited_and_its_own(
    backend: str, run_koog: Run
) -> None:
    """A fork's transcript begins with its source's up to the cut (what compression or a
    clear of either never takes away); its source deleted, it stays."""
    for word in ("one", "two", "three"):
        _ok(run_koog("chat", "-s", "a", word))
    said = ["one", "echo: one", "two", "echo: two", "three", "echo: three"]
    assert _transcript(run_koog, "a") == said
    _ok(run_koog("history", "fork", "-s", "a", "--at", "4", "b"))  # system, one, echo, two
    _ok(run_koog("chat", "-s", "b", "six"))
    _ok(run_koog("history", "clear", "-s", "b", "--yes"))
    assert _shown(run_koog, "b") == []
    assert _transcript(run_koog, "b") == [*said[:3], "six", "echo: six"]
    _ok(run_koog("history", "fork", "-s", "a", "c"))  # the whole history
    _ok(run_koog("history", "clear", "-s", "c", "--yes"))
    _ok(run_koog("history", "delete", "a", "--yes"))
    assert _transcript(run_koog, "c") == said
    # The fork's turns count what it inherited: `why` explains its own last reply as turn 4.
    _ok(run_koog("chat", "-s", "c", "seven"))
    explained = json.loads(_ok(run_koog("why", "-s", "c", "--json")))
    assert explained["turn"] == 4
