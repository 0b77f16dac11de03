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


def load(raw: bytes) -> Any:
    """The body parsed and checked, or BadRequest."""
    try:
        body = json.loads(raw, parse_constant=_no_constant, parse_float=_finite)
    except BadRequest:
        raise
    except RecursionError:
        raise BadRequest(f"the body is nested deeper than {MAX_DEPTH} levels") from None
    except (ValueError, TypeError) as exc:
        raise BadRequest(f"the body is not JSON: {exc}") from None
    _check(body)
    return body


def _check(body: Any) -> None:
    """Depth and text, without recursion: a stack of (value, path, depth)."""
    stack: list[tuple[Any, str, int]] = [(body, "", 0)]
    while stack:
        value, path, depth = stack.pop()
        if isinstance(value, str):
            _text(value, path)
            continue
        if not isinstance(value, (dict, list)):
            continue
        if depth >= MAX_DEPTH:
            raise BadRequest(f"the body is nested deeper than {MAX_DEPTH} levels", path or None)
        if isinstance(value, dict):
            for key, item in value.items():
                _text(key, path)
                stack.append((item, f"{path}.{key}" if path else key, depth + 1))
        else:
            stack.extend((item, f"{path}[{i}]", depth + 1) for i, item in enumerate(value))


def _text(value: str, path: str) -> None:
    if value.isascii():
        return
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise BadRequest(
            "the body holds a lone UTF-16 surrogate (\\ud800-\\udfff), which is not text",
            path or None,
        ) from None


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
