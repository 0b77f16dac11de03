"""Many processes, one session: every turn lands once (revision check, re-apply on
conflict, the append log under the session lock)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import KOOG_BIN
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.summaries import is_summary_request
from tests.support.turn_workers import expected, run_workers, user_turns
from tests.support.zygote import Zygote

pytestmark = pytest.mark.e2e


def test_eight_processes_of_ten_turns_lose_and_duplicate_nothing(
    koog_env: dict[str, str], server: FakeOpenAIServer, data_dir: Path
) -> None:
    run_workers([koog_env] * 8, turns=10, timeout=120)
    users = user_turns(koog_env)
    assert sorted(users) == expected(8, 10)
    assert set(users.values()) == {1}


def test_compress_beside_four_writers_succeeds_and_loses_no_turn(
    backend: str,
    koog_env: dict[str, str],
    server: FakeOpenAIServer,
    data_dir: Path,
    zygote: Zygote,
    tmp_path: Path,
) -> None:
    """Turns stored while a summary is written are re-applied on top of it: `compress`
    succeeds though four processes keep writing, and every turn is in the history, in a
    summary (which names the turns it summarised) or as its messages."""

    def answer(body: dict[str, Any]) -> dict[str, Any]:
        last = str(body["messages"][-1]["content"])
        if is_summary_request(last):
            turns = sorted(set(re.findall(r"w\d+-t\d+", last)))
            return {"content": "SUMMARY " + " ".join(turns), "delay": 0.2}
        return {"content": f"echo: {last}"}

    server.responder = answer
    workers = subprocess.Popen(
        [sys.executable, "-c", TURNS, "4", "20"],
        env=koog_env,
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    err = tmp_path / "compress.txt"
    outcomes = []
    deadline = time.monotonic() + 60
    while len(server.chat_requests) < 12 and time.monotonic() < deadline:
        time.sleep(0.05)  # the first turns are in
    for _ in range(10):
        code = zygote.spawn("compress", "-s", "shared", env=koog_env, stderr=err).wait(60)
        outcomes.append((code, err.read_text().strip()[-200:]))
        time.sleep(0.1)
    assert workers.wait(timeout=180) == 0, workers.stderr.read() if workers.stderr else ""
    assert sum(code == 0 for code, _ in outcomes) >= 9, outcomes
    shown = subprocess.run(
        [KOOG_BIN, "history", "show", "-s", "shared", "--format", "json"],
        env=koog_env,
        capture_output=True,
        text=True,
        check=True,
    )
    held = " ".join(str(m["content"]) for m in json.loads(shown.stdout))
    missing = [t for t in expected(4, 20) if t not in re.findall(r"w\d+-t\d+", held)]
    assert missing == [], missing


TURNS = """
import sys, threading
from koogcli.core.names import SessionName
from koogcli.services import compose
from koogcli.services.turn import TurnRequest, run_turn

def work(w):
    ctx = compose.build()
    for t in range(int(sys.argv[2])):
        run_turn(ctx, TurnRequest(SessionName("shared"), f"w{w}-t{t}"))

threads = [threading.Thread(target=work, args=(w,)) for w in range(int(sys.argv[1]))]
[t.start() for t in threads]
[t.join() for t in threads]
"""
