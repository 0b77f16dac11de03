"""JSON from outside koog (an upstream's replies and events, a replayed handle, an imported
file), parsed within a depth bound.

`json.loads` recurses once per level: JSON nested a few thousand levels deep (9 KB of
brackets) raises RecursionError, which no `except ValueError` catches, and a value that did
parse can still overflow whatever walks it later (the SDK's models, `json.dumps` when it is
stored). `loads` refuses anything nested deeper than `limit` with TooDeepError, a
ValueError, so a caller's handling of unreadable JSON covers it; the interpreter's
recursion limit is never raised. Text with fewer brackets than the limit cannot be deeper
and is parsed as it is; only longer text is walked after parsing (iteratively).
"""

from __future__ import annotations

import json
from typing import Any

# Deeper than anything an API sends (a tool's input schema, a content part, a reasoning
# item are a few levels) and well inside the interpreter's stack.
MAX_DEPTH = 128


class TooDeepError(ValueError):
    """JSON nested deeper than koog reads."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"JSON nested deeper than {limit} levels")
        self.limit = limit


def loads(text: str | bytes | bytearray, limit: int = MAX_DEPTH) -> Any:
    """`text` parsed, or ValueError (TooDeepError past `limit` levels)."""
    opening = (
        text.count("[") + text.count("{")
        if isinstance(text, str)
        else text.count(b"[") + text.count(b"{")
    )
    if opening <= limit:
        return json.loads(text)
    try:
        value = json.loads(text)
    except RecursionError:
        raise TooDeepError(limit) from None
    if not within(value, limit):
        raise TooDeepError(limit)
    return value


def within(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether `value` (parsed JSON) nests at most `limit` levels, walked without recursion."""
    stack: list[tuple[Any, int]] = [(value, 1)] if isinstance(value, (dict, list)) else []
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return False
        children = item.values() if isinstance(item, dict) else item
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return True
