"""Variants of a good document with one field dropped or of another type, for tests that a
check by hand accepts only what the pydantic schema accepts."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

SWAPS: list[object] = [None, "", 0, -1, 1.5, True, [], {}, "x", {"a": 1}, [{"id": None}], {1: 2}]
SWAPS += [[[0, 1]], [[0, 1, 2]], [[-1, 2]], [["0", 1]], [[0, True]]]


def damaged(doc: dict[str, Any], paths: Iterable[str]) -> list[dict[str, Any]]:
    """For each dotted path (`key` or `key.0.inner`): the doc with it dropped, and with it
    replaced by each of SWAPS."""
    out: list[dict[str, Any]] = []
    for path in paths:
        *parents, last = path.split(".")
        for value in [*SWAPS, "<drop>"]:
            broken = json.loads(json.dumps(doc))
            target = broken
            for step in parents:
                target = target[int(step)] if isinstance(target, list) else target[step]
            key: Any = int(last) if isinstance(target, list) else last
            if value == "<drop>":
                target.pop(key) if isinstance(target, list) else target.pop(key, None)
            else:
                target[key] = value
            out.append(broken)
    return out
