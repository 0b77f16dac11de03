"""Renaming and deleting a whole session is one act: killed at any point, the next command
finishes it (the session whole under exactly one name, or gone); two renames of one
session never both succeed; a turn in flight during a rename lands in the renamed session.
On both backends."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.openai_server import FakeOpenAIServer
from tests.support.zygote import Zygote

pytestmark = pytest.mark.e2e
Run = Callable[..., subprocess.CompletedProcess[str]]


def _fill(env: dict[str, str], *sessions: str) -> None:
    """Two turns and a labelled checkpoint in each, through koog's services (quicker than
    a process each)."""
    from koogcli.core.names import SessionName
    from koogcli.services import checkpoints, compose
    from koogcli.services.turn import TurnRequest, run_turn

    ctx = compose.build(env=env)
    for session in sessions:
        for text in TURNS:
            run_turn(ctx, TurnRequest(SessionName(session), text))
        checkpoints.create(ctx, SessionName(session), f"mark-{session}")


TURNS = ("one", "two")


def _state(env: dict[str, str], name: str, ctx: Any = None) -> str:
    """ "whole": history, transcript and checkpoints all there; "gone": nothing of it;
    "partial" otherwise. A new context opens storage as a new command would (finishing
    what a stopped koog left); a given one is asked to finish first."""
    from koogcli.core.names import SessionName
    from koogcli.services import compose

    if ctx is None:
        ctx = compose.build(env=env)
    else:
        ctx.storage.finish_moves()
    session = SessionName(name)
    has_history = ctx.history.exists(session)
    has_transcript = ctx.transcript.exists(session)
    marks = ctx.checkpoints.headers(session)
    if not (has_history or has_transcript or marks):
        return "gone"
    said = (
        [m.text for m in ctx.history.read(session).messages if m.role == "user"]
        if has_history
        else []
    )
    whole = (
        said == list(TURNS)
        and len(ctx.transcript.read(session)) >= 2 * len(TURNS)
        and any(c.label.startswith("mark-") for c in marks if c.label)
    )
    return "whole" if whole else "partial"


def _killed_together(
    zygote: Zygote, env: dict[str, str], commands: list[list[str]], delays: list[float]
) -> list[int]:
    """Start the commands at once and SIGKILL each after its own delay."""
    started = time.monotonic()
    procs = [zygote.spawn(*args, env=env) for args in commands]
    for proc, delay in sorted(zip(procs, delays, strict=True), key=lambda pair: pair[1]):
        time.sleep(max(0.0, started + delay - time.monotonic()))
        proc.send_signal(signal.SIGKILL)
    return [proc.wait(timeout=30) for proc in procs]


def _killed(zygote: Zygote, env: dict[str, str], args: list[str], delay: float) -> int:
    proc = zygote.spawn(*args, env=env)
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    return proc.wait(timeout=30)


def test_renames_and_deletes_killed_at_random_points_are_finished(
    backend: str, forked_koog: Run, zygote: Zygote, koog_env: dict[str, str]
) -> None:
    from koogcli.services import compose

    rng = random.Random(f"moves-{backend}")
    timed = [f"t{n}" for n in range(8)]
    _fill(koog_env, *timed, *(f"r{t}" for t in range(40)), *(f"d{t}" for t in range(40)))
    started = time.monotonic()  # how long eight at once take whole, to aim the kills
    procs = [zygote.spawn("history", "rename", t, f"{t}x", env=koog_env) for t in timed]
    assert [p.wait(timeout=60) for p in procs] == [0] * 8
    span = max(0.02, time.monotonic() - started) * 1.2
    ctx = compose.build(env=koog_env)
    outcomes = {"before": 0, "after": 0}
    for batch in range(0, 40, 8):  # eight at a time, each on its own session
        trials = range(batch, batch + 8)
        codes = _killed_together(
            zygote,
            koog_env,
            [["history", "rename", f"r{t}", f"n{t}"] for t in trials],
            [rng.uniform(0, span) for _ in trials],
        )
        for trial, code in zip(trials, codes, strict=True):
            old, new = f"r{trial}", f"n{trial}"
            # The next command finishes what was left: the session whole under one name.
            states = (_state(koog_env, old, ctx), _state(koog_env, new, ctx))
            assert states in (("whole", "gone"), ("gone", "whole")), (trial, code, states)
            done = states[1] == "whole"
            outcomes["after" if done else "before"] += 1
            again = forked_koog("history", "rename", old, new)  # run again: done, or does it
            assert again.returncode == (2 if done else 0), again.stderr
            assert (_state(koog_env, old, ctx), _state(koog_env, new, ctx)) == ("gone", "whole")
    for batch in range(0, 40, 8):
        trials = range(batch, batch + 8)
        _killed_together(
            zygote,
            koog_env,
            [["history", "delete", f"d{t}", "--yes"] for t in trials],
            [rng.uniform(0, span) for _ in trials],
        )
        for trial in trials:
            name = f"d{trial}"
            assert _state(koog_env, name, ctx) in ("whole", "gone"), trial
            again = forked_koog("history", "delete", name, "--yes")
            assert again.returncode in (0, 2), again.stderr  # 2: it had finished already
            assert _state(koog_env, name, ctx) == "gone", trial
    assert min(outcomes.values()) >= 1, outcomes  # kills landed before and after the move


def test_two_renames_of_one_session_one_wins(
    backend: str, forked_koog: Run, zygote: Zygote, koog_env: dict[str, str], tmp_path: Path
) -> None:
    for round_ in range(5):
        old = f"c{round_}"
        _fill(koog_env, old)
        errs = [tmp_path / f"e{round_}{i}" for i in range(2)]
        procs = [
            zygote.spawn("history", "rename", old, f"{old}-{i}", env=koog_env, stderr=errs[i])
            for i in range(2)
        ]
        codes = sorted(p.wait(timeout=30) for p in procs)
        assert codes == [0, 2], (codes, [e.read_text() for e in errs])
        states = sorted(_state(koog_env, f"{old}-{i}") for i in range(2))
        assert states == ["gone", "whole"], states


def test_a_turn_in_flight_during_a_rename_lands_in_the_renamed_session(
    backend: str,
    forked_koog: Run,
    zygote: Zygote,
    koog_env: dict[str, str],
    server: FakeOpenAIServer,
    tmp_path: Path,
) -> None:
    _fill(koog_env, "f")
    server.enqueue({"content": "a slow answer", "delay": 1.0})
    turn = zygote.spawn("chat", "-s", "f", "four", env=koog_env)
    time.sleep(0.5)  # the turn is waiting for the server
    rename = forked_koog("history", "rename", "f", "g")
    assert rename.returncode == 0, rename.stderr
    assert turn.wait(timeout=30) == 0
    shown = json.loads(forked_koog("history", "show", "-s", "g", "--format", "json").stdout)
    assert [m["content"] for m in shown if m["role"] == "user"] == [*TURNS, "four"]
    assert _state(koog_env, "f") == "gone"


@pytest.mark.files_only  # PostgreSQL renames in one transaction: nothing is left halfway
def test_a_rename_killed_halfway_is_finished_by_running_it_again(
    backend: str, forked_koog: Run, koog_env: dict[str, str], data_dir: Path
) -> None:
    """The intent a killed rename leaves (its transcript moved, nothing else yet): running
    the same rename again finishes it and succeeds, saying so."""
    import sqlite3

    _fill(koog_env, "k")
    intents = data_dir / "intents"
    intents.mkdir()
    (intents / "rename.k.json").write_text(json.dumps({"op": "rename", "old": "k", "new": "m"}))
    with sqlite3.connect(data_dir / "koog.sqlite3") as db:
        db.execute("UPDATE transcript SET session = 'm' WHERE session = 'k'")
    again = forked_koog("history", "rename", "k", "m")
    assert again.returncode == 0, again.stderr
    assert "finished the rename of k to m" in again.stderr
    assert (_state(koog_env, "k"), _state(koog_env, "m")) == ("gone", "whole")
    assert not list(intents.iterdir())
