"""What the coding agents send when they compact their own conversation (SPEC §6).

The compaction request asks the model for a summary: Claude Code adds "CRITICAL: Respond
with TEXT ONLY" to the conversation's last user message, Codex (with a custom provider)
sends a tool-less request whose last user message begins "You are performing a CONTEXT
CHECKPOINT COMPACTION", opencode a tool-less summary request. None of them is a turn of
the conversation. The request after it holds the conversation in its new form (a
summary, the newest prompts); placement stores that as a compaction of the session.
"""

from __future__ import annotations

from collections.abc import Sequence

from koogcli.core.messages import Message

# Words only an agent's compaction request holds, in its last user message.
REQUEST_MARKERS = (
    "CRITICAL: Respond with TEXT ONLY",  # Claude Code
    "CONTEXT CHECKPOINT COMPACTION",  # Codex
)


def is_compaction_request(conversation: Sequence[Message]) -> bool:
    """The agent asks for a summary of its conversation, not for a turn of it."""
    last = next((m for m in reversed(conversation) if m.role == "user"), None)
    return last is not None and any(marker in last.text for marker in REQUEST_MARKERS)
