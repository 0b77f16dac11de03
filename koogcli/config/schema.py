"""Configuration schema (SPEC §3): the only place defaults live.

Every model forbids unknown keys, so a typo fails at start-up naming the key. Values that
need checking beyond their type (regexes, session names) are checked here, once.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    ValidationInfo,
    field_validator,
)

from koogcli.config.mcp_schema import McpSettings
from koogcli.core.names import SessionName

RoleName = Literal["system", "user", "assistant", "tool"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _check_regex(value: str | None) -> str | None:
    if value is not None:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"invalid regular expression: {exc}") from exc
    return value


WireApi = Literal["chat", "responses", "messages"]


class LLMSettings(_Strict):
    model: str = Field(default="gpt-4o-mini", min_length=1)
    base_url: str = ""
    # The upstream's protocol: OpenAI chat completions, the Responses API, or Anthropic
    # Messages (SPEC §6); `[models."NAME"] wire_api` for one model.
    wire_api: WireApi = "chat"
    api_key_env: str = Field(default="OPENAI_API_KEY", min_length=1)
    system_prompt: str = "You are a helpful assistant."
    # Unset values are left out of requests: OpenAI's reasoning models reject temperature.
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    max_tokens: int | None = Field(default=None, ge=1)
    reasoning_effort: str | None = Field(default=None, min_length=1)
    # Sent with koog's own tools: "auto", "required" or "none"; unset: not sent. Local
    # servers (llama.cpp's) call no tool unless it is sent.
    tool_choice: Literal["auto", "required", "none"] | None = None
    # How long a request waits for the upstream's first byte (and for each read after it).
    timeout_seconds: float = Field(default=60.0, gt=0.0, allow_inf_nan=False)
    # How long one reply may take, from its request to its last byte: an upstream that
    # trickles its reply fails the turn here (nothing stored).
    turn_timeout_seconds: float = Field(default=600.0, gt=0.0, allow_inf_nan=False)
    max_retries: int = Field(default=2, ge=0, le=20)
    # The model's context window in tokens; unset: unknown (no automatic compression by size).
    context_tokens: int | None = Field(default=None, ge=1)
    # Provider-specific request fields, sent verbatim (top_k, min_p, seed, ...).
    extra_body: dict[str, object] = {}

    def key_env(self, wire: str) -> str:
        """Where the key is read: `api_key_env` when set, else the protocol's own."""
        if "api_key_env" in self.model_fields_set or wire != "messages":
            return self.api_key_env
        return "ANTHROPIC_API_KEY"


class ChatSettings(_Strict):
    # Empty: every call without -s/-c starts a new session with a generated name.
    default_session: str = ""
    stream: StrictBool = True
    markdown: StrictBool = True
    terminal_reflows: Literal["auto", "yes", "no"] = "auto"
    max_tool_rounds: int = Field(default=10, ge=1, le=100)
    max_attachment_bytes: int = Field(default=1024 * 1024, ge=1)
    # The whole message a turn sends (prompt, standard input, attachments), in bytes.
    max_input_bytes: int = Field(default=8 * 1024 * 1024, ge=1)
    # User/assistant exchanges the REPL shows when it opens a session that has history.
    show_on_resume: int = Field(default=2, ge=0, le=100)

    @field_validator("default_session")
    @classmethod
    def _valid_name(cls, value: str) -> str:
        if value:
            SessionName.parse(value)
        return value


class ModelSpec(_Strict):
    """What koog knows about one model (`[models."NAME"]`), over the `[llm]` values."""

    context_tokens: int | None = Field(default=None, ge=1)
    # This model's protocol and server, when they are not `[llm]`'s.
    wire_api: WireApi | None = None
    base_url: str | None = None
    api_key_env: str | None = Field(default=None, min_length=1)
    # Options sent with every request to this model (`-o KEY VALUE` over them).
    options: dict[str, str | int | float | bool] = {}


