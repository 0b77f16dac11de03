"""A streamed chat completion sent straight through the SDK's pooled HTTP client.

`koog serve` pays for every request: the SDK's request building and its typed chunk models
cost about as much CPU as the rest of the turn. Here the request koog built is sent as JSON
bytes over the client's own connection pool (the same timeouts), and the upstream's SSE
events are read as plain JSON. What the model adapter reads of a chunk it reads by attribute,
so a chunk is a thin view of its dict. Failures are the SDK's own exceptions (status errors
built by the SDK from the response, connection errors, timeouts), so the one mapping to
ModelError in openai_model.py holds for both paths; retries follow the SDK's rules. Events
are read within the reply's bounds (model/sse.py: size, deadline, JSON depth).
"""

from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Callable, Iterator
from typing import Any

from koogcli.adapters.model import sse
from koogcli.core import bounded_json

# The SDK honours a server's Retry-After up to this long, and backs off 0.5 s doubling to 8.
_LONGEST_RETRY_AFTER = 60.0


class Fields:
    """A JSON object read by attribute, as the SDK's models are: a missing key is None."""

    __slots__ = ("_data",)

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    @property
    def data(self) -> dict[str, Any]:
        """The object as it was read."""
        return self._data

    def __getattr__(self, name: str) -> Any:
        value = self._data.get(name)
        if isinstance(value, dict):
            return Fields(value)
        if isinstance(value, list):
            return [Fields(v) if isinstance(v, dict) else v for v in value]
        return value


class ForwardedStream:
    """The upstream's streamed answer: `response` (its status and headers), iterated as
    chunks within `bounds`, closed on leaving `with`. An error event raises
    `failure(error, message)`, by default the SDK's APIError."""

    def __init__(
        self,
        response: Any,
        bounds: sse.Bounds,
        failure: Callable[[object, str], Exception] | None = None,
    ) -> None:
        self.response = response
        self.bounds = bounds
        self.failure = failure

    def __enter__(self) -> ForwardedStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.response.close()

    def __iter__(self) -> Iterator[Fields]:
        for _, data in sse.events(self.response, self.bounds):
            if not data:
                continue  # comments and other fields only (a keep-alive)
            if data.startswith("[DONE]"):
                return
            chunk = bounded_json.loads(data)
            if isinstance(chunk, dict) and chunk.get("error"):
                error = chunk["error"]
                said = error.get("message") if isinstance(error, dict) else None
                message = (
                    said if isinstance(said, str) and said else "An error occurred during streaming"
                )
                if self.failure is not None:
                    raise self.failure(error, message)
                import openai

                raise openai.APIError(message, request=self.response.request, body=error)
            yield Fields(chunk if isinstance(chunk, dict) else {})


class Forwarder:
    """One SDK client's streamed chat completions as bytes: its URL, headers and HTTP
    package worked out once, not per request."""

    def __init__(self, client: Any) -> None:
        import importlib

        self.client = client
        self.http = client._client
        # The SDK's HTTP package: `httpx2` in current releases, `httpx` before.
        package = next(
            k.__module__ for k in type(self.http).__mro__ if k.__module__.startswith("httpx")
        )
        self.httpx: Any = importlib.import_module(package.split(".")[0])
        base = client.base_url
        self.url = base.copy_with(raw_path=base.raw_path + b"chat/completions")
        # The SDK's headers: the key, its user agent, custom headers.
        given = {**client.default_headers, **client.auth_headers}
        self.headers = {k: v for k, v in given.items() if isinstance(v, str)}

    def open(self, body: dict[str, Any], max_retries: int, bounds: sse.Bounds) -> ForwardedStream:
        """POST `body`, retried as the SDK would retry it; its answer read within `bounds`."""
        import openai

        text = json.dumps(body, ensure_ascii=False, separators=(",", ":"), default=str)
        content = text.encode()
        http, httpx, client = self.http, self.httpx, self.client
        for attempt in range(max_retries + 1):
            request = http.build_request("POST", self.url, content=content, headers=self.headers)
            last = attempt == max_retries
            try:
                response = http.send(request, stream=True)
            except httpx.TimeoutException as exc:
                if last:
                    raise openai.APITimeoutError(request=request) from exc
                time.sleep(_backoff(attempt))
                continue
            except httpx.HTTPError as exc:
                if last:
                    raise openai.APIConnectionError(request=request) from exc
                time.sleep(_backoff(attempt))
                continue
            if response.status_code < 400:
                return ForwardedStream(response, bounds)
            if not last and client._should_retry(response):
                response.close()
                time.sleep(_retry_delay(client, response, attempt))
                continue
            response.read()
            raise client._make_status_error_from_response(response)
        raise AssertionError("unreachable")  # pragma: no cover


def _retry_delay(client: Any, response: Any, attempt: int) -> float:
    asked = client._parse_retry_after_header(response.headers)
    if asked is not None and math.isfinite(asked) and 0 < asked <= _LONGEST_RETRY_AFTER:
        return float(asked)
    return _backoff(attempt)


def _backoff(attempt: int) -> float:
    return min(0.5 * 2.0**attempt, 8.0) * (1 - 0.25 * random.random())
