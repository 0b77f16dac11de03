from __future__ import annotations

import pytest

from koogcli.core.errors import InvalidSessionNameError
from koogcli.core.names import SessionName


@pytest.mark.parametrize("name", ["a", "work", "A-b_c.1", "x" * 64, "_hidden-ok"])
def test_valid_names(name: str) -> None:
    assert SessionName.parse(name).value == name


@pytest.mark.parametrize(
    "name",
    [
        "",
        "../x",
        "/etc/passwd",
        "a/b",
        "x" * 65,
        "a\x00b",
        "a\nb",
        ".hidden",
        "..",
        "a b",
        "caf\u00e9",
        "a\\b",
    ],
)
def test_invalid_names_are_usage_errors(name: str) -> None:
    with pytest.raises(InvalidSessionNameError) as info:
        SessionName.parse(name)
    assert info.value.exit_code == 2
    assert "\n" not in info.value.message and "\x00" not in info.value.message


def test_urls_are_shown_without_credentials() -> None:
    from koogcli.core.urls import masked

    assert masked("https://bob:s3cret@api.example.com/v1") == "https://***@api.example.com/v1"
    assert masked("http://h/v1?api_key=abc&model=x") == "http://h/v1?api_key=***&model=x"
    assert masked("http://127.0.0.1:8080/v1") == "http://127.0.0.1:8080/v1"


def test_only_this_machine_counts_as_a_local_server() -> None:
    from koogcli.core.urls import is_loopback

    local = ["http://127.0.0.1:11434/v1", "http://localhost:1234/v1", "http://[::1]:8080/v1"]
    remote = ["https://api.openai.com/v1", "http://192.168.1.5:11434/v1", "http://10.0.0.1/v1"]
    assert all(is_loopback(u) for u in local)
    assert not any(is_loopback(u) for u in remote)
