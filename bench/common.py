"""Helpers shared by the benchmarks: timing of whole commands and session seeding."""

from __future__ import annotations

import compileall
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# An installed koog has its bytecode written by pip; an editable one in a shell with
# PYTHONDONTWRITEBYTECODE would compile every changed module at every start.
compileall.compile_dir(str(ROOT / "koogcli"), quiet=1)

PYTHON = sys.executable
KOOG = str(Path(PYTHON).parent / "koog")


def timed(argv: list[str], env: dict[str, str] | None = None) -> float:
    """Wall time of one execution; a failure ends the benchmark with its stderr."""
    start = time.perf_counter()
    done = subprocess.run(
        argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{argv} failed: {done.stderr.decode()[-400:]}")
    return elapsed


def median_seconds(argv: list[str], runs: int, env: dict[str, str] | None = None) -> float:
    """Median wall time of `runs` executions, after one warm-up run."""
    return statistics.median([timed(argv, env) for _ in range(runs + 1)][1:])


def seed_session(data_dir: Path, name: str, count: int) -> None:
    """Write a session of `count` alternating user/assistant messages through the real store."""
    from koogcli.adapters.files.history import FileHistoryStore
    from koogcli.adapters.paths import DataDir
    from koogcli.core.messages import assistant, user
    from koogcli.core.names import SessionName

    messages = [
        user(f"question {i} about things")
        if i % 2 == 0
        else assistant(f"answer {i}: a reply of a few more words than the question")
        for i in range(count)
    ]
    FileHistoryStore(DataDir(data_dir)).write(SessionName(name), messages, None)


def clean_env(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "KOOG_"))}
    env.update(KOOG_DATA_DIR=str(data_dir), KOOG_CONFIG=str(data_dir / "none.toml"), **extra)
    (data_dir / "none.toml").parent.mkdir(parents=True, exist_ok=True)
    (data_dir / "none.toml").write_text("")
    return env
