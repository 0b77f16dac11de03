"""What every request to `koog serve` passes before a route sees it (SPEC §6), as one ASGI
layer around the app:

- **Browsers stay out.** A page can send requests to 127.0.0.1 from any tab: with
  `mode: "no-cors"` and a `text/plain` body it needs no preflight. So a request carrying an
  `Origin` not in `[serve] allowed_origins` is 403, a body that is not
  `application/json` is 415 (no simple request can send that), and a `Host` that is not the
  bound address, a loopback name or in `[serve] allowed_hosts` is 421 (a DNS-rebinding page
  reaches the server under a name of its own). CORS headers go to allowed origins only.
- **Bodies are bounded**: over `[serve] max_body_bytes` is 413, told by `Content-Length`
  before any byte of the body is read, or as soon as a chunked body passes it.
- **Only the server's user without a token**: on loopback with no `[serve] tokens`, a
  connection whose socket another local user owns is 403 (server/peers.py).
- **The access log**: one line per request on stderr, written when the answer ends.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import re
import sys
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

from koogcli.config.schema import ServeSettings
from koogcli.server import peers
from koogcli.server.answers import error_body
from koogcli.server.errors import Refused

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

LOG_KEY = "koog.log"
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
_WILDCARDS = frozenset({"0.0.0.0", "::", ""})
_HEADER_NAME = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}")


@dataclass
class LogEntry:
    """What a route tells the access log about its request."""

    session: str = "-"
    placement: str = "-"
    token: str = "-"
    left_out: str = ""  # tools of the request the upstream cannot run, left out of it


def log_entry(scope: Scope) -> LogEntry:
    """The request's log entry (a fresh one when the guard is not in front)."""
    found = scope.get(LOG_KEY)
    if not isinstance(found, LogEntry):
        found = scope[LOG_KEY] = LogEntry()
    return found


def loopback_name(host: str) -> bool:
    """localhost, `*.localhost` (RFC 6761: never resolved elsewhere) or a loopback IP."""
    host = host.lower().rstrip(".")
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _ip_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def host_of(header: str) -> str:
    """The name in a Host header: `[::1]:8765` → `::1`, `localhost:8765` → `localhost`."""
    header = header.strip()
    if header.startswith("["):
        return header[1:].partition("]")[0]
    return header.rpartition(":")[0] if header.count(":") == 1 else header


def who_is_served(settings: ServeSettings) -> str:
    """ "tokens": the configured ones; "owner": the user running the server, told by the
    socket's owner; "kept-token": whoever sends the data dir's token (the owner cannot be
    told here, or `require_token`); "everyone": `require_token = false` where the owner
    cannot be told."""
    if settings.tokens:
        return "tokens"
    if settings.require_token:
        return "kept-token"
    if hasattr(os, "geteuid") and peers.supported():
        return "owner"
    return "everyone" if settings.require_token is False else "kept-token"


def socket_owner_is_me(scope: Scope) -> bool:
    """The client's socket belongs to the user running the server (a connection the kernel
    does not list, or lists under another uid, does not)."""
    client, server = scope.get("client"), scope.get("server")
    if not client or not server:
        return False
    try:
        ipaddress.ip_address(str(client[0]).split("%", 1)[0])
    except ValueError:  # not a TCP peer (an in-process client): nobody else to tell
        return True
    own = os.geteuid() if hasattr(os, "geteuid") else None
    found = peers.owner((str(client[0]), int(client[1])), (str(server[0]), int(server[1])))
    return own is not None and found == own


def is_servers_user(scope: Scope, settings: ServeSettings) -> bool:
    """Whether the client is the user running the server, whoever else a token lets in:
    the socket's owner where the system tells it (Linux); elsewhere only a client holding
    the data dir's own token (no other user can read it). A configured token says nothing
    of who holds it."""
    if hasattr(os, "geteuid") and peers.supported():
        return socket_owner_is_me(scope)
    return who_is_served(settings) == "kept-token"


