"""Disk use of automatic checkpoints: 1,000 turns (every third one calling a tool), then the
checkpoints against the transcript. Goals: at most 3x the transcript (issue 3), 1.5x on
disk (issue 12).

    python bench/checkpoint_disk.py [--turns 1000]

Runs the real turn service and file backend in-process with a scripted model, so the
figure is about storage, not the model or process start-up. Both live in `koog.sqlite3`:
"bytes" are what the rows hold, "disk" the pages their tables and indexes take (SQLite's
dbstat), the database file itself is shown whole.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import tempfile
import time
from pathlib import Path

import common  # noqa: F401  (puts the repository on sys.path)


def main() -> None:
    from koogcli.core.messages import ToolCall
    from koogcli.core.model_port import Completion
    from koogcli.core.names import SessionName
    from koogcli.services import compose
    from koogcli.services.turn import TurnRequest, run_turn
    from tests.fakes.chat_model import FakeChatModel

    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=1000)
    turns = parser.parse_args().turns
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "bench_tools.py").write_text(
            "def note(text: str) -> str:\n    '''Write a note.'''\n    return 'noted: ' + text\n"
        )
        (root / "config.toml").write_text('[[tools]]\ncallable = "bench_tools:note"\n')
        env = {
            **os.environ,
            "KOOG_DATA_DIR": str(root / "data"),
            "KOOG_CONFIG": str(root / "config.toml"),
        }
        model = FakeChatModel(
            lambda r: (
                "A reply of ordinary length that answers the question "
                "with a couple of sentences. " * 2
            )
        )
        ctx = compose.build(env=env, model_factory=lambda c: model)
        session = SessionName("bench")
        start = time.perf_counter()
        for i in range(turns):
            if i % 3 == 0:
                model.enqueue(
                    Completion("", (ToolCall(f"c{i}", "note", f'{{"text": "item {i}"}}'),))
                )
            run_turn(ctx, TurnRequest(session, f"Question number {i}: what about this topic?"))
        elapsed = time.perf_counter() - start
        data = root / "data"
        tables = _tables(data / "koog.sqlite3")
        transcript = tables["transcript"]
        checkpoints = (
            tables["checkpoints"][0] + tables["messages"][0],
            tables["checkpoints"][1] + tables["messages"][1],
        )
        kept = len(compose.build(env=env).checkpoints.headers(session))
        size = (data / "koog.sqlite3").stat().st_size
        print(
            f"{turns} turns in {elapsed:.1f}s ({elapsed / turns * 1000:.1f} ms per turn, in process)"
        )
        print(
            f"transcript  {transcript[0] / 1024:8.1f} KiB (bytes), {transcript[1] / 1024:8.1f} KiB (disk)"
        )
        print(
            f"checkpoints {checkpoints[0] / 1024:8.1f} KiB (bytes), {checkpoints[1] / 1024:8.1f} KiB (disk), "
            f"{kept} checkpoints; koog.sqlite3 {size / 1024:.1f} KiB"
        )
        print(
            f"ratio       {checkpoints[0] / transcript[0]:.2f}x by bytes, "
            f"{checkpoints[1] / transcript[1]:.2f}x on disk  (goals <= 3x, <= 1.5x on disk)"
        )


def _tables(path: Path) -> dict[str, tuple[int, int]]:
    """Bytes held and pages taken (its indexes counted with it), by table."""
    conn = sqlite3.connect(path)
    held = {
        "transcript": "SELECT sum(length(body) + length(turn_id) + length(session)) FROM transcript",
        "checkpoints": "SELECT sum(length(header) + length(items) + length(id) + length(session)) "
        "FROM checkpoints",
        "messages": "SELECT sum(length(body) + length(digest) + length(session)) FROM messages",
    }
    owners = dict(conn.execute("SELECT name, tbl_name FROM sqlite_master").fetchall())
    pages = dict.fromkeys(held, 0)
    for name, size in conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name"):
        table = owners.get(name, name)
        if table in pages:
            pages[table] += int(size)
    sizes = {t: (int(conn.execute(sql).fetchone()[0] or 0), pages[t]) for t, sql in held.items()}
    conn.close()
    return sizes


if __name__ == "__main__":
    main()
