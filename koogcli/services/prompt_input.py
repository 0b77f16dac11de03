"""The message of a one-shot turn (SPEC §2): the prompt words, then piped standard input
after a blank line, then each text `--attach` file as a fenced block headed by its name;
an image, PDF or audio file (told by its content) goes as a content part instead.

Attachments are checked before any request: a file or URL that cannot be read, is neither
such a file nor UTF-8 text (or holds NUL bytes), or is larger than
`chat.max_attachment_bytes` is a usage error.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from koogcli.core import content_parts
from koogcli.core.errors import UsageError

STDIN = "-"


@dataclass(frozen=True)
class Attachment:
    name: str
    text: str  # a text file's ("" for media)
    part: dict[str, Any] | None = None  # an image's, PDF's or audio's content part


def attachment(name: str, data: bytes, limit: int, size: int | None = None) -> Attachment:
    """`data` may be cut at `limit + 1` bytes; `size` is then the whole file's, when known."""
    if len(data) > limit:
        whole = f"{size:,} bytes" if size is not None else "larger"
        raise UsageError(
            f"attachment {name} is {whole}, over chat.max_attachment_bytes ({limit:,} bytes)",
            hint="attach a smaller file, or raise chat.max_attachment_bytes",
        )
    mime = content_parts.sniffed(data)
    if mime is not None:
        return Attachment(name, "", content_parts.part_for(name, mime, data))
    try:
        if b"\x00" in data:
            raise UnicodeError("NUL byte")
        text = data.decode("utf-8")
    except UnicodeError:
        raise UsageError(
            f"attachment {name} is neither text nor an image, PDF or audio file",
            hint="attach UTF-8 text, png/jpeg/gif/webp, pdf, wav or mp3",
        ) from None
    return Attachment(name, text)


def read_attachment(path: str, limit: int) -> Attachment:
    if path.startswith(("http://", "https://")):
        return _fetched(path, limit)
    file = Path(path).expanduser()
    try:
        with file.open("rb") as handle:
            data = handle.read(limit + 1)  # never more than the limit into memory
            size = os.fstat(handle.fileno()).st_size if len(data) > limit else None
    except OSError as exc:
        raise UsageError(f"cannot read attachment {path}: {exc.strerror}") from exc
    # A pipe or device has no size to tell; it is then "over the limit".
    return attachment(file.name, data, limit, size if size and size > limit else None)


def _fetched(url: str, limit: int) -> Attachment:
    """`-a https://...`: fetched with the same bound (never more than it read), in 30 s."""
    import urllib.error
    import urllib.request
    from urllib.parse import urlsplit

    name = urlsplit(url).path.rsplit("/", 1)[-1] or urlsplit(url).hostname or "url"
    request = urllib.request.Request(url, headers={"User-Agent": "koog"})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            data = answer.read(limit + 1)
            length = answer.headers.get("content-length", "")
    except (urllib.error.URLError, OSError, ValueError) as exc:
        said = getattr(exc, "reason", None) or exc
        raise UsageError(f"cannot fetch attachment {url}: {said}") from None
    size = int(length) if length.isdigit() and int(length) > limit else None
    return attachment(name, data, limit, size)


def media_parts(attachments: Sequence[Attachment]) -> tuple[dict[str, Any], ...]:
    return tuple(a.part for a in attachments if a.part is not None)


def fence(item: Attachment) -> str:
    ticks = "```"
    while ticks in item.text:  # a fence longer than any run of backticks inside
        ticks += "`"
    body = item.text if item.text.endswith("\n") else item.text + "\n"
    return f"{item.name}:\n{ticks}\n{body}{ticks}"


def compose(
    prompt: str, piped: str | None, attachments: Sequence[Attachment], limit: int | None = None
) -> str:
    """The message a turn sends; over `limit` bytes (chat.max_input_bytes) it is a usage
    error, before anything is written."""
    parts = [p for p in (prompt, piped.strip("\n") if piped else None) if p]
    parts += [fence(a) for a in attachments if a.part is None]
    text = "\n\n".join(parts)
    if not text.strip() and any(a.part is not None for a in attachments):
        return ""  # media alone: the parts are the message
    if not text.strip():
        raise UsageError(
            "nothing to send: the message is empty",
            hint="give the prompt as arguments (`koog chat hello`) or pipe text in",
        )
    size = len(text.encode("utf-8", "surrogatepass"))
    if limit is not None and size > limit:
        raise UsageError(
            f"the message is {size:,} bytes, over chat.max_input_bytes ({limit:,})",
            hint="send less, or raise chat.max_input_bytes",
        )
    return text
