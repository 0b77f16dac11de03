"""HTTP for every upstream (chat completions, Anthropic Messages, the Responses API): one
pooled httpx client per endpoint, JSON bodies sent as bytes, retries as the providers ask (408, 409, 429, 5xx and
Anthropic's 529, Retry-After honoured up to a minute), server-sent events read as JSON
within the reply's bounds (model/sse.py: the size of an event, the reply's deadline, the
depth of its JSON), and every failure turned into one ModelError naming what to check.

The HTTP package is the openai SDK's own (`httpx2` in current releases, `httpx` before),
so nothing new is installed; it is imported only when a native upstream is used.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import closing
from dataclasses import dataclass
from typing import Any

from koogcli.adapters.model import sse
from koogcli.adapters.model.refusals import status_error
from koogcli.core import bounded_json
from koogcli.core.errors import ModelError

_RETRIED = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
# A server's Retry-After is honoured up to this long; else 0.5 s doubling to 8 (as the
# providers' SDKs back off).
_LONGEST_RETRY_AFTER = 60.0


def _backoff(attempt: int) -> float:
    return min(0.5 * 2.0**attempt, 8.0) * (1 - 0.25 * random.random())


@dataclass
class HttpFailure(Exception):
    """An upstream's error answer, shaped as refusals.py reads one."""

    status_code: int
    body: Any
    message: str
    retry_after: str | None = None

    def __str__(self) -> str:
        return self.message


class NativeHttp:
    """POSTs to one upstream: `base_url` + path, with the protocol's headers."""

    def __init__(
        self,
        base_url: str,
        headers: Mapping[str, str],
        timeout: float,
        max_retries: int,
        turn_timeout: float | None = None,
    ) -> None:
        self.httpx = httpx = _package()
        self.base_url = base_url.rstrip("/")
        self.headers = dict(headers)
        self.timeout = timeout
        self.max_retries = max_retries
        self.turn_timeout = turn_timeout
        # koog serve runs a request per connection at once on one client: httpx's default
        # pool of 100 would make the 101st wait for another session's reply (SPEC §6).
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=20)
        self.client = httpx.Client(timeout=timeout, follow_redirects=False, limits=limits)

    def post(
        self, path: str, body: Mapping[str, Any], extra_headers: Mapping[str, str] = {}
    ) -> Any:
        """The upstream's response (streamed: read or iterate it), or HttpFailure / a
        connection error after the retries."""
        content = encoded(body)
        headers = {**self.headers, **extra_headers, "content-type": "application/json"}
        url = self.base_url + path
        for attempt in range(self.max_retries + 1):
            last = attempt == self.max_retries
            request = self.client.build_request("POST", url, content=content, headers=headers)
            try:
                response = self.client.send(request, stream=True)
            except self.httpx.HTTPError:
                if last:
                    raise
                time.sleep(_backoff(attempt))
                continue
            if response.status_code < 400:
                return response
            if not last and response.status_code in _RETRIED:
                wait = _retry_after(response.headers.get("retry-after"))
                response.close()
                time.sleep(wait if wait is not None else _backoff(attempt))
                continue
            raise failure_of(response)
        raise AssertionError("unreachable")  # pragma: no cover

    def get(self, path: str) -> Any:
        response = self.client.get(self.base_url + path, headers=self.headers)
        if response.status_code >= 400:
            raise failure_of(response)
        return bounded_json.loads(response.content)


def encoded(body: Mapping[str, Any]) -> bytes:
    """A request body as compact UTF-8 JSON: orjson's bytes (a 5,000-message request in
    0.2 ms, `json` took 5), the same bytes `json` writes; what orjson will not write (an
    integer past 64 bits, a key that is not a string) is written by `json`."""
    import orjson

    try:
        return orjson.dumps(body)
    except orjson.JSONEncodeError:
        return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


