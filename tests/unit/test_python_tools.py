"""Tools: schemas from signatures and docstrings; errors become text for the model."""

from __future__ import annotations

import json
from typing import Literal

import pytest

from koogcli.adapters.python_tools import PythonToolBox, build_tool


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


def test_tool_output_goes_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    def chatty(x: str) -> str:
        """Prints while working."""
        print("working on", x)
        return "done"

    box = PythonToolBox([build_tool("m:chatty", chatty)])
    assert box.call("chatty", '{"x": "it"}').text == "done"
    captured = capsys.readouterr()
    assert captured.out == "" and "working on it" in captured.err
