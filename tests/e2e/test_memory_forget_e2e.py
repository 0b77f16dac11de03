"""`koog memory forget` (SPEC §5.17): a forgotten record is found by no search mode, in no
index, and ingesting its session again does not bring it back; on both backends."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

Run = Callable[..., subprocess.CompletedProcess[str]]
SECRET = "the vault combination is zebra-quartz-1187"
MODES = ("fulltext", "keyword", "jaccard", "embedding", "hybrid")


@pytest.fixture
def run_koog(
    forked_koog: Callable[..., subprocess.CompletedProcess[str]], tmp_path: Path
) -> Callable[..., subprocess.CompletedProcess[str]]:
    """koog processes forked from the zygote, with ingestion and an embedding model on."""
    config = tmp_path / "memory.toml"
    config.write_text(
        "[long_term_memory.ingestion]\nenabled = true\n"
        '[long_term_memory.embeddings]\nmodel = "test-embed"\n'
    )

    def run(*args: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
        env = {"KOOG_CONFIG": str(config), **dict(kwargs.pop("env", None) or {})}  # type: ignore[call-overload]
        return forked_koog(*args, env=env, **kwargs)

    return run


def _search(run_koog: Run, text: str, mode: str) -> list[str]:
    done = run_koog("memory", "search", text, "--mode", mode, "--all-namespaces", "--json")
    assert done.returncode == 0, done.stderr
    return [h["content"] for h in json.loads(done.stdout)]


def test_a_forgotten_record_is_gone_from_every_search_and_never_ingested_again(
    backend: str, run_koog: Run, data_dir: Path
) -> None:
    assert run_koog("chat", "-s", "vault", SECRET).returncode == 0
    assert run_koog("chat", "-s", "vault", "what else is there").returncode == 0
    listed = json.loads(run_koog("memory", "list", "--json").stdout)
    # The question and the test server's echo of it.
    ids = [r["id"] for r in listed if "zebra-quartz" in r["content"]]
    assert len(ids) == 2
    for mode in MODES:  # found before: each mode can find it
        assert SECRET in _search(run_koog, "zebra-quartz-1187", mode), mode
    shown = json.loads(run_koog("memory", "show", ids[0][:8], "--json").stdout)
    assert shown["source"]["session"] == "vault" and shown["source"]["message"]
    text = run_koog("memory", "show", ids[0][:8]).stdout
    assert "from session vault, message" in text

    refused = run_koog("memory", "forget", ids[0][:8])
    assert refused.returncode == 2 and "--yes" in refused.stderr  # asks; no terminal here
    done = run_koog("memory", "forget", ids[0][:8], ids[1], "--yes", "--json")
    assert done.returncode == 0, done.stderr
    assert sorted(json.loads(done.stdout)["forgotten"]) == sorted(ids)

    for mode in MODES:
        found = _search(run_koog, "zebra-quartz-1187", mode)
        assert not [c for c in found if "zebra-quartz" in c], mode
    again = run_koog("memory", "ingest", "-s", "vault", "--json")
    assert again.returncode == 0 and json.loads(again.stdout)["added"] == 0
    assert run_koog("chat", "-s", "vault", "one more").returncode == 0  # ingests its turn
    contents = [r["content"] for r in json.loads(run_koog("memory", "list", "--json").stdout)]
    assert not [c for c in contents if "zebra-quartz" in c] and "one more" in contents
    if backend == "files":  # not in any index, page or log of the memory database
        for path in data_dir.glob("memory.sqlite3*"):
            assert b"zebra-quartz" not in path.read_bytes(), path


def test_forget_by_session_and_by_metadata(backend: str, run_koog: Run) -> None:
    assert run_koog("chat", "-s", "old", "a note about apples").returncode == 0
    assert run_koog("chat", "-s", "keep", "a note about pears").returncode == 0
    assert run_koog("memory", "add", "tagged fact", "--meta", "project=x").returncode == 0
    done = run_koog("memory", "forget", "--session", "old", "--yes", "--json")
    assert len(json.loads(done.stdout)["forgotten"]) == 2  # the question and its answer
    done = run_koog("memory", "forget", "--where", "project=x", "--yes", "--json")
    assert len(json.loads(done.stdout)["forgotten"]) == 1
    contents = [r["content"] for r in json.loads(run_koog("memory", "list", "--json").stdout)]
    assert contents == ["a note about pears", "echo: a note about pears"]
    nothing = run_koog("memory", "forget", "--where", "project=none", "--yes")
    assert nothing.returncode == 0 and "nothing was forgotten" in nothing.stderr
    bare = run_koog("memory", "forget")
    assert bare.returncode == 2 and "name the records to forget" in bare.stderr


def test_forgotten_sources_stay_forgotten_in_every_namespace(backend: str, run_koog: Run) -> None:
    """SPEC §5.19: `memory ingest -n OTHER` after a forget adds nothing of it back."""
    assert run_koog("chat", "-s", "mf", "my password is hunter2").returncode == 0
    assert run_koog("memory", "forget", "--session", "mf", "--yes").returncode == 0
    again = run_koog("memory", "ingest", "-s", "mf", "-n", "other", "--json")
    assert again.returncode == 0, again.stderr
    listed = run_koog("memory", "list", "--all-namespaces", "--json")
    assert "hunter2" not in listed.stdout
    # By hand is still the user's to do.
    assert run_koog("memory", "add", "hunter2 is the old password", "-n", "other").returncode == 0
    listed = run_koog("memory", "list", "--all-namespaces", "--json")
    assert "hunter2 is the old password" in listed.stdout


def test_a_forgotten_fact_comes_back_from_no_copy(
    backend: str, run_koog: Run, tmp_path: Path
) -> None:
    """Issue 45, acceptance 5: recall pins the fact into another session, forget --session
    forgets it, and ingesting the pinned copy, a fork and an export imported elsewhere adds
    it to no record."""
    assert run_koog("chat", "-s", "src", f"remember: {SECRET}").returncode == 0
    assert run_koog("chat", "-s", "pin", "hello").returncode == 0
    recalled = run_koog("memory", "recall", "vault combination", "-s", "pin")
    assert recalled.returncode == 0, recalled.stderr
    assert SECRET in run_koog("history", "show", "-s", "pin").stdout
    assert run_koog("memory", "forget", "--session", "src", "--yes").returncode == 0
    assert run_koog("history", "fork", "-s", "src", "--at", "2", "src2").returncode == 0
    exported = tmp_path / "src.json"
    assert run_koog("history", "export", "-s", "src", "-o", str(exported)).returncode == 0
    assert run_koog("history", "import", "-s", "src3", str(exported)).returncode == 0
    for copy in ("pin", "src2", "src3", "src"):
        done = run_koog("memory", "ingest", "-s", copy, "--json")
        assert done.returncode == 0, (copy, done.stderr)
    listed = run_koog("memory", "list", "--all-namespaces", "--json")
    assert "zebra-quartz" not in listed.stdout
    for mode in MODES:
        assert not [c for c in _search(run_koog, "vault combination", mode) if "zebra" in c]