def _package() -> Any:
    """The HTTP package the openai SDK is built on: `httpx2` in current releases."""
    import importlib

    for name in ("httpx2", "httpx"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    raise ModelError("no HTTP package found (httpx2 or httpx)", hint="reinstall koog")


# An error answer is read this far: its words, not a payload.
_ERROR_BYTES = 1 << 20


def failure_of(response: Any) -> HttpFailure:
    raw = _head(response, _ERROR_BYTES)
    try:
        body = bounded_json.loads(raw)
    except ValueError:
        body = {"error": {"message": raw.decode(errors="replace")[:300]}}
    err = body.get("error", body) if isinstance(body, dict) else {}
    message = err.get("message") if isinstance(err, dict) else None
    response.close()
    return HttpFailure(
        response.status_code,
        body,
        message if isinstance(message, str) else f"HTTP {response.status_code}",
        response.headers.get("retry-after"),
    )


def _head(response: Any, limit: int) -> bytes:
    """The body's first `limit` bytes (all of it when read already)."""
    if getattr(response, "is_stream_consumed", False) or not hasattr(response, "iter_bytes"):
        return bytes(response.read()[:limit])
    got = bytearray()
    for chunk in response.iter_bytes():
        got += chunk
        if len(got) >= limit:
            break
    return bytes(got[:limit])


def _retry_after(value: str | None) -> float | None:
    try:
        wait = float(value) if value else None
    except ValueError:
        return None
    return wait if wait is not None and 0 < wait <= _LONGEST_RETRY_AFTER else None


def relayed(response: Any, bounds: sse.Bounds) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each server-sent event as the upstream wrote it (its lines and the blank line that
    ends it) with its data read as JSON, within `bounds`; events whose data is not an
    object are passed on with an empty one, and JSON nested too deep is refused."""
    for lines, data in sse.events(response, bounds):
        yield "\n".join(lines) + "\n\n", _object(data)


def _object(data: str) -> dict[str, Any]:
    try:
        value = bounded_json.loads(data) if data and not data.startswith("[DONE]") else {}
    except bounded_json.TooDeepError:
        raise
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def explained(exc: Exception, http: NativeHttp, url: str, model: str, key_env: str) -> ModelError:
    """One ModelError for any failure of a native request, with the upstream's status and
    words kept for serve (error.upstream, error.status)."""
    retries = f" after {http.max_retries} retries" if http.max_retries else ""
    if isinstance(exc, HttpFailure):
        error = status_error(exc, exc.status_code, url, model, key_env, retries)
        error.status = exc.status_code
        err = exc.body.get("error", exc.body) if isinstance(exc.body, dict) else None
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            error.upstream = {k: err.get(k) for k in ("message", "type", "param", "code")}
        error.retry_after = exc.retry_after
        return error
    if isinstance(exc, http.httpx.TimeoutException):
        return ModelError(
            f"{url} did not answer within {http.timeout:g}s{retries}",
            hint="raise llm.timeout_seconds or check the server",
        )
    if isinstance(exc, http.httpx.HTTPError):
        return ModelError(
            f"cannot connect to {url}",
            hint="check that the server is running and that llm.base_url points at it",
        )
    if isinstance(exc, ValueError):
        return ModelError(f"{url} sent a reply koog cannot read: {exc}")
    raise exc


def exchange(
    http: NativeHttp,
    url: str,
    path: str,
    body: Mapping[str, Any],
    headers: Mapping[str, str],
    sink: Callable[[str], None] | None,
    failure: Callable[[Exception], ModelError],
    whole: Callable[[Any], None],
    event: Callable[[dict[str, Any]], None],
) -> None:
    """One request of a native upstream: its answer read as one JSON object (`whole`) or
    as events (`event`), each passed to `sink` as the upstream wrote it (a passed-through
    request's client reads them); a refusal is `failure(exc)`, a reply broken off midway
    a ModelError that says so (`url`: the endpoint as it may be shown); the answer is read
    within the bounds of model/sse.py (`http.turn_timeout` from now)."""
    bounds = sse.Bounds.starting(url, http.turn_timeout)
    try:
        response = http.post(path, body, headers)
    except Exception as exc:
        raise failure(exc) from exc
    try:
        with closing(response):
            if not body.get("stream") or "json" in response.headers.get("content-type", ""):
                raw = sse.body(response, bounds).decode()
                parsed = bounded_json.loads(raw)
                if sink is not None:
                    sink(raw)
                whole(parsed)
                return
            for text, parsed in relayed(response, bounds):
                if sink is not None:
                    sink(text)
                event(parsed)
    except ModelError:
        raise
    except Exception as exc:
        if isinstance(exc, ValueError):
            raise unreadable(url, exc) from exc
        if isinstance(exc, http.httpx.HTTPError):
            raise broken(url, exc) from exc
        raise


def listed_models(http: NativeHttp, url: str, key_env: str) -> list[str]:
    """The upstream's models (`GET /models`, `data[].id`), sorted."""
    try:
        found = http.get("/models")
    except Exception as exc:
        raise explained(exc, http, url, "", key_env) from exc
    data = found.get("data") if isinstance(found, Mapping) else None
    return sorted(str(m.get("id")) for m in data or [] if isinstance(m, Mapping))


def unreadable(url: str, exc: BaseException) -> ModelError:
    """A reply that is not the JSON it should be (or is nested too deep to read)."""
    return ModelError(
        f"{url} sent a reply koog cannot read: {exc}",
        hint="retry; nothing of this turn was stored",
    )


def broken(url: str, exc: BaseException) -> ModelError:
    return ModelError(
        f"the connection to {url} broke during the reply: {exc}",
        hint="retry; nothing of this turn was stored",
    )
