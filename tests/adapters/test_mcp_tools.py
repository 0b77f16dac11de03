"""McpToolBox against a real stdio server (`mcp-server-time` from PyPI, whose tools say
they are read-only): approval from annotations, a failed start tried again, calls that
never ran, and compensations' arguments."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from koogcli.adapters.tools import mcp_tools
from koogcli.adapters.tools.mcp_tools import McpToolBox
from koogcli.config.mcp_schema import McpSettings

pytestmark = pytest.mark.e2e  # starts MCP servers
TIME = str(Path(sys.executable).parent / "mcp-server-time")
NOW = "time__get_current_time"


def box(tmp_path: Path, ask_all: bool = False, **mcp: Any) -> McpToolBox:
    server = {"name": "time", "command": TIME, **mcp.pop("server", {})}
    settings = McpSettings.model_validate({"servers": [server], **mcp})
    undo = {"tests.adapters.test_mcp_tools:kept": kept}
    return McpToolBox(settings, {}, undo, ask_all=ask_all)


def kept(**arguments: Any) -> str:
    """A Python compensation: what it was given, for the test to read."""
    Path(arguments.pop("_to")).write_text(json.dumps(arguments))
    return "kept"


@pytest.mark.parametrize(
    "approval, trusted, ask_all, asks",
    [
        ("writes", True, False, False),  # read-only by a trusted server's hints: runs
        ("writes", False, False, True),  # an untrusted server's hints are not believed
        ("writes", True, True, True),  # --ask-tools / [tool_settings] ask: every call asks
        ("always", True, False, True),
        ("auto", False, False, False),
    ],
)
def test_approval_follows_the_mode_the_trust_and_ask_tools(
    tmp_path: Path, approval: str, trusted: bool, ask_all: bool, asks: bool
) -> None:
    tools = box(tmp_path, ask_all, approval=approval, server={"trusted": trusted})
    try:
        assert NOW in tools.names()
        assert tools.asks(NOW) is asks
        assert tools.asks(NOW, undo=True) is (approval == "always" or ask_all)
        assert tools.effects(NOW) == {"read_only": trusted, "destructive": False}
    finally:
        tools.close()


def test_a_server_that_failed_to_start_is_tried_again_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    flag = tmp_path / "second-time"
    script = f'if [ -e "{flag}" ]; then exec "{TIME}"; else touch "{flag}"; exit 1; fi'
    warned: list[str] = []
    settings = McpSettings.model_validate(
        {"servers": [{"name": "time", "command": "sh", "args": ["-c", script]}]}
    )
    tools = McpToolBox(settings, {}, warn=warned.append)
    try:
        assert tools.names() == []
        assert warned and "MCP server 'time' failed to start" in warned[0]
        assert tools.names() == []  # within the same turn: not tried again
        monkeypatch.setattr(mcp_tools, "RETRY_SECONDS", 0.0)
        assert NOW in tools.names()  # a later turn: started, offered
    finally:
        tools.close()


def test_calls_that_never_ran_say_so(tmp_path: Path) -> None:
    tools = box(tmp_path)
    try:
        unknown = tools.call("time__no_such_tool", "{}")
        assert unknown.error and not unknown.ran and "no tool named" in unknown.text
        broken = tools.call(NOW, "{not json")
        assert broken.error and not broken.ran
        done = tools.call(NOW, json.dumps({"timezone": "UTC"}))
        assert done.ran and not done.error and json.loads(done.text)["timezone"] == "UTC"
    finally:
        tools.close()


def test_a_compensation_gets_the_calls_own_arguments_untouched_or_its_templates(
    tmp_path: Path,
) -> None:
    to = str(tmp_path / "given.json")
    plain = box(
        tmp_path, compensations=[{"tool": NOW, "callable": "tests.adapters.test_mcp_tools:kept"}]
    )
    call = json.dumps({"_to": to, "text": "writes {{ mustache }} in", "n": 2})
    assert plain.rollback(NOW, call).text == "kept"
    assert json.loads(Path(to).read_text()) == {"text": "writes {{ mustache }} in", "n": 2}
    templated = box(
        tmp_path,
        compensations=[
            {
                "tool": NOW,
                "callable": "tests.adapters.test_mcp_tools:kept",
                "arguments": {"_to": to, "zone": "{{ result.timezone }}", "n": "{{ args.n }}"},
            }
        ],
    )
    assert templated.rollback(NOW, call, result='{"timezone": "UTC"}').text == "kept"
    assert json.loads(Path(to).read_text()) == {"zone": "UTC", "n": 2}
    missing = templated.rollback(NOW, call, result="not json")
    assert missing.error and "the call has no 'timezone' there" in missing.text
