"""Shared by the client scripts, which run in the clients' own virtual environment (not the
project's): the arguments they take, what their one tool `element` does, how they report."""

from __future__ import annotations

import json
import sys
from typing import Any

ELEMENTS = {"O": "oxygen", "Fe": "iron", "Na": "sodium"}
CALLS: list[dict[str, str]] = []


def name_of(c: str) -> str:
    """The body of each client's tool `element(c)`; every call is recorded."""
    CALLS.append({"c": c})
    return ELEMENTS.get(c, "unknown")


def args() -> tuple[str, str, str]:
    """argv: BASE_URL CHAT_SESSION [TOOLS_SESSION]."""
    base_url, chat = sys.argv[1], sys.argv[2]
    return base_url, chat, sys.argv[3] if len(sys.argv) > 3 else ""


def report(replies: list[str], **more: Any) -> None:
    """One JSON document on stdout: the replies in order and the tool's calls."""
    print(json.dumps({"replies": replies, "tool_calls": CALLS, **more}))


def async_openai(base_url: str, session: str) -> Any:
    """The SDK's async client as the agent frameworks take it: the fixed session header,
    no retries of its own."""
    from openai import AsyncOpenAI

    return AsyncOpenAI(
        base_url=base_url,
        api_key="unused",
        default_headers={"X-Koog-Session": session},
        max_retries=0,
        timeout=30,
    )
