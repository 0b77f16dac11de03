"""Command-line contract details a script relies on: a closed pipe, Click's own usage
errors, and commands naming a session that does not exist."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import KOOG_BIN, snapshot
from tests.fakes.openai_server import FakeOpenAIServer

pytestmark = pytest.mark.e2e
Run = Callable[..., subprocess.CompletedProcess[str]]


def test_a_reader_that_leaves_early_still_gets_the_turn_stored(
    run_koog: Run, server: FakeOpenAIServer, koog_env: dict[str, str]
) -> None:
    long_reply = " ".join(f"word{i}" for i in range(5000))
    server.enqueue({"content": long_reply})
    shell = f"'{KOOG_BIN}' chat -s pipe 'long question' | head -c 20"
    result = subprocess.run(
        ["bash", "-o", "pipefail", "-c", shell], env=koog_env, capture_output=True, timeout=30
    )
    assert result.returncode == 0 and result.stdout == b"word0 word1 word2 wo"
    assert result.stderr == b""
    shown = json.loads(run_koog("history", "show", "-s", "pipe", "--format", "json").stdout)
    assert shown[-1]["content"] == long_reply


def test_click_usage_errors_speak_koog(run_koog: Run) -> None:
    result = run_koog("chat", "--bogus")
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "koog: error: No such option: --bogus",
        "koog: hint: `koog chat --help` shows usage",
    ]


@pytest.mark.parametrize(
    "args",
    [
        ("checkpoint", "create", "-s", "ghost"),
        ("rollback", "-s", "ghost", "--latest", "--yes"),
        ("compress", "-s", "ghost"),
        ("memory", "ingest", "-s", "ghost"),
        ("memory", "recall", "anything", "-s", "ghost"),
        ("history", "show", "-s", "ghost"),
    ],
)
def test_commands_on_a_missing_session_exit_2_and_create_nothing(
    run_koog: Run, data_dir: Path, args: tuple[str, ...]
) -> None:
    run_koog("memory", "add", "anything at all")
    before = snapshot(data_dir)
    result = run_koog(*args)
    assert result.returncode == 2
    assert result.stderr.startswith("koog: error: no session named 'ghost'")
    assert snapshot(data_dir) == before


def test_destructive_commands_need_yes_without_a_terminal(run_koog: Run, data_dir: Path) -> None:
    run_koog("chat", "-s", "d", "hello")
    point = run_koog("checkpoint", "create", "-s", "d").stdout.strip()
    record = run_koog("memory", "add", "a fact").stdout.strip()
    before = snapshot(data_dir)
    for args in (
        ("history", "clear", "-s", "d"),
        ("history", "delete", "d"),
        ("rollback", "-s", "d", point),
        ("checkpoint", "delete", point),
        ("memory", "delete", record),
    ):
        result = run_koog(*args)
        assert result.returncode == 2 and "--yes" in result.stderr, args
    assert snapshot(data_dir) == before


def test_completion_offers_existing_session_names(run_koog: Run, koog_env: dict[str, str]) -> None:
    for name in ("alpha", "alpine", "beta"):
        run_koog("chat", "-s", name, "hi")
    env = {
        **koog_env,
        "_KOOG_COMPLETE": "complete_bash",
        "COMP_WORDS": "koog chat -s al",
        "COMP_CWORD": "3",
    }
    result = subprocess.run([KOOG_BIN], env=env, capture_output=True, text=True, timeout=30)
    assert result.returncode == 0 and result.stdout.split() == ["alpha", "alpine"]
    # The shell is found from the process tree, as a user's would be. In a pipeline, bash
    # stays koog's parent (a lone command is exec'd in its place, and then the nearest shell
    # is whatever started the tests, which need not be one).
    shown = subprocess.run(
        ["bash", "-c", f"{KOOG_BIN} --show-completion | cat"],
        env=koog_env,
        capture_output=True,
        text=True,
    )
    assert "_KOOG_COMPLETE=complete_bash" in shown.stdout


def test_checkpoint_id_completion_offers_the_named_sessions_only(
    run_koog: Run, koog_env: dict[str, str]
) -> None:
    """`koog checkpoint show -s NAME <TAB>`: that session's restore points, not every
    session's (issue 46, smaller items)."""
    for name in ("one", "two"):
        run_koog("chat", "-s", name, "hi")
        run_koog("chat", "-s", name, "again")

    def offered(words: str) -> list[str]:
        env = {
            **koog_env,
            "_KOOG_COMPLETE": "complete_bash",
            "COMP_WORDS": words,
            "COMP_CWORD": str(
                len(words.split()) if words.endswith(" ") else len(words.split()) - 1
            ),
        }
        done = subprocess.run([KOOG_BIN], env=env, capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr
        return done.stdout.split()

    def ids(name: str) -> set[str]:
        listed = json.loads(run_koog("checkpoint", "list", "-s", name, "--json").stdout)
        return {c["id"] for c in listed if c["kind"] == "restore"}

    mine = set(offered("koog checkpoint show -s one "))
    assert mine == ids("one") and not mine & ids("two")
    assert set(offered("koog checkpoint show ")) == ids("one") | ids("two")
