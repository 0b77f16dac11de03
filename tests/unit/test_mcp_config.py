"""[mcp] in the config: what is refused, naming the key (config/mcp_schema.py)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from koogcli.adapters.tools.mcp_tools import offered_name
from koogcli.config.schema import Settings


def settings(mcp: dict[str, object]) -> Settings:
    return Settings.model_validate({"mcp": mcp})


@pytest.mark.parametrize(
    "server, said",
    [
        ({"name": "a__b", "command": "x"}, "separates a server's name"),
        ({"name": "has space", "command": "x"}, "pattern"),
        ({"name": "both", "command": "x", "url": "http://h/mcp"}, "either `command`"),
        ({"name": "neither"}, "either `command`"),
        ({"name": "tok", "command": "x", "bearer_token_env": "T"}, "need a `url`"),
        ({"name": "web", "url": "ftp://h"}, "pattern"),
        ({"name": "web", "url": "http://h", "headers_env": {"X-K": "not an env"}}, "headers_env"),
        ({"name": "slow", "command": "x", "tool_timeout_seconds": 0}, "greater than 0"),
    ],
)
def test_a_bad_server_entry_is_refused_saying_why(server: dict[str, object], said: str) -> None:
    with pytest.raises(ValidationError, match=said):
        settings({"servers": [server]})


def test_names_and_compensations_are_checked() -> None:
    with pytest.raises(ValidationError, match="two servers named 'm'"):
        settings({"servers": [{"name": "m", "command": "x"}, {"name": "m", "command": "y"}]})
    with pytest.raises(ValidationError, match="either `compensation`"):
        settings({"compensations": [{"tool": "m__a"}]})
    with pytest.raises(ValidationError, match="pattern"):
        settings({"compensations": [{"tool": "no_server_part", "compensation": "m__b"}]})
    with pytest.raises(ValidationError, match="approval"):
        settings({"approval": "sometimes"})
    good = settings({"servers": [{"name": "m", "url": "https://h/mcp"}]})
    assert good.mcp.approval == "writes" and good.mcp.servers[0].trusted is False


def test_offered_names_fit_every_providers_pattern() -> None:
    assert offered_name("memory", "create_entities") == "memory__create_entities"
    odd = offered_name("git", "log.show/all")
    assert odd.startswith("git__log_show_all_") and len(odd) <= 64
    assert offered_name("x", "a" * 80) != offered_name("x", "a" * 81)
    assert all(len(offered_name("s", "t" * n)) <= 64 for n in (60, 62, 100))
