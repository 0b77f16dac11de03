"""SIGKILL while the append log is folded into the session document: every file still
parses and the history is the one before or the one after the fold, never less."""

from __future__ import annotations

import json
import os
import random
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import KOOG_BIN
from tests.e2e.test_safety_e2e import kill_when

pytestmark = pytest.mark.e2e


def aimed(sessions: Path, delay: float) -> Callable[[], bool]:
    seen: list[float] = []

    def ready() -> bool:
        if not seen and any(n.endswith(".tmp") for n in os.listdir(sessions)):
            seen.append(time.monotonic())
        return bool(seen) and time.monotonic() >= seen[0] + delay

    return ready


def texts(ctx: Any, session: Any) -> list[str]:
    return [m.text for m in ctx.history.read(session).messages if m.role != "system"]


def test_kills_during_folds_leave_a_whole_history(
    koog_env: dict[str, str], data_dir: Path, make_ctx: Callable[..., Any]
) -> None:
    from koogcli.core.names import SessionName
    from koogcli.services.turn import TurnRequest, run_turn

    session = SessionName("fold")
    sessions = data_dir / "sessions"
    rng = random.Random(21)
    # STRESS_FOLD_KILLS=50 for the full count; each kill costs a process start.
    for attempt in range(int(os.environ.get("STRESS_FOLD_KILLS", "16"))):
        run_turn(make_ctx(), TurnRequest(session, f"turn {attempt}"))  # appends to the log
        before = texts(make_ctx(), session)
        assert f"turn {attempt}" in before
        proc = subprocess.Popen(
            [KOOG_BIN, "rollback", "-s", "fold", "--latest", "--yes"],  # a fold
            env=koog_env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        if attempt % 2:
            time.sleep(rng.uniform(0, 0.5))
            proc.kill()
            proc.wait(timeout=10)
        else:  # aimed: a few milliseconds at most after the new document is begun
            kill_when(proc, aimed(sessions, rng.uniform(0, 0.004)))
        json.loads((sessions / "fold.json").read_text())  # the document parses
        log = sessions / "fold.log"
        if log.exists():
            lines = log.read_text().splitlines()
            for line in lines[:-1]:
                json.loads(line)
        after = texts(make_ctx(), session)
        assert after in (before, before[:-2]), attempt  # before the fold, or rolled back
