"""Where an upstream is and how it is asked: its URL, the key (read once, from the
environment variable config names), its timeouts and retries, and the request fields
config sets. Shared by the three wire clients."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from koogcli.core.errors import EndpointNotConfiguredError
from koogcli.core.urls import masked

OPENAI_DEFAULT_URL = "https://api.openai.com/v1"
# The key a client is given when none is configured (local servers need none).
NO_KEY = "not-needed"


@dataclass(frozen=True)
class Endpoint:
    base_url: str
    api_key: str
    api_key_env: str
    timeout: float
    max_retries: int
    # `[llm] turn_timeout_seconds`: how long one reply may take from its request to its end
    # (None: only `timeout` bounds each read).
    turn_timeout: float | None = None

    @property
    def shown_url(self) -> str:
        """The base URL for messages: credentials inside it are never printed."""
        return masked(self.base_url)

    def scrub(self, text: str) -> str:
        """Text from a library exception, with the URL's credentials masked."""
        return text.replace(self.base_url, self.shown_url) if self.base_url else text


@dataclass(frozen=True)
class RequestOptions:
    """Request fields from config; unset ones are never sent (servers differ in what they take)."""

    max_tokens: int | None = None
    reasoning_effort: str | None = None
    extra_body: Mapping[str, object] = field(default_factory=dict)


def resolve_endpoint(
    base_url: str,
    api_key_env: str,
    env: Mapping[str, str],
    timeout: float,
    max_retries: int,
    turn_timeout: float | None = None,
) -> Endpoint:
    """The key is read here, when the client is built, and nowhere else (§5.8)."""
    key = env.get(api_key_env, "")
    if not key and not base_url:
        raise EndpointNotConfiguredError(f"no API key in {api_key_env} and no base URL")
    # Local servers usually need no key, but the client insists on one.
    url = base_url or OPENAI_DEFAULT_URL
    return Endpoint(url, key or NO_KEY, api_key_env, timeout, max_retries, turn_timeout)