class TemplateSpec(_Strict):
    """A saved prompt (`koog chat --save NAME`, run with `-t NAME`): `$KEY` in its prompt
    and system prompt is filled by `-p KEY VALUE`, `$input` by standard input."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    prompt: str | None = None
    system: str | None = None
    model: str | None = Field(default=None, min_length=1)
    # Model options (`-o KEY VALUE`), typed as TOML types them.
    options: dict[str, str | int | float | bool] = {}
    # A JSON schema the reply must fit (`--schema`; a list of them: `--schema-multi`).
    json_schema: dict[str, object] | None = Field(default=None, alias="schema")
    extract: bool = False
    extract_last: bool = False


class RoleSpec(_Strict):
    """A named system prompt, optionally with its own model and temperature (`-r NAME`)."""

    system: str
    model: str | None = Field(default=None, min_length=1)
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)


class FilterSpec(_Strict):
    type: Literal["filter"]
    roles: list[RoleName] | None = None
    min_chars: int | None = Field(None, ge=0)
    max_chars: int | None = Field(None, ge=0)
    include_regex: str | None = None
    exclude_regex: str | None = None

    _regexes = field_validator("include_regex", "exclude_regex")(_check_regex)


def _step_within(limit: str) -> Callable[[int | None, ValidationInfo], int | None]:
    """A window's step may not pass its size: it would cut more than a whole window."""

    def check(value: int | None, info: ValidationInfo) -> int | None:
        size = info.data.get(limit)
        if value is not None and isinstance(size, int) and value > max(size, 1):
            raise ValueError(f"must not exceed {limit} ({size})")
        return value

    return check


class WindowSpec(_Strict):
    type: Literal["window"]
    size: int = Field(ge=0)
    # Messages the window's start moves at a time, so a server's prompt cache holds between
    # cuts (issue 42); 1 is Koog's rule. None: core/preprocessors.default_step(size).
    step: StrictInt | None = Field(None, ge=1)  # `true` or "2" is an error, not 1 or 2

    _step = field_validator("step")(_step_within("size"))


class TokenWindowSpec(_Strict):
    type: Literal["token_window"]
    max_tokens: int = Field(ge=1)
    # The same in tokens. None: core/preprocessors.default_step_tokens(max_tokens).
    step_tokens: StrictInt | None = Field(None, ge=1)

    _step = field_validator("step_tokens")(_step_within("max_tokens"))


class RedactSpec(_Strict):
    type: Literal["redact"]
    pattern: str = Field(min_length=1)
    replacement: str = "[REDACTED]"

    _regexes = field_validator("pattern")(_check_regex)


_CALLABLE = r"^[\w.]+:[\w.]+$"


class CustomSpec(_Strict):
    type: Literal["custom"]
    callable: str = Field(pattern=_CALLABLE)


PreprocessorSpec = Annotated[
    FilterSpec | WindowSpec | TokenWindowSpec | RedactSpec | CustomSpec,
    Field(discriminator="type"),
]
PREPROCESSOR_TYPES = ("filter", "window", "token_window", "redact", "custom")


class ChatMemorySettings(_Strict):
    preprocessors: list[PreprocessorSpec] = []


class PersistenceSettings(_Strict):
    enabled: StrictBool = True
    automatic: StrictBool = True
    keep_last: int = Field(default=100, ge=1)


class ToolSpec(_Strict):
    callable: str = Field(pattern=_CALLABLE)
    rollback: str | None = Field(default=None, pattern=_CALLABLE)
    # Ask before each call (and compensation); [tool_settings] ask asks for every tool.
    ask: StrictBool = False
    # None: [tool_settings] timeout_seconds.
    timeout_seconds: float | None = Field(default=None, gt=0.0, allow_inf_nan=False)


class ToolSettings(_Strict):
    ask: StrictBool = False
    # A tool running longer gets a timeout error as its result (and is stopped).
    timeout_seconds: float = Field(default=60.0, gt=0.0, allow_inf_nan=False)
    # A longer result is cut, stored and sent with a note saying how much was cut.
    max_result_bytes: int = Field(default=1024 * 1024, ge=1024, le=64 * 1024 * 1024)


StrategyName = Literal["whole", "last-n", "since", "chunked", "facts", "per-system"]


