"""Who the page serves and what may act through it (SPEC §6 "The page").

- **Who**: the API's rule. Where a token is needed, the page asks for it once and keeps it
  in an HttpOnly, SameSite=Strict cookie, which stands in for `Authorization` on the
  page's own routes only.
- **Acting**: every action is a POST from the page's own origin (the guard already turned
  away any other `Origin`; here one must be sent, and be this server's) carrying the
  per-page token: a random nonce and its time, signed with the server's secret for the
  grant that loaded the page. A page of another site can neither read one nor make one.
- **Shown, never run**: every answer says `Content-Security-Policy: default-src 'self'`
  (no inline script, nothing from elsewhere, not framed) and is not sniffed or cached.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Mapping

from starlette.requests import Request

from koogcli.server.auth import Grant
from koogcli.server.errors import Refused
from koogcli.server.state import ServerState

COOKIE = "koog_token"
TOKEN_HEADER = "x-koog-page-token"
TOKEN_AGE_SECONDS = 7 * 24 * 3600
CSP = (
    "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'; "
    "object-src 'none'"
)
HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}


def grant(state: ServerState, request: Request) -> Grant:
    """The request's grant; the cookie stands for a bearer token the request did not send."""
    headers: Mapping[str, str] = request.headers
    kept = request.cookies.get(COOKIE)
    if kept and "authorization" not in headers:
        headers = {**headers, "authorization": f"Bearer {kept}"}
    return state.grant(headers)


def token_needed(state: ServerState) -> bool:
    return bool(state.settings.tokens) or state.kept_token is not None


def page_token(secret: bytes, who: Grant) -> str:
    nonce, stamp = secrets.token_urlsafe(12), str(int(time.time()))
    return f"{nonce}.{stamp}.{_signature(secret, nonce, stamp, who.name)}"


def check_action(request: Request, secret: bytes, who: Grant) -> None:
    """A POST the page itself sent: its own origin, and a token it was given."""
    origin = request.headers.get("origin")
    if origin is None or origin != own_origin(request):
        raise Refused(
            403,
            "page actions must come from the page itself (no Origin, or another one)",
            "permission_error",
            "origin_not_allowed",
        )
    if request.headers.get("sec-fetch-site") not in (None, "same-origin"):
        raise Refused(403, "page actions must be same-origin", "permission_error", "cross_site")
    nonce, _, rest = request.headers.get(TOKEN_HEADER, "").partition(".")
    stamp, _, signature = rest.partition(".")
    fresh = stamp.isdigit() and 0 <= time.time() - int(stamp) <= TOKEN_AGE_SECONDS
    expected = _signature(secret, nonce, stamp, who.name)
    if not (nonce and fresh and hmac.compare_digest(signature.encode(), expected.encode())):
        raise Refused(
            403,
            "this page's token is missing or stale; reload the page",
            "permission_error",
            "page_token",
        )


def own_origin(request: Request) -> str:
    return f"{request.url.scheme}://{request.headers.get('host', '')}"


def _signature(secret: bytes, nonce: str, stamp: str, who: str) -> str:
    said = f"{nonce}.{stamp}.{who}".encode()
    return hmac.new(secret, said, hashlib.sha256).hexdigest()[:32]
