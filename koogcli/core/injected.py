"""What coding agents put into a conversation that the person did not write: Claude Code's
`<system-reminder>` blocks and slash-command wrappers, Codex's `<environment_context>`,
`<user_instructions>` and AGENTS.md messages. `history list` previews the person's own
first prompt, not these (SPEC §2: the preview is the first user message a person wrote).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from koogcli.core.messages import Message

_TAGS = (
    "system-reminder",
    "environment_context",
    "user_instructions",
    "INSTRUCTIONS",
    "command-message",
    "command-name",
    "command-args",
    "command-contents",
    "local-command-stdout",
    "local-command-stderr",
    "local-command-caveat",
    "user-prompt-submit-hook",
    "ide_opened_file",
    "ide_selection",
)
_BLOCK = re.compile(
    r"<(" + "|".join(re.escape(t) for t in _TAGS) + r")(?:\s[^>]*)?>.*?</\1>", re.DOTALL
)
# Codex sends a repository's AGENTS.md as a user message of its own.
_AGENTS_FILE = re.compile(r"^\s*#\s*AGENTS\.md instructions for ", re.IGNORECASE)


def person_text(text: str) -> str:
    """A user message's words without the blocks an agent added to it."""
    if _AGENTS_FILE.match(text):
        return ""
    return _BLOCK.sub(" ", text).strip()


def first_prompt(messages: Iterable[Message]) -> str:
    """The first thing a person asked: the first user message with words of their own
    (a message of injected context only is passed over); the first user message's text
    when none has any."""
    first: str | None = None
    for m in messages:
        if m.role != "user":
            continue
        if first is None:
            first = m.text
        own = person_text(m.text)
        if own:
            return own
    return first or ""