class CompressionSettings(_Strict):
    strategy: StrategyName = "whole"
    last_n: int = Field(default=10, ge=1)
    since: str = ""
    chunk_size: int = Field(default=10, ge=1)
    concurrency: int = Field(default=4, ge=1, le=32)
    preserve_memory: StrictBool = True
    auto_after_messages: int = Field(default=0, ge=0)
    # Compress before a turn whose request would pass this fraction of the model's context.
    auto_at: float = Field(default=0.8, ge=0.0, le=1.0)
    model: str = ""  # the model that summarises; empty: the chat model
    retries: int = Field(default=3, ge=0, le=10)  # re-asks after an invalid fact answer
    # Most tokens a summary may have (in place of llm.max_tokens, which is for replies):
    # a summary cut at the limit is no summary, and fails the compression.
    max_summary_tokens: int = Field(default=1024, ge=16)
    concepts: list[str] = []
    fallback: StrategyName | Literal[""] = ""

    @field_validator("since")
    @classmethod
    def _iso(cls, value: str) -> str:
        if value:
            from datetime import datetime

            try:
                datetime.fromisoformat(value)
            except ValueError as exc:
                raise ValueError(f"not an ISO-8601 time: {value!r}") from exc
        return value

    @field_validator("concepts")
    @classmethod
    def _concepts(cls, value: list[str]) -> list[str]:
        from koogcli.core.compression import Concept
        from koogcli.core.errors import KoogError

        for text in value:
            try:
                Concept.parse(text)
            except KoogError as exc:
                raise ValueError(exc.message) from exc
        return value


NAMESPACE = r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,63}$"


class RetrievalSettings(_Strict):
    enabled: StrictBool = False
    namespace: str = Field(default="default", pattern=NAMESPACE)
    top_k: int = Field(default=5, ge=1, le=100)
    threshold: float = Field(default=0.0, ge=0.0, le=1.0)
    # auto: hybrid with an embedding model, else fulltext; "similarity" is the version 1
    # name (embedding with a model, else jaccard).
    mode: Literal["auto", "fulltext", "embedding", "hybrid", "jaccard", "keyword", "similarity"] = (
        "auto"
    )
    # Only records whose metadata has these values (compared as text).
    where: dict[str, str] = {}
    augmenter: Literal["after", "system", "user"] = "after"
    query: str = Field(default="last_user_message", pattern=r"^last_user_message(s:[1-9][0-9]*)?$")


class IngestionSettings(_Strict):
    enabled: StrictBool = False
    namespace: str = Field(default="default", pattern=NAMESPACE)
    roles: list[RoleName] = ["user", "assistant"]


class EmbeddingSettings(_Strict):
    model: str = ""
    # §5.16: a record with no full-text match and a cosine at or below this is never
    # returned or injected (the nearest records exist whether or not anything is near).
    min_similarity: float = Field(default=0.3, ge=-1.0, le=1.0)


class LongTermMemorySettings(_Strict):
    # warn: go on without memory (Koog's log-and-continue); fail: the command fails.
    on_error: Literal["warn", "fail"] = "warn"
    retrieval: RetrievalSettings = RetrievalSettings()
    ingestion: IngestionSettings = IngestionSettings()
    embeddings: EmbeddingSettings = EmbeddingSettings()


class StorageSettings(_Strict):
    # Empty: files and SQLite under the data dir. `postgresql://user@host:port/db` shares
    # sessions, checkpoints and memory across machines (password only in the environment).
    url: str = Field(default="", pattern=r"^$|^postgres(ql)?://")
    # The PostgreSQL schema koog's tables live in: several teams can share one database.
    db_schema: str = Field(default="koog", alias="schema", pattern=r"^[a-z_][a-z0-9_]{0,62}$")
    # The PostgreSQL text search configuration memory's full-text search stems with.
    language: str = Field(default="english", pattern=r"^[a-z_]{1,63}$")
    # PostgreSQL: how long a statement waits for a lock, and runs at most, before koog
    # gives up with exit 3 naming what was locked (never a hang).
    lock_timeout_seconds: float = Field(default=10.0, gt=0.0, le=3600.0)
    statement_timeout_seconds: float = Field(default=60.0, gt=0.0, le=86400.0)


