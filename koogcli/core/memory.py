"""Long-term memory (KOOG_SEMANTICS §4): records, scoring, retrieval text, ingestion.

Scoring follows Koog's InMemoryRecordStorage:
- keyword: the whole lower-cased query is a substring of the lower-cased content; every
  match scores 1.0; results keep insertion order; an empty query matches everything.
- similarity: Jaccard over ASCII word sets (`\\W+` splits, so "café" gives "caf");
  results with score > 0 and >= threshold, best first, ties in insertion order.
The `naive_*` functions are that reference, record by record; stores must agree with them.

Retrieved text goes into one request only (never into stored history): appended to the
first system message (nothing when there is none) or to the last user message.
"""

from __future__ import annotations

import math
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Literal

from koogcli.core.errors import ModelError
from koogcli.core.messages import Message, utc_now

MEMORY_MARKER = "Here are the relevant facts from memory"
CONTEXT_PREFIX = "Relevant information:\n"
PLACEHOLDER = "{relevant_context}"
SYSTEM_TEMPLATE = (
    "Use the information below when you answer the user.\n\n"
    f"{PLACEHOLDER}\n\n"
    "Base your answer on it where it applies; if it does not cover the question, say so."
)
USER_TEMPLATE = (
    "Some context that may help with the question above:\n\n"
    f"{PLACEHOLDER}\n\n"
    "Use it to answer the question above."
)
_WORDS = re.compile(r"\W+", re.ASCII)


@dataclass(frozen=True, slots=True)
class MemoryRecord:
    content: str
    namespace: str = "default"
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    metadata: dict[str, object] = field(default_factory=dict)
    created_at: str = field(default_factory=utc_now)
    source: str | None = None  # e.g. "session/message-id": ingesting it twice adds nothing

    def with_content(self, content: str) -> MemoryRecord:
        return self if content == self.content else replace(self, content=content)


Namespaces = str | Sequence[str] | None  # one namespace, several, or all
Mode = Literal["keyword", "jaccard", "fulltext", "embedding", "hybrid"]


@dataclass(frozen=True)
class MemoryQuery:
    """One search of long-term memory. `text` for the word modes, `vector` (of `model`'s
    embeddings) for embedding, both for hybrid; hits come best first, scores in 0-1, at
    least `threshold`, carrying every `where` metadata value. `floor`: the cosine a record
    sharing no word with the query needs to count (§5.16)."""

    mode: Mode
    text: str = ""
    namespaces: Namespaces = None
    limit: int = 10
    threshold: float = 0.0
    where: Mapping[str, str] | None = None
    vector: Sequence[float] = ()
    model: str = ""
    floor: float = -1.0


@dataclass(frozen=True, slots=True)
class SearchHit:
    record: MemoryRecord
    score: float
    metric: Literal["keyword", "jaccard", "cosine", "bm25", "hybrid"]


def tokenize(text: str) -> set[str]:
    return {w for w in _WORDS.split(text.lower()) if w}


def jaccard(query: set[str], document: set[str]) -> float:
    union = len(query | document)
    return len(query & document) / union if union else 0.0


def naive_keyword(
    records: Sequence[MemoryRecord], query: str, limit: int, threshold: float = 0.0
) -> list[SearchHit]:
    needle = query.lower()
    hits = [SearchHit(r, 1.0, "keyword") for r in records if needle in r.content.lower()]
    return [h for h in hits if h.score >= threshold][:limit]


def naive_similarity(
    records: Sequence[MemoryRecord], query: str, limit: int, threshold: float = 0.0
) -> list[SearchHit]:
    words = tokenize(query)
    scored = [SearchHit(r, jaccard(words, tokenize(r.content)), "jaccard") for r in records]
    kept = [h for h in scored if h.score > 0 and h.score >= threshold]
    kept.sort(key=lambda h: -h.score)  # stable: ties keep insertion order
    return kept[:limit]


def format_context(hits: Sequence[SearchHit]) -> str:
    return CONTEXT_PREFIX + "\n\n".join(f"[{i}] {h.record.content}" for i, h in enumerate(hits, 1))


