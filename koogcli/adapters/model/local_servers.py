"""Looking for an OpenAI-compatible server on this machine when none is configured.

Ollama (11434), LM Studio (1234) and llama.cpp (8080) answer `GET /v1/models` on loopback;
the first that answers within the shared budget (300 ms in all) is used with its first
model. Only loopback addresses are ever asked (`KOOG_LOCAL_SERVERS` may name others).
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Sequence

DEFAULT_URLS = (
    "http://127.0.0.1:11434/v1",
    "http://127.0.0.1:1234/v1",
    "http://127.0.0.1:8080/v1",
)
BUDGET_SECONDS = 0.3


def find(
    urls: Sequence[str] = DEFAULT_URLS, budget: float = BUDGET_SECONDS
) -> tuple[str, str] | None:
    """(base URL, first model) of the first server that answers, or None."""
    deadline = time.monotonic() + budget
    for url in urls:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        try:
            with urllib.request.urlopen(f"{url.rstrip('/')}/models", timeout=left) as answer:
                body = json.loads(answer.read(1_000_000))
        except (OSError, ValueError, urllib.error.URLError):
            continue
        models = body.get("data") if isinstance(body, dict) else None
        if isinstance(models, list) and models and isinstance(models[0], dict):
            first = models[0].get("id")
            if isinstance(first, str) and first:
                return url.rstrip("/"), first
    return None


def models_status(url: str, timeout: float = BUDGET_SECONDS) -> int | None:
    """The HTTP status of `GET URL/models` (None: no answer): a 404 there usually means
    the base URL's path is wrong."""
    try:
        with urllib.request.urlopen(f"{url.rstrip('/')}/models", timeout=timeout) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as err:
        return int(err.code)
    except (OSError, ValueError):
        return None
