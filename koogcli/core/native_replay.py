"""What a native upstream needs back on the next request, kept beside a reply (SPEC §6, 4a).

Anthropic's `thinking` blocks (with their `signature`) and `redacted_thinking` blocks, and
the Responses API's `reasoning` items (with `encrypted_content`), must be sent back exactly
as they came. They are stored in the reply's `meta["native"]`: never its text, never
summarised, indexed or shown. `prefix` is the digest of what the request that produced
them held before the reply: a thinking block is bound to that prefix, so when a window or a
compression changed it, the block is left out rather than sent to be refused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from koogcli.core.messages import Message

KEY = "native"


def stored(wire: str, items: Sequence[Mapping[str, Any]], prefix: str) -> dict[str, object]:
    return {"wire": wire, "items": [dict(i) for i in items], "prefix": prefix}


def items_of(m: Message, wire: str, prefix: str | None) -> list[dict[str, Any]]:
    """The blocks or items kept with `m` for `wire`; with `prefix`, only if the reply was
    made under that same prefix."""
    kept = m.meta.get(KEY)
    if not isinstance(kept, Mapping) or kept.get("wire") != wire:
        return []
    if prefix is not None and kept.get("prefix") != prefix:
        return []
    items = kept.get("items")
    return [dict(i) for i in items if isinstance(i, Mapping)] if isinstance(items, list) else []