def augment(
    messages: Sequence[Message], hits: Sequence[SearchHit], where: Literal["system", "user"]
) -> list[Message]:
    """The request's messages with the hits added; unchanged when nothing applies."""
    out = list(messages)
    if not hits:
        return out
    template = SYSTEM_TEMPLATE if where == "system" else USER_TEMPLATE
    text = template.replace(PLACEHOLDER, format_context(hits)).strip()
    if not text:
        return out
    indices = [i for i, m in enumerate(out) if m.role == where]
    if not indices:
        return out
    index = indices[0] if where == "system" else indices[-1]
    target = out[index]
    out[index] = replace(target, content=f"{target.text}\n\n{text}" if target.text else text)
    return out


def query_from(messages: Sequence[Message], spec: str) -> str | None:
    """`last_user_message`, or `last_user_messages:N` (the last N joined)."""
    count = 1
    if spec.startswith("last_user_messages:"):
        count = int(spec.split(":", 1)[1])
    users = [m.text for m in messages if m.role == "user" and m.text]
    if not users:
        return None
    return "\n".join(users[-count:])


def content_key(text: str) -> str:
    """What a forgotten record's text is remembered by (a digest, never the text): a copy
    of it in a fork, an export or an import is not ingested again (§5.19)."""
    import hashlib

    return "text:" + hashlib.sha256(text.strip().encode("utf-8", "surrogatepass")).hexdigest()


def records_from_messages(
    messages: Sequence[Message], roles: Sequence[str], namespace: str, session: str
) -> list[MemoryRecord]:
    """Koog's message-passing extractor: one record per message of the given roles; a
    message `memory recall` pinned holds records already in memory (or forgotten since),
    and is never one."""
    records = []
    for m in messages:
        if m.role not in roles or not m.text.strip() or m.meta.get("kind") == "memory":
            continue
        records.append(
            MemoryRecord(
                content=m.text,
                namespace=namespace,
                metadata={
                    "messageRole": m.role.capitalize(),
                    "timestampMs": _epoch_ms(m.created_at),
                    "session": session,
                    "messageId": m.id,
                },
                source=f"{session}/{m.id}",
            )
        )
    return records


def _epoch_ms(stamp: str) -> int:
    try:
        return int(datetime.fromisoformat(stamp).timestamp() * 1000)
    except ValueError:
        return 0


def recall_message(query: str, hits: Sequence[SearchHit]) -> Message:
    """One pinned message holding the hits, starting with Koog's memory marker."""
    lines = [f"{MEMORY_MARKER} about [{query}]:"]
    lines += [f"- {h.record.content}" for h in hits]
    return Message(role="user", content="\n".join(lines) + "\n", meta={"kind": "memory"})


FLOAT32_MAX = 3.4028234663852886e38


def check_vectors(
    vectors: Sequence[Sequence[float]], model: str, count: int, dimension: int | None
) -> None:
    """Refuse vectors that would be stored wrong or make search silently find nothing: a
    non-finite value (or one too large for float32), or a dimension other than the one
    the records of `model` already have."""
    if len(vectors) != count:
        raise ModelError(
            f"embeddings model {model!r} returned {len(vectors)} vectors for {count} texts"
        )
    for vector in vectors:
        if not vector:
            raise ModelError(f"embeddings model {model!r} returned an empty vector")
        bad = next((v for v in vector if not math.isfinite(v) or abs(v) > FLOAT32_MAX), None)
        if bad is not None:
            raise ModelError(
                f"embeddings model {model!r} returned a vector with the value {bad!r}; "
                "nothing was written",
                hint="check the embeddings server; vectors must hold finite numbers",
            )
        expected = dimension if dimension is not None else len(vectors[0])
        if len(vector) != expected:
            raise ModelError(
                f"embeddings model {model!r} returned a {len(vector)}-dimensional vector; "
                f"the stored records have {expected} dimensions; nothing was written",
                hint="keep [long_term_memory.embeddings] model the same, or use a new model name",
            )
