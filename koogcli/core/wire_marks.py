"""Marks by which `koog serve` knows a conversation a client resends (SPEC §6).

A client resends its whole conversation every turn; once koog has compressed the stored
history, the stored messages no longer say what the client holds. So every reply stored by
a server turn carries a mark: how many messages of the client's conversation it ends
(system messages aside) and a hash chained over them, as they were stored (after the
redactors). The hash is over what a message means, as `same` compares it (SPEC §6):
tool-call arguments as parsed JSON, text without surrounding whitespace, non-text parts
without the annotations clients move (`cache_control`), and no ids (clients echo koog's
or invent their own). Marks of version 1 hashed the bytes with the ids; they are still
read, and matched the old way. Compression moves the newest mark it replaces onto its summary, so a
conversation is recognised, and never forked, because koog compressed it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass

from koogcli.core import content_parts
from koogcli.core.messages import Message

KEY = "wire"


VERSION = 2


@dataclass(frozen=True, slots=True)
class Mark:
    count: int  # messages of the client's conversation, through the marked one
    digest: str  # the chain over them
    version: int = VERSION

    def to_dict(self) -> dict[str, object]:
        return {"n": self.count, "h": self.digest, "v": self.version}


def read(m: Message) -> Mark | None:
    raw = m.meta.get(KEY)
    if isinstance(raw, dict):
        count, digest, version = raw.get("n"), raw.get("h"), raw.get("v", 1)
        if isinstance(count, int) and count > 0 and isinstance(digest, str):
            return Mark(count, digest, version if version in (1, VERSION) else 1)
    return None


def same(stored: Message, sent: Message) -> bool:
    """Whether a stored message is the one a client resent, by meaning (SPEC §6)."""
    if stored.role != sent.role:
        return False
    if (  # the same text and nothing else: the same meaning, without building it
        stored.content == sent.content
        and not stored.tool_calls
        and not sent.tool_calls
        and content_parts.KEY not in stored.meta
        and content_parts.KEY not in sent.meta
    ):
        return True
    return _meaning(stored, defaults=False) == _meaning(sent, defaults=False)


def _meaning(m: Message, defaults: bool = True) -> list[object]:
    """What a message says, without what clients change in transit (`defaults=False`:
    also without tool-call arguments left at an empty default)."""
    out: list[object] = [m.text.strip()]
    if m.tool_calls:
        out.append([[c.name, canonical_arguments(c.arguments, defaults)] for c in m.tool_calls])
    if content_parts.KEY in m.meta:
        out.append(content_parts.media_meaning(m))
    return out


# Argument values an agent fills in for a call it resends (Claude Code adds
# `"replace_all": false` to its own Edit calls): the same call as without them.
_EMPTY: tuple[object, ...] = (False, None, "", [], {})


def canonical_arguments(arguments: str, defaults: bool = True) -> str:
    """Tool-call arguments as parsed JSON written one way (`{"c": "O"}` is `{"c":"O"}`);
    `defaults=False` leaves out top-level arguments whose value is empty (false, null,
    "", [] or {})."""
    text = arguments.strip()
    if not text:
        return "{}"
    try:
        parsed = json.loads(text)
    except (ValueError, RecursionError):
        return text
    if not defaults and isinstance(parsed, dict):
        parsed = {
            k: v
            for k, v in parsed.items()
            if not any(v is e or v == e for e in _EMPTY if type(v) is type(e))
        }
    try:
        return json.dumps(parsed, sort_keys=True, separators=(",", ":"))
    except (ValueError, RecursionError):
        return text


def chain(messages: Sequence[Message], start: str = "", version: int = VERSION) -> str:
    """The chain over `messages`, continued from `start` (the chain of those before)."""
    digest = start
    for m in messages:
        if version == 1:
            calls = [[c.id, c.name, c.arguments] for c in m.tool_calls]
            said: list[object] = [digest, m.role, m.text, m.tool_call_id, calls]
        else:
            said = [digest, m.role, *_meaning(m)]
        canonical = json.dumps(said, ensure_ascii=False, separators=(",", ":"))
        digest = hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()
    return digest


def carried(original: Sequence[Message], result: Sequence[Message]) -> Mark | None:
    """The newest mark among the messages a compression replaced (None if it kept it, or
    if a message the client never sent or saw, a `koog chat` turn's, was replaced after
    it: the summary then holds more than the client's conversation, which must fork)."""
    kept = {m.id for m in result}
    for index in range(len(original) - 1, -1, -1):
        m = original[index]
        mark = read(m)
        if mark is not None:
            if m.id in kept:
                return None
            later = original[index + 1 :]
            if any(x.id not in kept and conversational(x) for x in later):
                return None
            return mark
    return None


def conversational(m: Message) -> bool:
    """What the client sees of a stored history: not system prompts, not koog's notes or
    pinned memory."""
    return m.role != "system" and m.meta.get("kind") not in ("note", "memory")
