"""koog killed at random moments of tool-calling turns, then `koog chat --resume`: a call
that returned never runs again (SPEC §5.18), a call killed while it ran is in doubt and
runs afresh (the README's rule), and the history holds every call and result once.

50 kills a backend, each at a random moment of the 0.15 s after the turn's first model
request. Each turn makes three rounds of one tool call; each call works 10 ms,
then has its effect (logged with the time) and returns. A call whose effect came more than
2 ms before the kill had returned (its receipt was written in between); only a call whose
effect came in the last instants before the kill may be in doubt."""

from __future__ import annotations

import json
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
from tests.support.zygote import Zygote

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
Run = Callable[..., subprocess.CompletedProcess[str]]
run_koog = pytest.fixture(name="run_koog")(forked_run_koog)

TOOLS = '''
import json, os, time
def _log(*entry):
    with open(os.environ["TOOL_LOG"], "a") as f:
        f.write(json.dumps(list(entry)) + "\\n")
def step(x: str) -> str:
    """One step of work: it works a while, then has its effect."""
    _log("start", x, time.time())
    time.sleep(0.01)
    _log("effect", x, time.time())
    return f"step {x} done"
'''
TRIALS = 50
IN_DOUBT_WINDOW = 0.002


@pytest.fixture
def tool_env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "resume_tools.py").write_text(TOOLS)
    config = tmp_path / "resume.toml"
    config.write_text('[[tools]]\ncallable = "resume_tools:step"\n')
    return {
        "KOOG_CONFIG": str(config),
        "TOOL_LOG": str(tmp_path / "tools.log"),
        "PYTHONPATH": str(tmp_path),
    }


def log(env: dict[str, str]) -> list[tuple[str, str, float]]:
    path = Path(env["TOOL_LOG"])
    if not path.exists():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.endswith("]")]
    return [(what, x, float(at)) for what, x, at in rows]


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
        asked = len(server.chat_requests)
        proc = zygote.spawn("chat", "-s", session, "go", env=env)
        deadline = time.monotonic() + 20  # the turn is under way: its first model request
        while proc.poll() is None and len(server.chat_requests) == asked:
            assert time.monotonic() < deadline
            time.sleep(0.0005)
        deadline = time.monotonic() + rng.uniform(0, 0.15)
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.0005)
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
    assert reached >= TRIALS * 2 // 3, reached  # most kills landed inside the tool rounds
    assert in_doubt <= TRIALS // 10, in_doubt
    print(
        f"{TRIALS} kills: {reached} inside the tool rounds, {early} before the turn began, {in_doubt} in doubt"
    )
