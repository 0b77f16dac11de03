"""Request bodies as `koog serve` takes them: JSON that every later step can handle, or a
400 naming the field (SPEC §6: any malformed body is a 400, never a 500).

`json.loads` accepts what nothing after it can: `NaN`, `1e400` (infinity), lone
surrogates (`"\\ud800"`, which no UTF-8 writer can store), nesting that overflows the
interpreter's stack. `load` refuses each with the path of the value at fault, in one
iterative pass; the typed getters refuse wrong types (a string `"false"` is not a boolean).
"""

from __future__ import annotations

import json
import math
from typing import Any, NoReturn

MAX_DEPTH = 64


class BadRequest(Exception):
    """A body the endpoint cannot take (HTTP 400), with the field at fault."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param


def _no_constant(name: str) -> NoReturn:
    raise BadRequest(f"the body holds {name}, which JSON does not allow")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise BadRequest(f"the body holds the number {text[:40]}, too large for a float")
    return value


# Messages (or Responses input items) one request may hold: an 8 MiB body of tiny messages
# held 245,000 of them, 31 s of CPU and 212 MB stored for one request. Long agent sessions
# stay well below (a 200k-token context of 10-token messages is 20,000).
MAX_MESSAGES = 20_000


def conversation(given: list[Any], name: str) -> list[Any]:
    """A request's messages, bounded in number (400 past MAX_MESSAGES, naming the field)."""
    if len(given) > MAX_MESSAGES:
        raise BadRequest(
            f"'{name}' holds {len(given):,} items; koog serve takes at most {MAX_MESSAGES:,} "
            "a request (compact the conversation, or start a new one)",
            name,
        )
    return given


def load(raw: bytes) -> Any:
    """The body parsed and checked, or BadRequest. orjson reads it (a resent conversation
    of 5,000 messages in half the time) and refuses by itself what `json` lets through
    (NaN, infinities, lone surrogates, deep nesting); a body it refuses is read again by
    `json`, whose refusals name the value at fault."""
    import orjson

    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return _strict(raw)
    _check(body, False)  # no surrogate gets past orjson; the depth is ours to bound
    return body


def _strict(raw: bytes) -> Any:
    try:
        body = json.loads(raw, parse_constant=_no_constant, parse_float=_finite)
    except BadRequest:
        raise
    except RecursionError:
        raise BadRequest(f"the body is nested deeper than {MAX_DEPTH} levels") from None
    except (ValueError, TypeError) as exc:
        raise BadRequest(f"the body is not JSON: {exc}") from None
    _check(body, _may_hold_surrogates(raw))
    return body


def _may_hold_surrogates(raw: bytes) -> bool:
    """Whether any text in the body could be a lone surrogate: only a `\\udXXX` escape, or
    bytes that are not strict UTF-8 (json.loads lets encoded surrogates through), make
    one. Most bodies have neither, and their strings need no look (a resent conversation
    holds thousands)."""
    if b"\\u" in raw and (b"\\ud" in raw or b"\\uD" in raw):
        return True
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


def _check(body: Any, texts: bool) -> None:
    """Depth, and (with `texts`) lone surrogates, without recursion: a stack of (value,
    depth). The path of a value at fault is worked out only when one is found."""
    stack: list[tuple[Any, int]] = [(body, 0)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, str):
            if not _is_text(value):
                raise BadRequest(_SURROGATE, _path_to(body, value) or None)
            continue
        if not isinstance(value, (dict, list)):
            continue
        if depth >= MAX_DEPTH:
            raise BadRequest(
                f"the body is nested deeper than {MAX_DEPTH} levels", _path_to(body, value) or None
            )
        items = value.values() if isinstance(value, dict) else value
        if texts and isinstance(value, dict) and not all(map(_is_text, value)):
            raise BadRequest(_SURROGATE, _path_to(body, value) or None)
        stack.extend(
            (item, depth + 1)
            for item in items
            if isinstance(item, (dict, list)) or (texts and isinstance(item, str))
        )


_SURROGATE = "the body holds a lone UTF-16 surrogate (\\ud800-\\udfff), which is not text"


def _is_text(value: str) -> bool:
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _path_to(body: Any, target: Any) -> str:
    """Where `target` (that very object) sits in the body, as `messages[0].content`."""
    stack: list[tuple[Any, str]] = [(body, "")]
    while stack:
        value, path = stack.pop()
        if value is target:
            return path
        if isinstance(value, dict):
            stack.extend((v, f"{path}.{k}" if path else k) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((v, f"{path}[{i}]") for i, v in enumerate(value))
    return ""


def obj(raw: bytes) -> dict[str, Any]:
    """A body that must be a JSON object (an empty body is `{}`)."""
    if not raw.strip():
        return {}
    body = load(raw)
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    return body


def boolean(body: dict[str, Any], key: str, default: bool) -> bool:
    value = body.get(key, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise BadRequest(f"'{key}' must be true or false, not {json.dumps(value)[:40]}", key)
    return value


def string(body: dict[str, Any], key: str, required: bool = False) -> str | None:
    value = body.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value):
        raise BadRequest(f"'{key}' must be a {'non-empty ' if required else ''}string", key)
    return value


def number(body: dict[str, Any], key: str) -> float | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BadRequest(f"'{key}' must be a number", key)
    try:
        return float(value)
    except OverflowError:
        raise BadRequest(f"'{key}' is too large", key) from None


def array(body: dict[str, Any], key: str) -> list[Any]:
    """`body[key]` as a list (absent or null: empty); anything else is a 400 naming it."""
    value = body.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise BadRequest(f"'{key}' must be an array", key)
    return value


def whole(body: dict[str, Any], key: str, default: int, low: int, high: int) -> int:
    value = body.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise BadRequest(f"'{key}' must be a whole number from {low} to {high}", key)
    return value


_TEXT_PARTS = ("text", "input_text")


def last_blocks(items: list[Any]) -> list[str]:
    """The text blocks of the message a conversation ends with, when it is a user message
    (chat completions, Messages and Responses shapes alike): what an agent's compaction
    request is told by (core/agent_compaction.py)."""
    last = items[-1] if items else None
    if not isinstance(last, dict) or last.get("role") != "user":
        return []
    if last.get("type", "message") != "message":
        return []
    content = last.get("content")
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        return []
    return [
        str(p.get("text") or "")
        for p in content
        if isinstance(p, dict) and p.get("type") in _TEXT_PARTS
    ]
