"""Memory records placed after the question they answer, and kept there (SPEC §5 4a).

Koog's augmenters edit the request: the system augmenter appends each question's records
to the first system message, so everything after it changes every turn; the user
augmenter appends them to the last user message for that request only, so the next turn
sends that message without them. Either way a server's prompt cache (llama.cpp's slot,
OpenAI's prefix cache, Anthropic's breakpoints) is lost from that point on, every turn.

The `after` placement appends a question's records to the question itself, when it is
first sent, and remembers which records they were on the stored message
(`meta["memory_placed"]`: ids, scores and metrics, never the records' text). Every later
request expands the same records in the same place, so each request starts with the
previous one byte for byte. The text is looked up by id each time, so a record that is
deleted or forgotten leaves later requests (the cache breaks once, there) instead of
living on in a session's file.

A request that is not stored (a client of `koog serve` naming no session) has no stored
message to remember them on: the same entries are remembered by the message's `digest`
(its role, text and parts; never its id or time) in the memory store, so any later
request carrying that message (stateless, relayed, a fork) gets them in the same place.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Literal, cast

from koogcli.core import content_parts
from koogcli.core.memory import (
    PLACEHOLDER,
    USER_TEMPLATE,
    MemoryRecord,
    SearchHit,
    format_context,
)
from koogcli.core.messages import Message
from koogcli.core.tokens import PLACED_TOKENS, text_tokens

KEY = "memory_placed"
# On a message as sent (never stored): the records' text appended to it.
ADDED_KEY = "memory_added"
# The records' estimated tokens as placed (core/tokens.py counts them with the question, so
# a window, a budget or automatic compression measures what is really sent).
TOKENS_KEY = PLACED_TOKENS
Metric = Literal["keyword", "jaccard", "cosine", "bm25", "hybrid"]
_METRICS: frozenset[str] = frozenset(("keyword", "jaccard", "cosine", "bm25", "hybrid"))


def placed(m: Message) -> list[tuple[str, float, Metric]]:
    """The records placed after this message when it was first sent: (id, score, metric)."""
    raw = m.meta.get(KEY)
    if not isinstance(raw, list):
        return []
    out: list[tuple[str, float, Metric]] = []
    for entry in raw:
        if not isinstance(entry, Mapping):
            continue
        record_id, score, metric = entry.get("id"), entry.get("score"), entry.get("metric")
        if isinstance(record_id, str) and isinstance(score, int | float):
            kind = metric if isinstance(metric, str) and metric in _METRICS else "keyword"
            out.append((record_id, float(score), cast(Metric, kind)))
    return out


def digest(m: Message) -> str:
    """What the message says, as a key: the same message sent again has the same digest."""
    given = content_parts.parts(m)
    said = m.text if given is None else json.dumps(given, sort_keys=True, ensure_ascii=False)
    return hashlib.blake2b(f"{m.role}\0{said}".encode(), digest_size=16).hexdigest()


def entries(hits: Sequence[SearchHit]) -> list[dict[str, object]]:
    """What is remembered of the records placed after a message: never their text."""
    return [{"id": h.record.id, "score": round(h.score, 6), "metric": h.metric} for h in hits]


def with_entries(m: Message, found: list[object]) -> Message:
    """The message as if its placement had been recorded on it (one remembered by digest)."""
    return replace(m, meta={**m.meta, KEY: found})


def marked(m: Message, hits: Sequence[SearchHit]) -> Message:
    """The question with the records found for it recorded (an empty list records that
    nothing was found, so no later request searches for it again)."""
    text = context_text(hits)
    size = {TOKENS_KEY: text_tokens(f"\n\n{text}")} if text else {}
    return replace(m, meta={**m.meta, KEY: entries(hits), **size})


def context_text(hits: Sequence[SearchHit]) -> str:
    """What follows the question: Koog's user template around the records."""
    if not hits:
        return ""
    return USER_TEMPLATE.replace(PLACEHOLDER, format_context(hits)).strip()


def with_context(m: Message, text: str) -> Message:
    """The message as sent, `text` appended after a blank line; a message with content
    parts (images, files) gets it as one more text part, the parts before unchanged."""
    meta = {k: v for k, v in m.meta.items() if k != TOKENS_KEY}  # now counted in the text
    if not text:
        return replace(m, meta=meta) if TOKENS_KEY in m.meta else m
    joined = f"{m.text}\n\n{text}" if m.text else text
    meta[ADDED_KEY] = text  # a passed-through request adds the same to the client's message
    given = content_parts.parts(m)
    if given is not None:
        addition = {"type": content_parts.TEXT, "text": f"\n\n{text}" if m.text else text}
        meta[content_parts.KEY] = [*given, addition]
    return replace(m, content=joined, meta=meta)


def expanded(
    messages: Sequence[Message], lookup: Callable[[Sequence[str]], Mapping[str, MemoryRecord]]
) -> tuple[list[Message], dict[str, list[SearchHit]]]:
    """Every marked message with its records after it, as they were placed (records that
    no longer exist are left out); also the hits placed after each message, by its id."""
    wanted = {rid for m in messages for rid, _, _ in placed(m)}
    if not wanted:
        return list(messages), {}
    records = lookup(sorted(wanted))
    out: list[Message] = []
    hits_by_message: dict[str, list[SearchHit]] = {}
    for m in messages:
        entries = placed(m)
        if not entries:
            out.append(m)
            continue
        hits = [SearchHit(records[rid], s, k) for rid, s, k in entries if rid in records]
        hits_by_message[m.id] = hits
        out.append(with_context(m, context_text(hits)))
    return out, hits_by_message
