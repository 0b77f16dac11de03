"""Reading other tools' files: a JSON Lines file as a stream, each bad line named and
passed over (not JSON, not UTF-8, nested past the parser's depth, not an object, or torn
at the end); a SQLite database read-only."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from koogcli.core.archive import Skipped
from koogcli.core.bounded_json import MAX_DEPTH, within

try:
    import orjson

    _loads: Any = orjson.loads
    _Error: Any = orjson.JSONDecodeError
except ImportError:  # pragma: no cover - orjson is a dependency
    import json

    _loads = json.loads
    _Error = ValueError


@dataclass(frozen=True)
class Bad:
    """Why a line could not be read."""

    why: str


def read_only(path: Path, skipped: list[Skipped]) -> sqlite3.Connection | None:
    """Another tool's SQLite database, opened read-only (None, named in `skipped`, when
    it cannot be)."""
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
    except sqlite3.Error as exc:
        skipped.append(Skipped(str(path), f"cannot open: {exc}"))
        return None
    db.text_factory = _text  # one value that is not UTF-8 must not lose the rest
    return db


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def strict_text(value: object) -> str:
    """A text field as a store writes it (absent: ""); TypeError for anything else, so
    the line is named as one the tool does not write, never shown as a repr."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise TypeError("text that is no string")
    return value


def text_of(value: object) -> str | None:
    """A text column's value, or None when it holds something else (a number, a blob)."""
    return value if isinstance(value, str) else None


def objects(path: Path, skipped: list[Skipped]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) of every good line; a bad one goes to `skipped`."""
    with open(path, "rb") as stream:
        for number, raw in enumerate(stream, start=1):
            if not raw.strip():
                continue
            found = parse(raw)
            if isinstance(found, dict):
                yield number, found
                continue
            why = found.why if isinstance(found, Bad) else "not a JSON object"
            if not raw.endswith(b"\n") and isinstance(found, Bad):
                why = "torn: no end of line"
            skipped.append(Skipped(f"{path}:{number}", why))


def parse(raw: bytes) -> object:
    """The decoded value, or why it could not be."""
    try:
        value = _loads(raw)
    except _Error as exc:
        text = str(exc)
        if "utf-8" in text.lower():
            return Bad("not UTF-8")
        if "recursion" in text.lower() or "depth" in text.lower():
            return Bad("nested too deep")
        return Bad("not JSON")
    except RecursionError:
        return Bad("nested too deep")
    if raw.count(b"[") + raw.count(b"{") > MAX_DEPTH and not within(value):
        return Bad("nested too deep")
    return value
