"""Ctrl-C always works: SIGINTs at random moments of a streamed reply, with another
process hogging the CPU, each cancel the turn and leave the history as it was."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest

from tests.conftest import KOOG_BIN
from tests.fakes.openai_server import FakeOpenAIServer

pytestmark = pytest.mark.e2e
SLOW_REPLY = {"chunks": [f"chunk{i} " for i in range(120)], "chunk_delay": 0.01}


@pytest.fixture
def cpu_hog() -> Iterator[None]:
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        hog.kill()
        hog.wait()


def test_interrupts_at_random_moments_in_the_repl_always_cancel(
    koog_env: dict[str, str], server: FakeOpenAIServer, data_dir: Path, cpu_hog: None
) -> None:
    env = {**koog_env, "PROMPT_TOOLKIT_NO_CPR": "1", "TERM": "xterm", "NO_COLOR": "1"}
    child = pexpect.spawn(
        KOOG_BIN, ["chat", "-s", "int"], env=env, dimensions=(30, 100), encoding="utf-8", timeout=20
    )
    child.expect_exact("int>")
    server.enqueue({"content": "first reply"})
    child.send("hello\r")
    child.expect_exact("first reply")
    child.expect_exact("int>")
    path = data_dir / "sessions" / "int.json"
    before = path.read_bytes()
    rng = random.Random(11)
    for attempt in range(50):
        server.enqueue(SLOW_REPLY)
        child.send(f"question {attempt}\r")
        child.expect_exact("chunk")
        time.sleep(rng.uniform(0, 0.3))
        child.sendintr()
        index = child.expect_exact(["(cancelled)", "int>"])
        assert index == 0, f"attempt {attempt}: the reply was not cancelled"
        child.expect_exact("int>")
        assert path.read_bytes() == before, f"attempt {attempt} changed the history"
    child.sendcontrol("d")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


def test_interrupts_at_random_moments_of_a_one_shot_exit_130(
    koog_env: dict[str, str], server: FakeOpenAIServer, data_dir: Path, cpu_hog: None
) -> None:
    # Each run starts a process (about a second); STRESS_INTERRUPTS=50 for the full count.
    runs = int(os.environ.get("STRESS_INTERRUPTS", "4"))
    rng = random.Random(7)
    for attempt in range(runs):
        server.enqueue(SLOW_REPLY)
        child = subprocess.Popen(
            [KOOG_BIN, "chat", "-s", "one", f"question {attempt}"],
            env=koog_env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        assert child.stdout is not None
        child.stdout.read(5)  # the reply has started
        time.sleep(rng.uniform(0, 0.5))
        child.send_signal(signal.SIGINT)
        child.stdout.read()
        assert child.wait(20) == 130, f"attempt {attempt} exited {child.returncode}"
    assert not (data_dir / "sessions" / "one.json").exists()