class ServeToken(_Strict):
    # A bearer token a client of `koog serve` sends (`Authorization: Bearer ...`).
    token: str = Field(min_length=16)
    # What the access log calls the token's requests (never the token itself).
    name: str = Field(default="", max_length=64, pattern=r"^[A-Za-z0-9._-]*$")
    # Session-name prefixes the token may use ("" grants every session).
    sessions: list[str] = []
    # Long-term memory namespaces the token may use.
    namespaces: list[Annotated[str, Field(pattern=NAMESPACE)]] = []


class ServeClient(_Strict):
    """A coding agent known by its own session header: what its sessions are named and
    which memory namespace it gets (None: the request's, else the configured one)."""

    prefix: str = Field(min_length=1, max_length=20, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    namespace: str | None = Field(default=None, min_length=1)
    # False: a request too long for the model goes back to the agent in its own words, so
    # it compacts (SPEC §6); true: koog compresses the session and sends it again.
    recover_overflow: StrictBool = False
    # Journal the files the agent's edit tools change, so a rollback restores them.
    files: StrictBool = True
    # The folder whose files are journalled when the agent names none in its prompt.
    root: str | None = Field(default=None, min_length=1)

    @field_validator("root")
    @classmethod
    def _absolute_root(cls, value: str | None) -> str | None:
        if value is None:
            return None
        import os.path

        expanded = os.path.expanduser(value)
        if not os.path.isabs(expanded):
            raise ValueError(f"{value!r} is not an absolute path")
        return os.path.normpath(expanded)


# The header each agent names its session with, and its sessions' default prefix.
SERVE_CLIENT_HEADERS = {
    "claude": "x-claude-code-session-id",
    "codex": "session-id",
    "opencode": "x-session-id",
}


def _default_clients() -> dict[str, ServeClient]:
    return {name: ServeClient(prefix=f"{name}-") for name in SERVE_CLIENT_HEADERS}


class ServeSettings(_Strict):
    host: str = Field(default="127.0.0.1", min_length=1)
    port: int = Field(default=8765, ge=0, le=65535)
    # How long a request waits while another request on its session runs, before 409.
    session_wait_seconds: float = Field(default=30.0, gt=0.0, le=3600.0)
    # Seconds between SSE comments sent while the upstream has not answered yet.
    keepalive_seconds: float = Field(default=10.0, gt=0.0, le=600.0)
    # Seconds a stop (SIGTERM, Ctrl-C) waits for replies in flight.
    shutdown_seconds: float = Field(default=30.0, ge=0.0, le=3600.0)
    # Required to bind anything but a loopback address; with any set, every request needs one.
    tokens: list[ServeToken] = []
    # Without tokens: true requires the data dir's own token (`koog serve --print-token`)
    # of every client; false serves the user running koog serve without one (told by the
    # socket's owner, Linux only); unset: a token where the owner cannot be told.
    require_token: StrictBool | None = None
    # Browsers: a request carrying an Origin not listed is refused (403); CORS headers are
    # sent to the listed ones only ("http://localhost:3000", exactly as browsers send it).
    allowed_origins: list[str] = []
    # Host names besides the bound address and loopback names (others: 421, DNS rebinding).
    allowed_hosts: list[str] = []
    # A file an agent's edit tool changes is journalled up to this size (larger: listed as
    # not covered, never restored).
    journal_max_bytes: int = Field(default=1024 * 1024, ge=0, le=1024**3)
    # A request body larger than this is refused (413) before more of it is read.
    max_body_bytes: int = Field(default=8 * 1024 * 1024, ge=1024, le=1024**3)
    # A connection that has not sent a whole request head in this time is closed.
    header_timeout_seconds: float = Field(default=10.0, gt=0.0, le=600.0)
    # A request body not received whole this long after its head is refused (408).
    body_timeout_seconds: float = Field(default=30.0, gt=0.0, le=3600.0)
    # A kept-alive connection idle this long between requests is closed.
    idle_timeout_seconds: float = Field(default=5.0, gt=0.0, le=3600.0)
    # Open connections at most; more are closed as they come.
    max_connections: int = Field(default=512, ge=1, le=100_000)
    # Requests waiting on one session (beyond the one it runs); more are refused (409).
    session_queue: int = Field(default=16, ge=0, le=10_000)
    # Of the worker threads (one per request a connection carries), the share one token's
    # requests may hold at once (without tokens: the requests that name no session, together).
    token_share: float = Field(default=0.5, gt=0.0, le=1.0)
    # Attempts after a failed upstream request; 0: a client that retries decides.
    upstream_retries: int = Field(default=0, ge=0, le=20)
    # One line per request on stderr (time, method, path, status, ms, session, placement).
    access_log: StrictBool = True
    # Model names clients ask for -> the upstream's ("claude-opus-4-8" = "qwen3"). A
    # Responses or Messages request for a name not listed gets llm.model.
    models: dict[str, str] = {}
    # Coding agents' own session headers (claude, codex, opencode): session names and
    # memory namespaces. A table given for one agent replaces only that agent's.
    clients: dict[str, ServeClient] = Field(default_factory=_default_clients)

    @field_validator("tokens")
    @classmethod
    def _distinct_tokens(cls, value: list[ServeToken]) -> list[ServeToken]:
        seen: set[str] = set()
        for number, entry in enumerate(value, 1):
            if entry.token in seen:  # only the first grant would ever apply
                raise ValueError(f"token {number} repeats an earlier token's string")
            seen.add(entry.token)
        return value

    @field_validator("allowed_origins")
    @classmethod
    def _exact_origins(cls, value: list[str]) -> list[str]:
        for origin in value:
            if "*" in origin:  # matched as written, a wildcard would allow nothing
                raise ValueError(
                    f"{origin!r} is a wildcard: list each origin as browsers send it "
                    "(scheme://host:port)"
                )
        return value

    @field_validator("clients", mode="before")
    @classmethod
    def _default_prefixes(cls, value: object) -> object:
        """A table that only sets `files` or `namespace` keeps the agent's own prefix."""
        if not isinstance(value, dict):
            return value
        return {
            name: {"prefix": f"{name}-", **given}
            if isinstance(given, dict) and name in SERVE_CLIENT_HEADERS
            else given
            for name, given in value.items()
        }

    @field_validator("clients")
    @classmethod
    def _known_clients(cls, value: dict[str, ServeClient]) -> dict[str, ServeClient]:
        unknown = sorted(set(value) - set(SERVE_CLIENT_HEADERS))
        if unknown:
            raise ValueError(
                f"unknown client {unknown[0]!r}: one of {', '.join(SERVE_CLIENT_HEADERS)}"
            )
        return {**_default_clients(), **value}


class ArchiveSettings(_Strict):
    # Tools whose own stores `koog serve` imports as they change (SPEC §4a), each from its
    # default place: "claude-code", "codex", "opencode", "llm" (or "all").
    sources: list[Literal["claude-code", "codex", "opencode", "llm", "all"]] = []
    # How often serve looks for changes (an unchanged file costs a stat).
    interval_seconds: float = Field(default=2.0, ge=0.2, le=3600.0)


class Settings(_Strict):
    llm: LLMSettings = LLMSettings()
    chat: ChatSettings = ChatSettings()
    roles: dict[str, RoleSpec] = {}
    templates: dict[str, TemplateSpec] = {}
    models: dict[str, ModelSpec] = {}
    chat_memory: ChatMemorySettings = ChatMemorySettings()
    compression: CompressionSettings = CompressionSettings()
    persistence: PersistenceSettings = PersistenceSettings()
    long_term_memory: LongTermMemorySettings = LongTermMemorySettings()
    tool_settings: ToolSettings = ToolSettings()
    tools: list[ToolSpec] = []
    storage: StorageSettings = StorageSettings()
    archive: ArchiveSettings = ArchiveSettings()
    serve: ServeSettings = ServeSettings()
    mcp: McpSettings = McpSettings()
