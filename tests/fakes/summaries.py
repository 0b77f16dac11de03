"""Reading koog's summary requests in fakes: the history comes wrapped in one message."""

from __future__ import annotations

import html
import re
from typing import Any

OPEN, CLOSE = "<conversation_to_summarize>\n", "</conversation_to_summarize>"
_ELEMENT = re.compile(r"<(\w+)(?: tool=\"[^\"]*\")?>\n(.*?)\n</\1>", re.DOTALL)


def is_summary_request(last_text: str) -> bool:
    return last_text.startswith(OPEN)


def summarised(last_text: str) -> list[str]:
    """The texts of the messages a summary request wraps, in order ("TC" for a call)."""
    body = last_text.split(OPEN, 1)[1].split(CLOSE, 1)[0]
    return [
        "TC" if tag == "tool_call" else html.unescape(text) for tag, text in _ELEMENT.findall(body)
    ]


def short_summaries(body: dict[str, Any]) -> dict[str, Any]:
    """A test-server responder: a summary request gets a short summary, anything else
    the echo of its last user message."""
    from tests.fakes.openai_server import text_of

    messages = body.get("messages", [])
    last = next(text_of(m.get("content")) for m in reversed(messages) if m["role"] == "user")
    if is_summary_request(last):
        return {"content": "Summary: the user asked about several things at length."}
    return {"content": f"echo: {last}"}
