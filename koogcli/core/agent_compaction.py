"""What the coding agents send when they compact their own conversation (SPEC §6).

The compaction request asks the model for a summary: Claude Code adds a text block opening
"CRITICAL: Respond with TEXT ONLY" to the conversation's last user message, Codex (with a
custom provider) sends a tool-less request whose last user message begins "You are
performing a CONTEXT CHECKPOINT COMPACTION", opencode a tool-less summary request. Each is
told by that shape (the request ends with the instruction, a block of its own), never by
the words alone. None of them is a turn of
the conversation. The request after it holds the conversation in its new form (a
summary, the newest prompts); placement stores that as a compaction of the session.
"""

from __future__ import annotations

from collections.abc import Sequence

# The words an agent's compaction instruction opens with.
REQUEST_MARKERS = (
    "CRITICAL: Respond with TEXT ONLY",  # Claude Code
    "You are performing a CONTEXT CHECKPOINT COMPACTION",  # Codex
)


def opens_compaction(blocks: Sequence[str]) -> bool:
    """The text blocks of the message a request ends with (a user message) are an agent's
    compaction request: its instruction is a block of its own, the last, opening with the
    agent's words. A prompt that quotes them anywhere else is a prompt."""
    return bool(blocks) and blocks[-1].lstrip().startswith(REQUEST_MARKERS)
