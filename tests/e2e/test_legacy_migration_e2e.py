"""An older data dir moves into `koog.sqlite3` once, kill-safe: SIGKILL at random points of
`koog storage migrate`, then a rerun, leaves what an uninterrupted run leaves.

tests/data/legacy-datadir.tar.gz was written by earlier versions of koog: sessions alpha
and beta with packed checkpoints (`checkpoints.jsonl`, `objects.jsonl`, a deletion line,
a compensation journal) and pending ingestion; gamma and delta with a file per checkpoint
(the layout before that); a transcript whose last line a crash cut short."""

from __future__ import annotations

import json
import random
import signal
import sqlite3
import subprocess
import tarfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.zygote import Zygote

pytestmark = [pytest.mark.e2e, pytest.mark.files_only]
Run = Callable[..., subprocess.CompletedProcess[str]]
FIXTURE = Path(__file__).parents[1] / "data" / "legacy-datadir.tar.gz"
LEGACY = ("checkpoints", "transcripts", "memory-pending")


def _unpack(into: Path) -> None:
    with tarfile.open(FIXTURE) as tar:
        tar.extractall(into.parent, filter="data")
    assert into.name == "data" and (into / "checkpoints").is_dir()


def _dump(data: Path) -> dict[str, object]:
    """Everything the database holds of the sessions, and which files are left."""
    db = sqlite3.connect(data / "koog.sqlite3")
    bodies = dict(db.execute("SELECT id, body FROM messages"))

    def messages(items: str) -> list[str]:
        return [bodies[i] for first, last in json.loads(items) for i in range(first, last + 1)]

    dump = {
        "transcript": db.execute(
            "SELECT session, turn_id, body FROM transcript ORDER BY session, id"
        ).fetchall(),
        "checkpoints": [
            (*row[:-1], messages(row[-1]))
            for row in db.execute(
                "SELECT session, seq, id, kind, manual, created_at, format_version, header, "
                "items FROM checkpoints ORDER BY session, seq"
            )
        ],
        "journal": db.execute(
            "SELECT session, call_id, rollback_point, body FROM compensations ORDER BY 1, 2, 3"
        ).fetchall(),
        "pending": db.execute("SELECT session, body FROM pending_ingestion ORDER BY 1").fetchall(),
        "files": sorted(
            str(p.relative_to(data))
            for p in data.rglob("*")
            if p.is_file() and p.parts[-2] != "locks" and not p.name.startswith("koog.sqlite3")
        ),
    }
    db.close()
    return dump


def test_an_uninterrupted_migration_moves_every_part(
    forked_koog: Run, data_dir: Path, koog_env: dict[str, str]
) -> None:
    _unpack(data_dir)
    done = forked_koog("storage", "migrate")
    assert done.returncode == 0, done.stderr
    assert "moved the older layout" in done.stderr
    assert not any((data_dir / folder).exists() for folder in LEGACY)
    dump = _dump(data_dir)
    assert [f for f in dump["files"] if not f.endswith(".log")] == [  # type: ignore[attr-defined]
        f"sessions/{n}.json" for n in ("alpha", "beta", "delta", "gamma")
    ]
    by_session: dict[str, list[object]] = {}
    for row in dump["checkpoints"]:  # type: ignore[attr-defined]
        by_session.setdefault(row[0], []).append(row)
    assert sorted(by_session) == ["alpha", "beta", "delta", "gamma"]
    labels = [json.loads(r[7])["label"] for r in by_session["alpha"]]  # type: ignore[index]
    assert "my label" in labels
    journal = {(s, call) for s, call, _, _ in dump["journal"]}  # type: ignore[attr-defined]
    assert journal == {(s, c) for s in ("alpha", "gamma") for c in ("call_0", "call_2")}
    [(session, pending)] = dump["pending"]  # type: ignore[misc]
    assert session == "beta" and "waiting for memory" in pending
    said = [json.loads(b)["content"] for s, _, b in dump["transcript"] if s == "alpha"]  # type: ignore[attr-defined]
    assert said[0] == "question 0 é ✓" and not any("cut sh" in str(t) for t in said)

    again = forked_koog("storage", "migrate")
    assert "nothing to migrate" in again.stderr
    # What moved is used: the oldest restore point of gamma (a file per checkpoint, before)
    # rolls the session back to empty, and its tool calls are not undone twice.
    listed = forked_koog("checkpoint", "list", "-s", "gamma", "--json")
    assert listed.returncode == 0, listed.stderr
    oldest = min(json.loads(listed.stdout), key=lambda c: c["seq"])
    rolled = forked_koog("rollback", oldest["id"], "-s", "gamma", "--yes")
    assert rolled.returncode == 0, rolled.stderr
    shown = forked_koog("history", "show", "-s", "gamma", "--transcript", "--format", "json")
    assert len(json.loads(shown.stdout)) >= 10


def test_migrations_killed_at_random_points_end_as_an_uninterrupted_one(
    forked_koog: Run, zygote: Zygote, data_dir: Path, koog_env: dict[str, str], tmp_path: Path
) -> None:
    reference = tmp_path / "reference" / "data"
    reference.parent.mkdir()
    _unpack(reference)
    env = {**koog_env, "KOOG_DATA_DIR": str(reference)}
    started = time.monotonic()
    assert zygote.spawn("storage", "migrate", env=env).wait(timeout=60) == 0
    span = (time.monotonic() - started) * 1.2
    expected = _dump(reference)
    rng = random.Random("legacy-migration")
    interrupted = 0
    for trial in range(12):
        place = tmp_path / f"t{trial}" / "data"
        place.parent.mkdir()
        _unpack(place)
        env = {**koog_env, "KOOG_DATA_DIR": str(place)}
        proc = zygote.spawn("storage", "migrate", env=env)
        time.sleep(rng.uniform(0, span))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        interrupted += any((place / folder).exists() for folder in LEGACY)
        assert zygote.spawn("storage", "migrate", env=env).wait(timeout=60) == 0, trial
        assert _dump(place) == expected, trial
    assert interrupted >= 2  # kills landed before the end, not only after it
