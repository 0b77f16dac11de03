"""Many processes, one session: every turn lands once (revision check, re-apply on
conflict, the append log under the session lock)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAIServer

pytestmark = pytest.mark.e2e

# Ten turns through koog's services in one process (one start-up per process, so eight
# processes fit the test budget); the turns are what `koog chat` runs.
TURNS = """
import sys
from koogcli.core.names import SessionName
from koogcli.services import context
from koogcli.services.turn import TurnRequest, run_turn

ctx = context.build()
for t in range(10):
    run_turn(ctx, TurnRequest(SessionName("shared"), f"w{sys.argv[1]}-t{t}"))
"""


def test_eight_processes_of_ten_turns_lose_and_duplicate_nothing(
    koog_env: dict[str, str], server: FakeOpenAIServer, data_dir: Path
) -> None:
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", TURNS, str(w)],
            env=koog_env,
            stdin=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(8)
    ]
    errors = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * 8, errors
    done = subprocess.run(
        [Path(sys.executable).parent / "koog", "history", "show", "-s", "shared", "--json"],
        env=koog_env,
        capture_output=True,
        text=True,
        check=True,
    )
    users = Counter(m["content"] for m in json.loads(done.stdout) if m["role"] == "user")
    assert sorted(users) == sorted(f"w{w}-t{t}" for w in range(8) for t in range(10))
    assert set(users.values()) == {1}
