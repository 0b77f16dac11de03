"""A rollback killed at any instant, then run again: every compensation runs exactly once
(SPEC §5.18), the history ends at the target, and the second run reports every call the
rollback took out. Five rounds of two tool calls, ten compensations of 20 ms; koog is
SIGKILLed during the k-th compensation, just after it returns, or at a random moment."""

from __future__ import annotations

import random
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import forked_run_koog
from tests.e2e.test_persistence_e2e import call
from tests.fakes.openai_server import FakeOpenAIServer
from tests.support import tool_logs
from tests.support.zygote import Zygote

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
Run = Callable[..., subprocess.CompletedProcess[str]]
run_koog = pytest.fixture(name="run_koog")(forked_run_koog)

TOOLS = '''
def create_item(name: str) -> str:
    """Create an item."""
    _log("create", name)
    return f"created {name}"
def remove_item(name: str) -> str:
    _log("undo-start", name)
    time.sleep(float(os.environ.get("UNDO_SLEEP", "0")))
    _log("undo", name)
    return f"removed {name}"
'''
TRIALS = 15
NAMES = [f"R{turn}{part}" for turn in range(5) for part in "ab"]


@pytest.fixture
def tool_env(tmp_path: Path) -> dict[str, str]:
    config = '[[tools]]\ncallable = "undo_tools:create_item"\nrollback = "undo_tools:remove_item"\n'
    return tool_logs.tool_env(tmp_path, "undo_tools", TOOLS, config)


def entries(env: dict[str, str], kind: str) -> list[str]:
    return [str(name) for what, name in tool_logs.logged(env) if what == kind]


def prepare(run_koog: Run, server: FakeOpenAIServer, env: dict[str, str], session: str) -> str:
    """A turn of five model calls of two created items each; the id of the restore point
    taken before it (BASE: the empty history)."""
    from koogcli.core.names import SessionName
    from koogcli.services import compose

    server.enqueue(
        *(
            {
                "tool_calls": [
                    call("create_item", f"{session}c{step}{part}", name=f"R{step}{part}")
                    for part in "ab"
                ]
            }
            for step in range(5)
        ),
        {"content": "made ten"},
    )
    made = run_koog("chat", "-s", session, "make ten, two at a time", env=env)
    assert made.returncode == 0, made.stderr
    marks = compose.build(env=env).checkpoints.headers(SessionName(session))
    return next(c.id for c in marks if c.kind == "restore")


def test_a_rollback_killed_at_any_instant_runs_each_compensation_exactly_once(
    backend: str,
    run_koog: Run,
    zygote: Zygote,
    server: FakeOpenAIServer,
    tool_env: dict[str, str],
    koog_env: dict[str, str],
    data_dir: Path,
) -> None:
    from koogcli.core.names import SessionName
    from koogcli.services import compose

    rng = random.Random(18)
    env = {**koog_env, **tool_env, "UNDO_SLEEP": "0.02"}
    reported = 0
    for trial in range(TRIALS):
        session = f"rb{trial}"
        Path(tool_env["TOOL_LOG"]).unlink(missing_ok=True)
        base = prepare(run_koog, server, env, session)
        mode, k = trial % 3, 1 + (trial * 7) % 10  # each k at least once
        if mode == 0:  # while the k-th compensation runs

            def ready(k: int = k) -> bool:
                return len(entries(tool_env, "undo-start")) >= k

            pause = 0.0
        elif mode == 1:  # just after the k-th returned

            def ready(k: int = k) -> bool:
                return len(entries(tool_env, "undo")) >= k

            pause = rng.uniform(0, 0.004)
        else:  # at a random moment
            start, wait = time.monotonic(), rng.uniform(0.02, 1.0)

            def ready(start: float = start, wait: float = wait) -> bool:
                return time.monotonic() - start >= wait

            pause = 0.0
        proc = zygote.spawn("rollback", "-s", session, base, "--yes", env=env)
        deadline = time.monotonic() + 20
        while proc.poll() is None and time.monotonic() < deadline and not ready():
            time.sleep(0.0005)
        time.sleep(pause)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        undone_at_kill = len(entries(tool_env, "undo"))

        again = run_koog("rollback", "-s", session, base, "--yes", env=tool_env)
        said = again.stdout + again.stderr
        assert again.returncode == 0, (trial, said)
        starts, undos = entries(tool_env, "undo-start"), entries(tool_env, "undo")
        assert sorted(undos) == sorted(NAMES), (trial, mode, k, undos, said)
        assert sorted(starts) == sorted(NAMES), (trial, mode, k, starts, said)
        if undone_at_kill < len(NAMES):  # the killed rollback left work: all ten are told
            reported += 1
            for name in NAMES:
                assert f"create_item({name})" in said, (trial, name, said)
        stored = compose.build(env=env).history.read(SessionName(session)).messages
        texts = [m.text for m in stored if m.role != "system"]
        assert texts == [], (trial, texts)
    leftovers = list((data_dir / "undo").rglob("*")) if (data_dir / "undo").exists() else []
    assert leftovers == []
    assert reported >= TRIALS // 2


