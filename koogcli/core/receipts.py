"""A tool call's receipt: its result as the tool's process wrote it, durably, before
returning it (SPEC §5.18). A koog killed between the two finds it on resume and records
it instead of running the call again. One JSON document `{"text", "error"}`."""

from __future__ import annotations

import json

from koogcli.core.tool_ports import ToolOutcome


def encode(text: str, error: bool) -> bytes:
    data = json.dumps({"text": text, "error": error}, ensure_ascii=False)
    return data.encode("utf-8", "surrogatepass")


def decode(data: bytes) -> ToolOutcome | None:
    """The outcome, or None for anything that is not a whole receipt."""
    try:
        sent = json.loads(data.decode("utf-8", "surrogatepass"))
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(sent, dict) or not isinstance(sent.get("text"), str):
        return None
    return ToolOutcome(sent["text"], bool(sent.get("error")))
