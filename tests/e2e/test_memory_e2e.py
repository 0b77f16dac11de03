"""End-to-end long-term memory on the real binary against the local test server."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import forked_run_koog
from tests.fakes.openai_server import FakeOpenAIServer
from tests.support import searching

pytestmark = pytest.mark.e2e


# koog processes forked from the zygote (tests/conftest.py: forked_run_koog).
run_koog = pytest.fixture(name="run_koog")(forked_run_koog)


Run = Callable[..., subprocess.CompletedProcess[str]]


def add(run_koog: Run, text: str, *args: str, env: dict[str, str] | None = None) -> str:
    result = run_koog("memory", "add", text, *args, env=env)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def search(run_koog: Run, *args: str, env: dict[str, str] | None = None) -> list[dict[str, object]]:
    result = run_koog("memory", "search", *args, "--json", env=env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_keyword_and_similarity_search(run_koog: Run) -> None:
    add(run_koog, "Kotlin is a programming language", "--namespace", "langs", "--meta", "src=doc")
    add(run_koog, "JAVA is also a PROGRAMMING language", "--namespace", "langs")
    add(run_koog, "programming elsewhere", "--namespace", "other")
    found = search(run_koog, "Programming", "--mode", "keyword", "--namespace", "langs")
    assert [r["content"] for r in found] == [
        "Kotlin is a programming language",
        "JAVA is also a PROGRAMMING language",
    ]
    assert found[0]["metadata"] == {"src": "doc"} and found[0]["score"] == 1.0
    ranked = search(
        run_koog, "kotlin programming language", "--namespace", "langs", "--mode", "jaccard"
    )
    assert [r["content"] for r in ranked] == [
        "Kotlin is a programming language",
        "JAVA is also a PROGRAMMING language",
    ]
    assert ranked[0]["score"] == pytest.approx(3 / 5) and ranked[1]["score"] == pytest.approx(2 / 7)
    assert (
        len(search(run_koog, "kotlin programming language", "--namespace", "langs", "--top-k", "1"))
        == 1
    )
    assert (
        len(
            search(
                run_koog,
                "kotlin programming language",
                "--namespace",
                "langs",
                "--threshold",
                "0.5",
                "--mode",
                "jaccard",
            )
        )
        == 1
    )
    assert search(run_koog, "programming", "--namespace", "nowhere") == []
    table = run_koog("memory", "search", "kotlin", "--namespace", "langs").stdout
    assert table.splitlines()[0].split() == ["SCORE", "ID", "NAMESPACE", "CONTENT"]


@pytest.mark.parametrize("augmenter, role", [("system", "system"), ("user", "user")])
def test_retrieval_reaches_the_model(
    run_koog: Run, server: FakeOpenAIServer, tmp_path: Path, augmenter: str, role: str
) -> None:
    config = tmp_path / "rag.toml"
    config.write_text(f'[long_term_memory.retrieval]\nenabled = true\naugmenter = "{augmenter}"\n')
    env = {"KOOG_CONFIG": str(config)}
    add(run_koog, "The office wifi password is hunter2", env=env)
    server.enqueue({"content": "It is hunter2."})
    assert run_koog("chat", "-s", "r", "what is the wifi password", env=env).returncode == 0
    sent = server.chat_requests[-1]["messages"]
    target = [m for m in sent if m["role"] == role][-1 if role == "user" else 0]
    assert "Relevant information:\n[1] The office wifi password is hunter2" in target["content"]
    stored = run_koog("history", "show", "-s", "r", "--format", "json", env=env).stdout
    assert "Relevant information" not in stored


def test_ingestion_of_completed_turns_only(
    run_koog: Run, server: FakeOpenAIServer, tmp_path: Path
) -> None:
    config = tmp_path / "ingest.toml"
    config.write_text("[long_term_memory.ingestion]\nenabled = true\n")
    env = {"KOOG_CONFIG": str(config)}
    assert run_koog("chat", "-s", "i", "my favourite colour is teal", env=env).returncode == 0
    server.enqueue({"status": 500})
    assert run_koog("chat", "-s", "i", "my least favourite is beige", env=env).returncode == 1
    assert [r["content"] for r in search(run_koog, "favourite", "--mode", "keyword", env=env)] == [
        "my favourite colour is teal",
        "echo: my favourite colour is teal",
    ]
    for i in range(10):
        run_koog("chat", "-s", "i", f"turn number {i}", env=env)
    contents = [r["content"] for r in json.loads(run_koog("memory", "list", "--json").stdout)]
    assert len(contents) == len(set(contents)) == 22
    again = run_koog("memory", "ingest", "-s", "i", "--json")
    assert json.loads(again.stdout)["added"] == 0


def test_ingest_twice_adds_no_duplicates(run_koog: Run) -> None:
    for i in range(3):
        run_koog("chat", "-s", "g", f"note {i}")
    first = json.loads(run_koog("memory", "ingest", "-s", "g", "--json").stdout)
    second = json.loads(run_koog("memory", "ingest", "-s", "g", "--json").stdout)
    assert (first["added"], second["added"]) == (6, 0)
    only_users = json.loads(
        run_koog(
            "memory", "ingest", "-s", "g", "--namespace", "u", "--role", "user", "--json"
        ).stdout
    )
    assert only_users["added"] == 3


def test_embeddings_mode(
    backend: str, run_koog: Run, server: FakeOpenAIServer, tmp_path: Path
) -> None:
    config = tmp_path / "embed.toml"
    config.write_text('[long_term_memory.embeddings]\nmodel = "test-embed"\n')
    env = {"KOOG_CONFIG": str(config)}
    for text in ["apple banana cherry", "car truck bus", "banana apple"]:
        add(run_koog, text, env=env)
    hits = search(run_koog, "apple banana", "--mode", "embedding", env=env)
    assert [h["content"] for h in hits][:2] == ["banana apple", "apple banana cherry"]
    assert hits[0]["metric"] == "cosine" and hits[0]["score"] == pytest.approx(1.0, abs=1e-6)
    fused = search(run_koog, "bus", env=env)  # auto: hybrid with an embedding model
    assert fused[0]["content"] == "car truck bus" and fused[0]["metric"] == "hybrid"
    embedded = [r["input"] for r in server.embedding_requests]
    assert embedded == [
        ["apple banana cherry"],
        ["car truck bus"],
        ["banana apple"],
        ["apple banana"],
        ["bus"],
    ]
    server.embedding_faults.append(503)
    failed = run_koog("memory", "add", "never kept", env=env)
    assert failed.returncode == 1 and "HTTP 503" in failed.stderr
    assert all(
        r["content"] != "never kept"
        for r in json.loads(run_koog("memory", "list", "--json").stdout)
    )


def test_recall_then_compress_keeps_the_pin(run_koog: Run, server: FakeOpenAIServer) -> None:
    server.responder = lambda body: (
        {"content": "They greeted each other."}
        if "conversation_to_summarize" in str(body["messages"][-1]["content"])
        else {"content": "echo: " + str(body["messages"][-1]["content"])}
    )
    run_koog("chat", "-s", "p", "hello")
    add(run_koog, "deploys are blue-green")
    pinned = run_koog("memory", "recall", "deploys blue-green", "-s", "p", "--json")
    message = json.loads(pinned.stdout)["message"]
    assert message["meta"] == {"kind": "memory"}
    run_koog("chat", "-s", "p", "more")
    assert run_koog("compress", "-s", "p").returncode == 0
    after = json.loads(run_koog("history", "show", "-s", "p", "--format", "json").stdout)
    assert message["id"] in [m["id"] for m in after]


def test_corrupt_database_and_bad_input(run_koog: Run, data_dir: Path) -> None:
    add(run_koog, "something")
    db = data_dir / "memory.sqlite3"
    for extra in ("-wal", "-shm"):
        Path(str(db) + extra).unlink(missing_ok=True)
    db.write_bytes(b"garbage" * 1000)
    result = run_koog("memory", "search", "x")
    assert result.returncode == 3 and str(db) in result.stderr
    assert db.read_bytes() == b"garbage" * 1000
    empty = run_koog("memory", "add", "")
    assert empty.returncode == 2 and "empty" in empty.stderr


def test_the_readme_example_finds_what_people_mean(backend: str, run_koog: Run) -> None:
    """Full-text search is the default without embeddings: word forms, case and accents."""
    add(run_koog, "deploys are blue-green")
    add(run_koog, "Le déploiement se fait le vendredi")
    add(run_koog, "lunch is at noon")
    shown = run_koog("memory", "search", "how do we deploy")
    assert shown.returncode == 0 and "deploys are blue-green" in shown.stdout
    for query in ("Deploying", "DEPLOY", "deploys"):
        hits = search(run_koog, query)
        assert [h["content"] for h in hits] == ["deploys are blue-green"], query
        assert hits[0]["metric"] == "bm25" and 0 < float(hits[0]["score"]) <= 1  # type: ignore[arg-type]
    for query in ("déploiement", "deploiement", "DÉPLOIEMENT"):
        hits = search(run_koog, query, "--mode", "fulltext")
        assert [h["content"] for h in hits] == ["Le déploiement se fait le vendredi"], query
    # Koog's word overlap, kept under its own name, sees none of it.
    assert search(run_koog, "Deploying", "--mode", "jaccard") == []


def test_where_filters_and_namespaces(run_koog: Run) -> None:
    add(run_koog, "the pager rota is weekly", "--meta", "team=infra")
    add(run_koog, "the pager app is on the phone", "--meta", "team=mobile")
    add(
        run_koog, "pager duty for infra starts Monday", "--namespace", "ops", "--meta", "team=infra"
    )
    infra = search(run_koog, "pager", "--where", "team=infra")
    assert [h["content"] for h in infra] == ["the pager rota is weekly"]
    both = search(run_koog, "pager", "--where", "team=infra", "--all-namespaces")
    assert {(h["namespace"], h["content"]) for h in both} == {
        ("default", "the pager rota is weekly"),
        ("ops", "pager duty for infra starts Monday"),
    }
    assert search(run_koog, "pager", "--where", "team=infra", "--where", "src=wiki") == []
    twice = run_koog("memory", "search", "pager", "--where", "team=a", "--where", "team=b")
    assert twice.returncode == 2 and "twice" in twice.stderr
    listed = run_koog("memory", "list", "--where", "team=mobile", "--json")
    assert [r["content"] for r in json.loads(listed.stdout)] == ["the pager app is on the phone"]
    bad = run_koog("memory", "search", "pager", "--where", "team")
    assert bad.returncode == 2 and "KEY=VALUE" in bad.stderr


def test_a_version_1_database_is_migrated_in_place(run_koog: Run, data_dir: Path) -> None:
    import shutil
    import sqlite3

    from koogcli.adapters.sql.sqlite_memory import SqliteMemoryStore

    data_dir.mkdir(parents=True, exist_ok=True)
    target = data_dir / "memory.sqlite3"
    shutil.copy(Path(__file__).parents[1] / "fixtures" / "memory-v1.sqlite3", target)
    hits = search(run_koog, "déploiement", "--all-namespaces")
    assert [h["content"] for h in hits] == ["Le déploiement se fait le vendredi"]
    listed = json.loads(run_koog("memory", "list", "--all-namespaces", "--json").stdout)
    assert [(r["id"][:2], r["namespace"], r["metadata"]) for r in listed] == [
        ("a1", "default", {"team": "infra"}),
        ("b1", "default", {"team": "ops"}),
        ("c1", "work", {}),
    ]
    db = sqlite3.connect(target)
    assert db.execute("SELECT value FROM meta WHERE key = 'version'").fetchone() == ("4",)
    store = SqliteMemoryStore(target)
    assert store.vector_count("embed-4") == 3
    [best, *_] = searching.vectors(store, [0.0, 0.9, 0.1, 0.0], None, "embed-4", 3)
    assert best.record.content == "Le déploiement se fait le vendredi"
    assert search(run_koog, "billing", "--namespace", "work", "--where", "team=ops") == []


def test_search_returns_only_what_matches(
    backend: str, forked_koog: Run, server: FakeOpenAIServer, tmp_path: Path
) -> None:
    """§5.16: with embeddings configured, a namespace holding nothing about rockets gives
    no record in any mode (the nearest records exist, they are not near), and retrieval
    injects nothing; a record that matches is still found, by words or by meaning."""
    run_koog = forked_koog
    config = tmp_path / "floor.toml"
    config.write_text(
        '[long_term_memory.embeddings]\nmodel = "test-embed"\n'
        "[long_term_memory.retrieval]\nenabled = true\n"
    )
    env = {"KOOG_CONFIG": str(config)}
    for text in [
        "deploys are blue-green",
        "the coffee machine is on floor three",
        "alice owns the pager rota",
        "our release train leaves on fridays",
    ]:
        add(run_koog, text, env=env)
    for mode in ("auto", "hybrid", "embedding", "fulltext", "jaccard", "keyword"):
        assert search(run_koog, "rocket", "--mode", mode, env=env) == [], mode
    plain = run_koog("memory", "search", "rocket", env=env)
    assert plain.returncode == 0 and plain.stdout == "", plain.stderr
    assert "no memory matched" in plain.stderr
    run_koog("chat", "-s", "m", "any rocket news", env=env)
    sent = server.chat_requests[-1]["messages"]
    assert not any("Relevant information" in str(m["content"]) for m in sent)
    add(run_koog, "rocket launch is at noon", env=env)
    for mode in ("auto", "embedding"):
        [hit] = search(run_koog, "rocket", "--mode", mode, env=env)
        assert hit["content"] == "rocket launch is at noon"
