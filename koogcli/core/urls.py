"""URLs as shown to people: credentials inside a URL (`https://user:secret@host/v1`,
`?api_key=...`) are masked in every message and listing koog prints (§5.8)."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

_SECRET_PARAMS = ("key", "token", "secret", "password", "passwd", "auth", "sig")


def masked(url: str) -> str:
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    netloc = parts.netloc
    if "@" in netloc:
        netloc = "***@" + netloc.rsplit("@", 1)[1]
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode(
            [(k, "***" if any(s in k.lower() for s in _SECRET_PARAMS) else v) for k, v in pairs],
            safe="*",
        )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def is_loopback(url: str) -> bool:
    """Whether the URL names this machine (a local server: Ollama, LM Studio, llama.cpp)."""
    try:
        host = urlsplit(url).hostname or ""
    except ValueError:
        return False
    return host in ("localhost", "::1") or host.startswith("127.")
