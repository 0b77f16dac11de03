"""What an endpoint's refusal means, from its status and words: a request longer than the
model's context (and the size it named), or a `response_format` it does not take."""

from __future__ import annotations

import re
from typing import Any

from koogcli.core.errors import ContextOverflowError, ModelError, ResponseFormatError

# Each server's words for "longer than the context" (README, Local models): OpenAI and vLLM
# "maximum context length is N tokens", llama.cpp's llama-server "request (N tokens)
# exceeds the available context size (M tokens)", llama-cpp-python "Requested tokens (N)
# exceed context window of M", Ollama "the input length exceeds the context length",
# LM Studio "... the model is loaded with context length of only M tokens" (MLX: "Context
# size has been exceeded"), Anthropic "prompt is too long".
_OVERFLOW = re.compile(
    r"context.length|context.window|maximum context|too many tokens|prompt is too long|"
    r"reduce the length|exceeds? the (?:model'?s? |available )?(?:context|max)|"
    r"context size has been exceeded|exceed_context_size",
    re.IGNORECASE,
)
_OVERFLOW_CODES = (
    "context_length_exceeded",
    "context_window_exceeded",
    "exceed_context_size_error",
)


def status_error(
    exc: Any, status: int, url: str, model: str, key_env: str, retries: str
) -> ModelError:
    """An endpoint's error answer in words, whichever client read it (the openai SDK,
    or koog's own HTTP: `exc` has `message` and `body`)."""
    if status in (401, 403):
        return ModelError(
            f"{url} rejected the API key (HTTP {status})",
            hint=f"check the key in {key_env} (config llm.api_key_env)",
        )
    if status == 404:
        said = f"{exc.message} {error_detail(exc)}"
        if "model" not in said.lower():  # the server's "no such page": the path is wrong
            return ModelError(
                f"{url} answered HTTP 404{error_detail(exc)}: nothing is served at that path",
                hint="check the base URL's path (llama.cpp, Ollama and LM Studio serve their "
                "API under /v1)",
            )
        return ModelError(
            f"model {model!r} not found at {url} (HTTP 404)",
            hint="check llm.model / --model / KOOG_MODEL, and the base URL",
        )
    if status == 429:
        return ModelError(
            f"{url} is rate limiting requests (HTTP 429){retries}",
            hint="wait and retry, or raise llm.max_retries",
        )
    if status in (400, 413, 422):
        refused = refusal(exc, model, url)
        if refused is not None:
            return refused
    if status >= 500:
        # llama.cpp's validation errors are 500s: one naming response_format is a
        # refusal of it all the same, so the fallback (json_object, plain) runs.
        said = f"{exc.message} {error_detail(exc)}"
        if FORMAT_WORDS.search(said):
            return ResponseFormatError(
                f"{url} does not take this response_format (HTTP {status}{error_detail(exc)})"
            )
    # Clients retry only these statuses; others are not called retried.
    retried = retries if status in (408, 409) or status >= 500 else ""
    return ModelError(f"{url} answered HTTP {status}{error_detail(exc)}{retried}")


def refusal(exc: Any, model: str, url: str) -> ModelError | None:
    """A 4xx that means "too long for this model" or "no such response_format"."""
    body = getattr(exc, "body", None)
    err = body.get("error", body) if isinstance(body, dict) else None
    codes = {str(err.get(k) or "") for k in ("code", "type")} if isinstance(err, dict) else set()
    detail = error_detail(exc)
    said = f"{exc.message} {detail}"
    if codes & set(_OVERFLOW_CODES) or _OVERFLOW.search(said):
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
    """The server's own words: `error.message`, a top-level `message` (vLLM), or an
    `error` that is a bare string (Ollama, LM Studio)."""
    body = getattr(exc, "body", None)
    err = body.get("error", body) if isinstance(body, dict) else body
    message = err.get("message") if isinstance(err, dict) else err
    if isinstance(message, str) and message:
        return f": {message[:200]}"
    return ""