def test_commands_beside_a_live_or_killed_rollback_never_run_a_compensation_twice(
    backend: str,
    run_koog: Run,
    zygote: Zygote,
    server: FakeOpenAIServer,
    tool_env: dict[str, str],
    koog_env: dict[str, str],
) -> None:
    """A turn and a second rollback started while a rollback runs its compensations leave
    them to it; after that rollback is killed, two commands at once finish what it left:
    each compensation starts and finishes once."""
    env = {**koog_env, **tool_env, "UNDO_SLEEP": "0.4"}
    for trial, kill in enumerate((False, True)):
        session = f"live{trial}"
        Path(tool_env["TOOL_LOG"]).unlink(missing_ok=True)
        base = prepare(run_koog, server, env, session)
        first = zygote.spawn("rollback", "-s", session, base, "--yes", env=env)
        deadline = time.monotonic() + 20
        while not entries(tool_env, "undo-start") and time.monotonic() < deadline:
            time.sleep(0.005)
        if kill:
            first.send_signal(signal.SIGKILL)
        beside = [
            zygote.spawn("chat", "-s", session, "meanwhile", env=env),
            zygote.spawn("rollback", "-s", session, base, "--yes", env=env),
        ]
        for proc in (first, *beside):
            proc.wait(timeout=60)
        assert all(p.returncode == 0 for p in beside), [p.returncode for p in beside]
        if kill:  # whatever the killed one left is finished by now, or by this one
            assert run_koog("rollback", "-s", session, base, "--yes", env=env).returncode == 0
        starts, undos = entries(tool_env, "undo-start"), entries(tool_env, "undo")
        assert sorted(undos) == sorted(NAMES), (trial, undos)
        assert sorted(starts) == sorted(NAMES), (trial, starts)


def test_a_killed_rollback_latest_retried_with_latest_finishes_without_undoing_itself(
    run_koog: Run,
    zygote: Zygote,
    server: FakeOpenAIServer,
    tool_env: dict[str, str],
    koog_env: dict[str, str],
) -> None:
    """Issue 51: `rollback --latest` killed while its k-th compensation runs, then the same
    command again: the stopped rollback is finished (each compensation once) and that is
    all; before, the retry finished it and then undid it (the last change was the rollback
    itself), bringing the ten calls back."""
    from koogcli.core.names import SessionName
    from koogcli.services import compose

    env = {**koog_env, **tool_env, "UNDO_SLEEP": "0.05"}
    for k in (1, 6, 10):
        session = f"again{k}"
        Path(tool_env["TOOL_LOG"]).unlink(missing_ok=True)
        prepare(run_koog, server, env, session)
        proc = zygote.spawn("rollback", "-s", session, "--latest", "--yes", env=env)
        deadline = time.monotonic() + 20
        while proc.poll() is None and time.monotonic() < deadline:
            if len(entries(tool_env, "undo-start")) >= k:
                break
            time.sleep(0.0005)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        again = run_koog("rollback", "-s", session, "--latest", "--yes", env=tool_env)
        said = again.stdout + again.stderr
        assert again.returncode == 0, (k, said)
        assert "that was stopped" in said and "nothing more was rolled back" in said, said
        assert sorted(entries(tool_env, "undo")) == sorted(NAMES), (k, said)
        stored = compose.build(env=env).history.read(SessionName(session)).messages
        assert [m.text for m in stored if m.role != "system"] == [], (k, said)
