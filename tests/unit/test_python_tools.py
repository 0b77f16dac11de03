"""Tools: schemas from signatures and docstrings; errors become text for the model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

import pytest

from koogcli.adapters.tools.python_tools import PythonToolBox, build_tool


def create_user(name: str, age: int = 30, role: Literal["admin", "user"] = "user") -> dict:
    """Create a user account.

    Args:
        name: the user's full name
        age (int): age in years
    """
    return {"created": name, "age": age, "role": role}


def explode(reason: str) -> str:
    """Always fails."""
    raise RuntimeError(reason)


def remove_user(name: str, age: int = 30, role: str = "user") -> None:
    return None


def toolbox() -> PythonToolBox:
    return PythonToolBox(
        [build_tool("m:create_user", create_user, remove_user), build_tool("m:explode", explode)]
    )


def test_schema_from_signature_hints_and_docstring() -> None:
    spec = toolbox().specs()[0]
    function = spec["function"]
    assert function["name"] == "create_user"  # type: ignore[index]
    assert function["description"] == "Create a user account."  # type: ignore[index]
    params = function["parameters"]  # type: ignore[index]
    assert params["required"] == ["name"]
    assert params["properties"]["name"] == {"type": "string", "description": "the user's full name"}
    assert params["properties"]["age"]["type"] == "integer"
    assert params["properties"]["age"]["description"] == "age in years"
    assert params["properties"]["role"]["enum"] == ["admin", "user"]


def test_call_validates_and_renders_results() -> None:
    box = toolbox()
    outcome = box.call("create_user", '{"name": "Alex", "age": "41"}')
    assert not outcome.error and json.loads(outcome.text) == {
        "created": "Alex",
        "age": 41,
        "role": "user",
    }
    assert box.rollback("create_user", '{"name": "Alex"}').text == "ok"


def test_errors_come_back_as_text() -> None:
    box = toolbox()
    assert box.call("explode", '{"reason": "disk full"}').text == "Error: RuntimeError: disk full"
    bad_json = box.call("create_user", '{"name": ')
    assert bad_json.error and bad_json.text.startswith("Error: invalid arguments for create_user")
    missing = box.call("create_user", "{}")
    assert missing.error and "name: Field required" in missing.text
    extra = box.call("create_user", '{"name": "A", "colour": "red"}')
    assert extra.error and "colour" in extra.text
    unknown = box.call("nope", "{}")
    assert unknown.error and "no tool named 'nope'" in unknown.text
    assert box.rollback("explode", "{}").error
    assert not box.has_rollback("explode") and box.has_rollback("create_user")


def test_tool_output_goes_to_stderr(capfd: pytest.CaptureFixture[str]) -> None:
    """Whatever a tool writes to file descriptor 1 (print, os.write, a program it starts)
    lands on stderr: stdout carries the reply only."""
    import os
    import subprocess

    def chatty(x: str) -> str:
        """Prints while working."""
        print("working on", x)
        os.write(1, b"raw bytes on fd 1\n")
        subprocess.run(["echo", "from a child"], check=True)
        return "done"

    box = PythonToolBox([build_tool("m:chatty", chatty)])
    assert box.call("chatty", '{"x": "it"}').text == "done"
    captured = capfd.readouterr()
    assert captured.out == ""
    assert "working on it" in captured.err and "raw bytes on fd 1" in captured.err
    assert "from a child" in captured.err


@pytest.mark.parametrize(
    "how, said",
    [("exit", "exit status 0"), ("kill", "signal SIGKILL"), ("exit3", "exit status 3")],
)
def test_a_tool_that_ends_its_own_process_is_its_error(how: str, said: str) -> None:
    import os
    import signal

    def leave(x: str) -> str:
        """Ends its process."""
        if how == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        os._exit(3 if how == "exit3" else 0)

    outcome = PythonToolBox([build_tool("m:leave", leave)]).call("leave", '{"x": "now"}')
    assert outcome.error and f"leave ended its own process ({said})" in outcome.text


def test_a_tool_past_its_time_is_stopped_for_real(tmp_path: Path) -> None:
    import time

    marker = tmp_path / "late"

    def slow(x: str) -> str:
        """Takes too long."""
        time.sleep(0.5)
        marker.write_text("the tool went on after its time")
        return "late"

    started = time.monotonic()
    outcome = PythonToolBox([build_tool("m:slow", slow, timeout=0.2)]).call("slow", '{"x": "1"}')
    assert outcome.error and "did not finish within 0.2s and was stopped" in outcome.text
    assert time.monotonic() - started < 0.45
    time.sleep(0.5)
    assert not marker.exists()


def test_a_long_result_is_cut_with_a_note() -> None:
    def huge(x: str) -> str:
        """Much text."""
        return "é" * 3_000_000  # 6,000,000 bytes

    outcome = PythonToolBox([build_tool("m:huge", huge)], max_result_bytes=10_000).call(
        "huge", '{"x": "1"}'
    )
    assert not outcome.error
    kept, note = outcome.text.rsplit("\n", 1)
    assert kept == "é" * 5_000
    assert note == (
        "[koog: the result was 6,000,000 bytes; the last 5,990,000 were cut "
        "(tool_settings.max_result_bytes = 10,000)]"
    )


def test_a_tool_dies_with_the_koog_that_runs_it(tmp_path: Path) -> None:
    """A killed koog leaves no tool running on to have its effect behind a resume's back."""
    import os
    import signal
    import threading
    import time

    from koogcli.adapters.tools import tool_worker

    marker = tmp_path / "effect"

    def slow(x: int) -> str:
        time.sleep(0.5)
        marker.write_text("effect after koog died")
        return "done"

    pid = os.fork()
    if pid == 0:  # stands in for koog: killed while its tool runs
        threading.Timer(0.2, lambda: os.kill(os.getpid(), signal.SIGKILL)).start()
        tool_worker.run("slow", slow, {"x": 1}, str, 10, 1000)
        os._exit(0)
    os.waitpid(pid, 0)
    time.sleep(0.6)
    assert not marker.exists()
