"""koog killed at random moments of tool-calling turns, then `koog chat --resume`: a call
that returned never runs again (SPEC §5.18), a call killed while it ran is in doubt and
runs afresh (the README's rule), and the history holds every call and result once.

50 kills a backend, each a random 0-15 ms after the turn's first, second or third tool call
started (chosen at random). Each turn makes three rounds of one tool call; each call works 10 ms,
then has its effect (logged with the time) and returns. A call whose effect came more than
20 ms before the kill had returned (its receipt was written and synced in between); only a
call whose effect came in the last instants before the kill may be in doubt. (The window
was 2 ms: under CI's full load the receipt's fsync took 4.6 ms once, and that call, still
inside its process when koog died, ran again as the rule says.)"""

from __future__ import annotations

import random
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

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
def step(x: str) -> str:
    """One step of work: it works a while, then has its effect."""
    _log("start", x, time.time())
    time.sleep(0.01)
    _log("effect", x, time.time())
    return f"step {x} done"
'''
TRIALS = 50
IN_DOUBT_WINDOW = 0.02


@pytest.fixture
def tool_env(tmp_path: Path) -> dict[str, str]:
    return tool_logs.tool_env(
        tmp_path, "resume_tools", TOOLS, '[[tools]]\ncallable = "resume_tools:step"\n'
    )


def log(env: dict[str, str]) -> list[tuple[str, str, float]]:
    return [(str(what), str(x), float(str(at))) for what, x, at in tool_logs.logged(env)]


def test_kills_during_tool_turns_then_resume_never_run_a_returned_call_twice(
    backend: str,
    run_koog: Run,
    zygote: Zygote,
    server: FakeOpenAIServer,
    tool_env: dict[str, str],
    koog_env: dict[str, str],
) -> None:
    from koogcli.core.names import SessionName
    from koogcli.services import compose

    def responder(body: dict[str, Any]) -> dict[str, Any]:
        done = sum(1 for m in body["messages"] if m["role"] == "tool")
        if done >= 3:
            return {"content": "three steps"}
        return {"tool_calls": [call("step", f"s{done}", x=str(done))]}

    server.responder = responder
    env = {**koog_env, **tool_env}
    rng = random.Random(33)
    reached = in_doubt = early = 0
    for trial in range(TRIALS):
        session = f"k{trial}"
        Path(tool_env["TOOL_LOG"]).unlink(missing_ok=True)
        proc = zygote.spawn("chat", "-s", session, "go", env=env)
        wanted, pause = rng.randint(1, 3), rng.uniform(0, 0.015)
        deadline = time.monotonic() + 20  # the wanted-th call under way, then a moment more
        while proc.poll() is None and sum(1 for e in log(tool_env) if e[0] == "start") < wanted:
            assert time.monotonic() < deadline
            time.sleep(0.0005)
        time.sleep(pause)
        killed_at = time.time()
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        before = log(tool_env)
        reached += bool(before)

        resumed = run_koog("chat", "-s", session, "--resume", env=tool_env)
        if resumed.returncode == 2 and "no session named" in resumed.stderr:
            early += 1  # killed before the turn stored anything: nothing ran, nothing kept
            assert before == [], (trial, before)
            continue
        assert resumed.returncode == 0, (trial, resumed.stderr)
        after = log(tool_env)
        effects = Counter(x for what, x, _ in after if what == "effect")
        assert sorted(effects) == ["0", "1", "2"], (trial, after)  # every call had its effect
        for x, count in effects.items():
            first = min(at for what, y, at in after if what == "effect" and y == x)
            if count > 1:  # only a call whose effect was the kill's last instants
                assert count == 2 and killed_at - first < IN_DOUBT_WINDOW, (trial, x, after)
                in_doubt += 1
        returned = {x for what, x, at in before if what == "effect"}
        returned = {x for x in returned if effects[x] == 1}
        starts = Counter(x for what, x, _ in after if what == "start")
        for x in returned:
            assert starts[x] == 1, (trial, x, after)  # a call that returned never ran again
        stored = compose.build(env=env).history.read(SessionName(session)).messages
        history = [m for m in stored if m.role != "system"]
        roles = [m.role for m in history]
        assert roles == ["user"] + ["assistant", "tool"] * 3 + ["assistant"], (trial, roles)
        ids = [c.id for m in history for c in m.tool_calls]
        assert len(set(ids)) == 3
        assert [m.tool_call_id for m in history if m.role == "tool"] == ids
        assert [m.text for m in history if m.role == "tool"] == [f"step {x} done" for x in "012"]
        assert history[-1].text == "three steps"
    assert reached == TRIALS, reached  # every kill landed inside the tool rounds
    assert in_doubt <= TRIALS // 10, in_doubt
    print(
        f"{TRIALS} kills: {reached} inside the tool rounds, {early} before the turn began, {in_doubt} in doubt"
    )
