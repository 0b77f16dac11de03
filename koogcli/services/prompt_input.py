"""The message of a one-shot turn (SPEC §2): the prompt words, then piped standard input
after a blank line, then each `--attach` file as a fenced block headed by its name.

Attachments are checked before any request: a file that cannot be read, is not UTF-8 text
(or holds NUL bytes), or is larger than `chat.max_attachment_bytes` is a usage error.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from koogcli.core.errors import UsageError

STDIN = "-"


@dataclass(frozen=True)
class Attachment:
    name: str
    text: str


def attachment(name: str, data: bytes, limit: int, size: int | None = None) -> Attachment:
    """`data` may be cut at `limit + 1` bytes; `size` is then the whole file's, when known."""
    if len(data) > limit:
        whole = f"{size:,} bytes" if size is not None else f"over {limit:,} bytes"
        raise UsageError(
            f"attachment {name} is {whole}, over chat.max_attachment_bytes ({limit:,})",
            hint="attach a smaller file, or raise chat.max_attachment_bytes",
        )
    try:
        if b"\x00" in data:
            raise UnicodeError("NUL byte")
        text = data.decode("utf-8")
    except UnicodeError:
        raise UsageError(
            f"attachment {name} is not a text file", hint="attach UTF-8 text only"
        ) from None
    return Attachment(name, text)


def read_attachment(path: str, limit: int) -> Attachment:
    file = Path(path).expanduser()
    try:
        with file.open("rb") as handle:
            data = handle.read(limit + 1)  # never more than the limit into memory
            size = os.fstat(handle.fileno()).st_size if len(data) > limit else None
    except OSError as exc:
        raise UsageError(f"cannot read attachment {path}: {exc.strerror}") from exc
    # A pipe or device has no size to tell; it is then "over the limit".
    return attachment(file.name, data, limit, size if size and size > limit else None)


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
    parts += [fence(a) for a in attachments]
    text = "\n\n".join(parts)
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
