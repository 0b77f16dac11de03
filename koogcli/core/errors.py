"""Every failure koog reports to a user is a KoogError carrying its exit code (SPEC §2).

Messages are one line naming the file, key or value at fault; `hint` is an optional
second line saying what to do. Adapters translate third-party exceptions into these.
"""

from __future__ import annotations


class KoogError(Exception):
    exit_code = 1

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class UsageError(KoogError):
    exit_code = 2


class ConfigError(UsageError):
    pass


class InvalidSessionNameError(UsageError):
    pass


class SessionNotFoundError(UsageError):
    pass


class EndpointNotConfiguredError(UsageError):
    """No API key and no base URL: the CLI shows the first-run guide instead of one line."""


class ModelError(KoogError):
    exit_code = 1
    # The HTTP status the server answered with and its own error object, when it answered
    # (`koog serve` passes both on to its client).
    status: int | None = None
    upstream: dict[str, object] | None = None
    # Its `Retry-After`, passed on as it came.
    retry_after: str | None = None


class ContextOverflowError(ModelError):
    """The server refused a request as longer than the model's context."""

    # The context size the server's refusal named ("maximum context length is 2048
    # tokens"), when it named one.
    limit: int | None = None


class ResponseFormatError(ModelError):
    """The server refused the request's `response_format` (it supports no such mode)."""


class TurnCancelledError(KoogError):
    """Ctrl-C during a turn: nothing was stored."""

    exit_code = 130


class McpServerError(KoogError):
    """An MCP server could not be started or listed (`koog mcp tools SERVER`)."""


class StorageError(KoogError):
    exit_code = 3


class CorruptDocumentError(StorageError):
    pass


class UnknownFormatError(StorageError):
    pass


class LockTimeoutError(StorageError):
    pass


class ConflictError(StorageError):
    """The stored revision moved since it was loaded; callers reload and re-apply."""


class CompensationError(KoogError):
    """A compensating tool failed during rollback; the history was restored regardless."""

    exit_code = 1