class Guard:
    def __init__(self, app: ASGIApp, settings: ServeSettings, bound: str) -> None:
        self.app = app
        self.settings = settings
        self.bound = bound.lower()
        self.origins = frozenset(settings.allowed_origins)
        self.hosts = frozenset(h.lower() for h in settings.allowed_hosts)
        self.limit = settings.max_body_bytes
        self.log = settings.access_log
        # Without tokens only the user running the server is served (server/peers.py).
        self.check_peers = who_is_served(settings) == "owner"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        entry = log_entry(scope)
        status = [0]

        async def sent(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
                if origin is not None:
                    message["headers"] = [*message.get("headers", ()), *self._cors(origin)]
            await send(message)

        headers = _headers(scope)
        origin = headers.get("origin")
        try:
            refusal = self._refusal(scope, headers, origin)
            if refusal is not None:
                await _answer(sent, refusal)
            elif scope["method"] == "OPTIONS" and origin is not None:
                # A preflight from an allowed origin: the headers it asks for are allowed
                # (the JS SDK sends x-stainless-*), each a header name and nothing else.
                asked = headers.get("access-control-request-headers", "")
                names = ",".join(
                    n.strip() for n in asked.split(",") if _HEADER_NAME.fullmatch(n.strip())
                )
                extra = [(b"access-control-allow-headers", names.encode())] if names else []
                await sent({"type": "http.response.start", "status": 204, "headers": extra})
                await sent({"type": "http.response.body", "body": b""})
            else:
                await self.app(scope, self._bounded(receive), sent)
        finally:
            if self.log:
                self._write_log(scope, status[0], started, entry)

    def _refusal(self, scope: Scope, headers: dict[str, str], origin: str | None) -> Refused | None:
        host = headers.get("host")
        if host is not None and not self._host_allowed(host_of(host)):
            return Refused(
                421,
                f"this server does not answer for host {host_of(host)!r}",
                "invalid_request_error",
                "host_not_allowed",
            )
        if self.check_peers and not self._own_user(scope):
            return Refused(
                403,
                "this server serves only the user who runs it; another user needs a token "
                "(configure [serve] tokens and send Authorization: Bearer TOKEN)",
                "permission_error",
                "not_the_servers_user",
            )
        if origin is not None and origin not in self.origins and not _own(scope, host, origin):
            return Refused(
                403,
                f"requests from web pages ({origin}) are refused; "
                "list the origin in [serve] allowed_origins to let it in",
                "permission_error",
                "origin_not_allowed",
            )
        if scope["method"] in _BODY_METHODS:
            kind = headers.get("content-type", "").partition(";")[0].strip().lower()
            empty = headers.get("content-length") == "0" and "content-type" not in headers
            if kind != "application/json" and not empty:  # `curl -X POST`: no body at all
                return Refused(
                    415,
                    f"request bodies must be Content-Type: application/json, not {kind or 'none'!r}",
                    "invalid_request_error",
                    "unsupported_media_type",
                )
            length = headers.get("content-length", "")
            if length.isdigit() and int(length) > self.limit:
                return _too_large(self.limit)
        return None

    def _own_user(self, scope: Scope) -> bool:
        return socket_owner_is_me(scope)

    def _host_allowed(self, host: str) -> bool:
        host = host.lower().rstrip(".")
        if host == self.bound or host in self.hosts or loopback_name(host):
            return True
        # Bound to every address: an address itself is no name a rebinding page controls.
        return self.bound in _WILDCARDS and _ip_literal(host)

    def _cors(self, origin: str) -> list[tuple[bytes, bytes]]:
        if origin not in self.origins:
            return []
        return [
            (b"access-control-allow-origin", origin.encode("latin-1")),
            (b"vary", b"Origin"),
            (b"access-control-allow-methods", b"GET, POST, DELETE, OPTIONS"),
            (
                b"access-control-expose-headers",
                b"x-koog-session, x-koog-forked-from, x-koog-memory-used, "
                b"x-koog-context-tokens, x-koog-compressed",
            ),
        ]

    def _bounded(self, receive: Receive) -> Receive:
        """`receive`, refusing a body once it passes the limit (chunked bodies) or is
        still arriving `body_timeout_seconds` after the head (a byte a second)."""
        seen = [0]
        limit = self.limit
        deadline = time.monotonic() + self.settings.body_timeout_seconds
        whole = [False]

        async def bounded() -> Message:
            if whole[0]:  # the body is in: what comes now is the disconnect, whenever
                return await receive()
            try:
                async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                    message = await receive()
            except TimeoutError:
                raise Refused(
                    408,
                    "the request body did not arrive in time ([serve] body_timeout_seconds)",
                    "invalid_request_error",
                    "body_timeout",
                ) from None
            if message["type"] == "http.request":
                seen[0] += len(message.get("body", b""))
                if seen[0] > limit:
                    raise _too_large(limit)
                whole[0] = not message.get("more_body", False)
            return message

        return bounded

    def _write_log(self, scope: Scope, status: int, started: float, entry: LogEntry) -> None:
        ms = (time.perf_counter() - started) * 1000
        when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        # The path as sent (still percent-encoded) and every field escaped: a request
        # can write no line, and no terminal control, of its own into the log.
        raw = scope.get("raw_path") or str(scope.get("path", "")).encode()
        path = _printable(raw.decode("latin-1"))
        line = (
            f"{when} {_printable(str(scope.get('method')))} {path} {status} {ms:.0f}ms "
            f"session={_printable(entry.session)} {_printable(entry.placement, spaces=True)} "
            f"token={_printable(entry.token)}"
            + (f" left-out={_printable(entry.left_out)}" if entry.left_out else "")
            + "\n"
        )
        try:
            sys.stderr.write(line)
            sys.stderr.flush()
        except (OSError, ValueError):
            pass  # a closed stderr loses the log, never the request


def _printable(text: str, spaces: bool = False) -> str:
    """Control characters (and, with `spaces`, spaces) escaped, as `repr` writes them."""
    if text.isprintable() and (spaces or " " not in text):
        return text
    out = []
    for c in text:
        if c.isprintable() and (spaces or c != " "):
            out.append(c)
        else:
            out.append(repr(c)[1:-1] if c != " " else "%20")
    return "".join(out)


def _own(scope: Scope, host: str | None, origin: str) -> bool:
    """The server's own page (its Host already checked): `http://HOST` as the request
    names it. A page of another port or name is another origin."""
    return host is not None and origin == f"{scope.get('scheme', 'http')}://{host}"


def _too_large(limit: int) -> Refused:
    return Refused(
        413,
        f"the request body is larger than {limit} bytes ([serve] max_body_bytes)",
        "invalid_request_error",
        "body_too_large",
    )


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers", ())}


async def _answer(send: Send, refused: Refused) -> None:
    import json

    body = json.dumps(error_body(refused.message, refused.kind, refused.code)).encode()
    await send(
        {
            "type": "http.response.start",
            "status": refused.status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
