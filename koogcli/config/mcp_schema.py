"""`[mcp]`, `[[mcp.servers]]` and `[[mcp.compensations]]` (SPEC §5.20): MCP tool servers
offered to the model as `SERVER__TOOL`, with approval from their annotations and undo."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator, model_validator

# A server's name prefixes its tools' names: `SERVER__TOOL` must fit every provider's
# pattern for function names (^[a-zA-Z0-9_-]{1,64}$), so the name is letters, digits, `-`
# and single underscores (`__` separates it from the tool's name).
_SERVER_NAME = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,30}$"
_TOOL_NAME = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,30}__[A-Za-z0-9_.-]{1,64}$"
_ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"
_CALLABLE = r"^[\w.]+:[\w.]+$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class McpServerSpec(_Strict):
    name: str = Field(pattern=_SERVER_NAME)
    # stdio: the command koog starts (with `args` and `env` over a minimal environment) ...
    command: str | None = Field(default=None, min_length=1)
    args: list[str] = []
    env: dict[str, str] = {}
    cwd: str | None = None
    # ... or streamable HTTP: the endpoint, and the env vars holding its credentials.
    url: str | None = Field(default=None, pattern=r"^https?://")
    bearer_token_env: str | None = Field(default=None, pattern=_ENV_NAME)
    headers_env: dict[str, str] = {}  # header name -> env var holding its value
    enabled: StrictBool = True
    # Its tools' annotations (readOnlyHint) are believed only when the user says so.
    trusted: StrictBool = False
    startup_timeout_seconds: float = Field(default=30.0, gt=0.0, le=600.0, allow_inf_nan=False)
    tool_timeout_seconds: float = Field(default=60.0, gt=0.0, le=86400.0, allow_inf_nan=False)
    enabled_tools: list[str] | None = None  # None: every tool the server lists
    disabled_tools: list[str] = []

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerSpec:
        if (self.command is None) == (self.url is None):
            raise ValueError("give either `command` (stdio) or `url` (streamable HTTP)")
        if self.url is None and (self.bearer_token_env or self.headers_env):
            raise ValueError("`bearer_token_env` and `headers_env` need a `url`")
        if self.command is None and (self.args or self.env or self.cwd):
            raise ValueError("`args`, `env` and `cwd` need a `command`")
        return self

    @field_validator("name")
    @classmethod
    def _no_separator(cls, value: str) -> str:
        if "__" in value or value.endswith("_"):
            raise ValueError(f"{value!r}: `__` separates a server's name from its tools' names")
        return value

    @field_validator("headers_env")
    @classmethod
    def _env_names(cls, value: dict[str, str]) -> dict[str, str]:
        for header, env in value.items():
            if not re.match(_ENV_NAME, env):
                raise ValueError(f"headers_env.{header}: {env!r} is not an environment variable")
        return value


class McpCompensation(_Strict):
    """How a call of `tool` is undone: the compensating `SERVER__TOOL` (its arguments
    templated over the call's `args` and `result`), or a koog Python callable."""

    tool: str = Field(pattern=_TOOL_NAME)
    compensation: str | None = Field(default=None, pattern=_TOOL_NAME)
    callable: str | None = Field(default=None, pattern=_CALLABLE)
    # Each value a template: "{{ args.entities[*].name }}" is the list of the names, a
    # whole-value template keeps its type; text around templates makes a string.
    arguments: dict[str, object] = {}

    @model_validator(mode="after")
    def _one_way(self) -> McpCompensation:
        if (self.compensation is None) == (self.callable is None):
            raise ValueError("give either `compensation` (an MCP tool) or `callable`")
        return self


class McpSettings(_Strict):
    # auto: no call asks; writes: a call asks unless its tool is read-only (by the
    # annotations of a trusted server); always: every call asks.
    approval: Literal["auto", "writes", "always"] = "writes"
    servers: list[McpServerSpec] = []
    compensations: list[McpCompensation] = []

    @model_validator(mode="after")
    def _unique(self) -> McpSettings:
        names = [s.name for s in self.servers]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"two servers named {twice[0]!r}")
        tools = [c.tool for c in self.compensations]
        twice = sorted({t for t in tools if tools.count(t) > 1})
        if twice:
            raise ValueError(f"two compensations for {twice[0]!r}")
        return self
