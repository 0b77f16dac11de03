"""What an endpoint's refusal means, from its status and words: a request longer than the
model's context (and the size it named), or a `response_format` it does not take."""

from __future__ import annotations

import re
from typing import Any

from koogcli.core.errors import ContextOverflowError, ModelError, ResponseFormatError

_OVERFLOW = re.compile(
    r"context.length|context.window|maximum context|too many tokens|prompt is too long|"
    r"reduce the length|exceeds? the (?:model'?s? )?(?:context|max)",
    re.IGNORECASE,
)


def refusal(exc: Any, model: str, url: str) -> ModelError | None:
    """A 4xx that means "too long for this model" or "no such response_format"."""
    body = getattr(exc, "body", None)
    err = body.get("error", body) if isinstance(body, dict) else None
    code = str(err.get("code") or "") if isinstance(err, dict) else ""
    detail = error_detail(exc)
    said = f"{exc.message} {detail}"
    if code in ("context_length_exceeded", "context_window_exceeded") or _OVERFLOW.search(said):
        error = ContextOverflowError(
            f"{url} refused the request as longer than {model}'s context"
            f"{detail or f' (HTTP {exc.status_code})'}"
        )
        error.limit = named_limit(said, err)
        return error
    if FORMAT_WORDS.search(said):
        return ResponseFormatError(f"{url} does not take this response_format{detail}")
    return None


FORMAT_WORDS = re.compile(r"response_format|json_schema|json_object")
_LIMIT = re.compile(
    r"(?:maximum context length|context length|context window|context size|context limit|"
    r"n_ctx)\D{0,24}?(\d[\d,]{2,9})",
    re.IGNORECASE,
)


def named_limit(said: str, err: object) -> int | None:
    """The context size an overflow refusal names: "maximum context length is 2048
    tokens" (OpenAI, vLLM, llama-cpp-python), an `n_ctx` field (llama.cpp's server)."""
    if isinstance(err, dict):
        for key in ("n_ctx", "context_length", "max_context_length"):
            value = err.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
    found = _LIMIT.search(said)
    if found is None:
        return None
    value = int(found.group(1).replace(",", ""))
    return value if 64 <= value <= 100_000_000 else None


def error_detail(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        message = err.get("message") if isinstance(err, dict) else None
        if message:
            return f": {str(message)[:200]}"
    return ""
