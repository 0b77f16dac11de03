"""§5.10: a turn is interrupted only when its process is gone; §5.11: the journal of undone
tool effects decides what rollback may restore."""

from __future__ import annotations

import subprocess
import sys

from koogcli.adapters.processes import current_owner, owner_alive
from koogcli.core import checkpoints as core
from koogcli.core.checkpoints import Checkpoint, CompensationEntry
from koogcli.core.messages import ToolCall, assistant, user


def mark(kind: str, turn: str, seq: int, owner: object = None) -> Checkpoint:
    details = {"owner": owner} if owner is not None else {}
    return Checkpoint(
        f"c{seq}", "s", seq, kind, "2026-01-01T00:00:00Z", turn_id=turn, details=details
    )  # type: ignore[arg-type]


def test_this_process_is_alive_and_a_finished_one_is_not() -> None:
    assert owner_alive(current_owner())
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert not owner_alive({"pid": child.pid, "start": None})
    assert not owner_alive(None) and not owner_alive({"pid": "1"})
    assert not owner_alive({**current_owner(), "start": -5})  # pid reused by another process


def test_killed_child_not_yet_reaped_counts_as_gone() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        owner = {"pid": child.pid, "start": None}
        assert owner_alive(owner)
        child.kill()
        import time

        time.sleep(0.2)  # a zombie until waited for
        assert not owner_alive(owner)
    finally:
        child.wait()


def alive_if(owner: object) -> bool:
    return owner == "live"


def test_steps_of_a_live_turn_are_passed_over() -> None:
    def alive(c: Checkpoint) -> bool:
        return alive_if(c.details.get("owner"))

    dead = [mark("step", "a", 1, "dead"), mark("step", "a", 2, "dead")]
    live = [mark("step", "b", 3, "live")]
    assert core.interrupted_turn([*dead, *live], alive) == dead[1]
    assert core.interrupted_turn(live, alive) is None
    closed = [*dead, mark("tombstone", "a", 3), *live]
    assert core.interrupted_turn(closed, alive) is None
    # A later completed turn closes the question for an earlier dead one.
    later = [*dead, mark("step", "c", 3, "live"), mark("tombstone", "c", 4)]
    assert core.interrupted_turn(later, alive) is None


def test_undone_calls_come_from_running_or_done_compensations() -> None:
    calls = [ToolCall(f"c{i}", "create_user", f'{{"name": "u{i}"}}') for i in range(4)]
    history = [user("make them"), assistant("", calls)]
    journal = [
        CompensationEntry(calls[0], "done", "p", ""),
        CompensationEntry(calls[1], "running", "p", ""),
        CompensationEntry(calls[2], "failed", "p", ""),
        CompensationEntry(calls[3], "refused", "p", ""),
    ]
    assert core.undone_calls(history, journal) == calls[:2]
    note = core.undone_note(calls[:2])
    assert note.meta["kind"] == "note" and "create_user(u0); create_user(u1)" in note.text
