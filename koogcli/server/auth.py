"""Who may see what through `koog serve` (SPEC §6).

With no `[serve] tokens`, the server listens on loopback only and serves the user who runs
it (server/peers.py), or every client sending the data dir's token where that user cannot
be told; either may use every session and namespace. With tokens, each request must send one
(`Authorization: Bearer TOKEN`); it grants session-name prefixes and memory namespaces,
and anything else is refused with 403 before any service runs. Tokens are compared in
constant time.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from koogcli.config.schema import ServeToken
from koogcli.server.errors import Refused


@dataclass(frozen=True, slots=True)
class Grant:
    sessions: tuple[str, ...] | None  # None: every session
    namespaces: tuple[str, ...] | None  # None: every namespace
    name: str = "-"  # what the access log calls it: the token's name, or "token-N"

    def allows(self, name: str) -> bool:
        return self.sessions is None or any(name.startswith(p) for p in self.sessions)

    def session(self, name: str) -> None:
        if not self.allows(name):
            raise Refused(
                403,
                f"this token may not use session {name!r}",
                "permission_error",
                "session_not_granted",
            )

    def namespace(self, name: str) -> None:
        if self.namespaces is not None and name not in self.namespaces:
            raise Refused(
                403,
                f"this token may not use memory namespace {name!r}",
                "permission_error",
                "namespace_not_granted",
            )


EVERYTHING = Grant(None, None)


def grant_for(
    headers: Mapping[str, str], tokens: Sequence[ServeToken], kept: str | None = None
) -> Grant:
    """`kept`: the data dir's token, required when no tokens are configured and the server
    cannot tell who connects (adapters/files/serve_token.py); it grants everything."""
    if not tokens and kept is None:
        return EVERYTHING
    sent = headers.get("authorization", "")
    scheme, _, token = sent.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        hint = " (koog serve --print-token shows this server's)" if kept is not None else ""
        raise Refused(
            401, f"a bearer token is required{hint}", "authentication_error", "missing_token"
        )
    token = token.strip()
    if kept is not None:
        if hmac.compare_digest(kept.encode(), token.encode()):
            return Grant(None, None, "kept-token")
        raise Refused(401, "the bearer token is not this server's", "authentication_error")
    for number, known in enumerate(tokens, 1):
        if hmac.compare_digest(known.token.encode(), token.encode()):
            name = known.name or f"token-{number}"
            return Grant(tuple(known.sessions), tuple(known.namespaces), name)
    raise Refused(401, "the bearer token is not one this server knows", "authentication_error")
