"""koog's errors as HTTP answers in OpenAI's error shape (SPEC §6).

The status tells a client what to do: the upstream's own status passes through (a 429
stays a 429), a bad body or session name is 400, a missing session 404, a busy session 409,
storage trouble 500, an upstream that could not be reached 502.
"""

from __future__ import annotations

import re
import sys
import traceback
from typing import TypeVar, cast

from starlette.responses import JSONResponse

from koogcli.core.errors import (
    ContextOverflowError,
    KoogError,
    LockTimeoutError,
    ModelError,
    ResponseFormatError,
    SessionNotFoundError,
    StorageError,
    UsageError,
)
from koogcli.server.answers import error_body
from koogcli.server.bodies import BadRequest
from koogcli.services.stored_responses import ResponseNotFoundError
from koogcli.services.turn.placement import SessionBusyError
from koogcli.services.turn.request import TurnAbandonedError

T = TypeVar("T")


class Refused(Exception):
    """An answer decided before any service ran: no token (401), not granted (403), ..."""

    def __init__(self, status: int, message: str, kind: str, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind
        self.code = code


def described(exc: BaseException) -> tuple[int, dict[str, object]]:
    """The status and body for any failure of a request."""
    if isinstance(exc, Refused):
        return exc.status, error_body(exc.message, exc.kind, exc.code)
    if isinstance(exc, BadRequest):
        return 400, error_body(exc.message, "invalid_request_error", None, exc.param)
    if isinstance(exc, ModelError) and exc.status is not None and exc.upstream is not None:
        # The upstream's own words, less any key it quoted (its masked form included).
        return exc.status, {"error": without_keys(dict(exc.upstream))}
    if isinstance(exc, KoogError):
        status, kind, code = _koog_status(exc)
        text = exc.message if not exc.hint else f"{exc.message} ({exc.hint})"
        return status, error_body(
            without_keys(text) if isinstance(exc, ModelError) else text, kind, code
        )
    if type(exc).__name__ == "ClientDisconnect":  # starlette's: gone while sending the body
        return 499, error_body(
            "the client closed the connection before sending the whole body",
            "client_closed_request",
            "client_closed",
        )
    sys.stderr.write("koog serve: internal error:\n" + "".join(traceback.format_exception(exc)))
    return 500, error_body(
        f"internal error: {type(exc).__name__}; the server's log has the details",
        "server_error",
    )


# What an API key looks like in an upstream's error text: OpenAI's and Anthropic's keys
# (`sk-...`, `sk-proj-...`, `sk-ant-...`, masked with `*` or not), a bearer credential, and
# `api_key=...` in a quoted request.
_KEYS = re.compile(
    r"\b(?:sk|pk|rk)-[A-Za-z0-9*_\-]{6,}"
    r"|\bBearer\s+[A-Za-z0-9*_\-~+/]{6,}=*"
    r"|\b(api[_-]?key[\"']?\s*[:=]\s*[\"']?)[^\s\"',}]{6,}",
    re.IGNORECASE,
)


def without_keys(value: T) -> T:
    """`value` (text, or an error object's strings) with key-shaped strings replaced: an
    upstream quoting the key it was sent must not show it to every client (SPEC §6: the
    upstream key never leaves the server)."""
    if isinstance(value, str):
        return cast(T, _KEYS.sub(lambda m: (m.group(1) or "") + "[key removed]", value))
    if isinstance(value, dict):
        return cast(T, {k: without_keys(v) for k, v in value.items()})
    if isinstance(value, list):
        return cast(T, [without_keys(v) for v in value])
    return value


def response(exc: BaseException) -> JSONResponse:
    status, body = described(exc)
    return JSONResponse(body, status_code=status, headers=headers_of(exc))


def headers_of(exc: BaseException) -> dict[str, str]:
    """The upstream's `Retry-After`, so a client backs off as long as the upstream asked."""
    wait = exc.retry_after if isinstance(exc, ModelError) else None
    return {"Retry-After": wait} if wait else {}


def _koog_status(exc: KoogError) -> tuple[int, str, str | None]:
    if isinstance(exc, TurnAbandonedError):
        return 499, "client_closed_request", "client_closed"  # nobody reads it; the log does
    if isinstance(exc, (SessionBusyError, LockTimeoutError)):
        return 409, "conflict_error", "session_busy"
    if isinstance(exc, ContextOverflowError):
        return 400, "invalid_request_error", "context_length_exceeded"
    if isinstance(exc, ResponseFormatError):
        return 400, "invalid_request_error", "response_format_unsupported"
    if isinstance(exc, ModelError):
        if exc.status is not None and 400 <= exc.status < 600:
            return exc.status, "upstream_error", None
        return 502, "upstream_error", None
    if isinstance(exc, ResponseNotFoundError):
        return 404, "invalid_request_error", "response_not_found"
    if isinstance(exc, SessionNotFoundError):
        return 404, "not_found_error", "session_not_found"
    if isinstance(exc, UsageError):
        return 400, "invalid_request_error", None
    if isinstance(exc, StorageError):
        return 500, "storage_error", None
    return 500, "server_error", None
