"""Marks by which `koog serve` knows a conversation a client resends (SPEC §6).

A client resends its whole conversation every turn; once koog has compressed the stored
history, the stored messages no longer say what the client holds. So every reply stored by
a server turn carries a mark: how many messages of the client's conversation it ends
(system messages aside) and a hash chained over them, as they were stored (after the
redactors). Compression moves the newest mark it replaces onto its summary, so a
conversation is recognised, and never forked, because koog compressed it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass

from koogcli.core.messages import Message

KEY = "wire"


@dataclass(frozen=True, slots=True)
class Mark:
    count: int  # messages of the client's conversation, through the marked one
    digest: str  # the chain over them

    def to_dict(self) -> dict[str, object]:
        return {"n": self.count, "h": self.digest}


def read(m: Message) -> Mark | None:
    raw = m.meta.get(KEY)
    if isinstance(raw, dict):
        count, digest = raw.get("n"), raw.get("h")
        if isinstance(count, int) and count > 0 and isinstance(digest, str):
            return Mark(count, digest)
    return None


def chain(messages: Sequence[Message], start: str = "") -> str:
    """The chain over `messages`, continued from `start` (the chain of those before)."""
    digest = start
    for m in messages:
        calls = [[c.id, c.name, c.arguments] for c in m.tool_calls]
        canonical = json.dumps(
            [digest, m.role, m.text, m.tool_call_id, calls],
            ensure_ascii=False,
            separators=(",", ":"),
        )
        digest = hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()
    return digest


def carried(original: Sequence[Message], result: Sequence[Message]) -> Mark | None:
    """The newest mark among the messages a compression replaced (None if it kept it)."""
    kept = {m.id for m in result}
    for m in reversed(original):
        mark = read(m)
        if mark is not None:
            return None if m.id in kept else mark
    return None
