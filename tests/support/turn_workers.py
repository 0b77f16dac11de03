"""Many processes taking turns in one session at once, for the lost-update tests.

Each worker runs its turns through koog's services in one process (one start-up per
process, so several workers fit the test budget); the turns are what `koog chat` runs.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

TURNS = """
import sys
from koogcli.core.names import SessionName
from koogcli.services import compose
from koogcli.services.turn import TurnRequest, run_turn

ctx = compose.build()
for t in range(int(sys.argv[2])):
    run_turn(ctx, TurnRequest(SessionName("shared"), f"w{sys.argv[1]}-t{t}"))
"""


def run_workers(envs: list[dict[str, str]], turns: int, timeout: float = 150) -> None:
    """One worker per environment, all at once; every one must finish cleanly."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", TURNS, str(w), str(turns)],
            env=env,
            stdin=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w, env in enumerate(envs)
    ]
    errors = [p.communicate(timeout=timeout)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * len(envs), errors


def user_turns(env: dict[str, str]) -> Counter[str]:
    """How often each user message is in the stored history, read by the real binary."""
    done = subprocess.run(
        [Path(sys.executable).parent / "koog", "history", "show", "-s", "shared", "--json"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return Counter(m["content"] for m in json.loads(done.stdout) if m["role"] == "user")


def expected(workers: int, turns: int) -> list[str]:
    return sorted(f"w{w}-t{t}" for w in range(workers) for t in range(turns))
