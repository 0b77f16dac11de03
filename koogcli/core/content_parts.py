"""Content parts a client sends besides text (images, audio, files), kept as they came.

A message's `content` is always its text (the text parts joined): what preprocessors,
memory and search read. When a client sends other parts too, the whole list of parts, in
OpenAI's chat-completions shape, is kept in `meta["parts"]` and sent to the upstream
unchanged; a message without other parts has no `parts` at all (SPEC §6).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from koogcli.core.messages import Message

KEY = "parts"
TEXT = "text"


def parts(m: Message) -> list[dict[str, Any]] | None:
    """The message's parts as sent, or None when it is text alone."""
    raw = m.meta.get(KEY)
    if isinstance(raw, list) and all(isinstance(p, dict) for p in raw):
        return raw
    return None


def joined_text(given: Sequence[Mapping[str, Any]]) -> str:
    return "".join(str(p.get("text") or "") for p in given if p.get("type") == TEXT)


def has_media(given: Sequence[Mapping[str, Any]]) -> bool:
    return any(p.get("type") != TEXT for p in given)


def with_text(given: list[dict[str, Any]], text: str) -> list[dict[str, Any]]:
    """The parts to send for a message whose text is `text`: `given` itself when its text
    parts join to it, else (a redact preprocessor changed it) one text part holding `text`
    where the first text part was, the others left out (none at all for empty text)."""
    if joined_text(given) == text:
        return given
    out: list[dict[str, Any]] = []
    placed = False
    for part in given:
        if part.get("type") != TEXT:
            out.append(part)
        elif not placed:
            placed = True
            if text:
                out.append({**part, "text": text})  # keeps the part's other keys
    if not placed and text:
        out.insert(0, {"type": TEXT, "text": text})
    return out


def labels(m: Message) -> list[str]:
    """A label for each part of `m` that is not text, in order; [] for text alone."""
    given = parts(m)
    if given is None:
        return []
    return [d.label() for p in given if (d := media(p)) is not None]


@dataclass(frozen=True, slots=True)
class Media:
    """What a person is told of a part that is not text: `[image: image/png, 34 KB]`."""

    kind: str  # image, audio, file
    mime: str | None
    size: int | None  # decoded bytes, when the part carries its data
    url: str | None  # an image's URL (a data: URL when the client sent the bytes)
    name: str | None = None

    def label(self) -> str:
        what = [self.mime or self.name or _origin(self.url) or "?"]
        if self.size is not None:
            what.append(_size(self.size))
        return f"[{self.kind}: {', '.join(what)}]"


def media(part: Mapping[str, Any]) -> Media | None:
    """A non-text part described; None for text."""
    kind = part.get("type")
    if kind == TEXT:
        return None
    if kind == "image_url":
        image = part.get("image_url")
        url = image.get("url") if isinstance(image, dict) else image
        url = url if isinstance(url, str) else None
        mime, size = _data_url(url)
        return Media("image", mime, size, url)
    if kind == "input_audio":
        audio = part.get("input_audio")
        data = audio.get("data") if isinstance(audio, dict) else None
        fmt = audio.get("format") if isinstance(audio, dict) else None
        return Media("audio", f"audio/{fmt}" if isinstance(fmt, str) else None, _b64(data), None)
    if kind == "file":
        file = part.get("file")
        file = file if isinstance(file, dict) else {}
        mime, size = _data_url(file.get("file_data"))
        name = file.get("filename") if isinstance(file.get("filename"), str) else None
        return Media("file", mime, size, None, name or file.get("file_id"))
    return Media(str(kind), None, None, None)


def _origin(url: str | None) -> str | None:
    """`from host` for an image by URL: its host alone (a path or query may hold a token)."""
    if url is None or url.startswith("data:"):
        return None
    host = urlsplit(url).hostname
    return f"from {host}" if host else None


def _data_url(url: object) -> tuple[str | None, int | None]:
    if not isinstance(url, str) or not url.startswith("data:"):
        return None, None
    head, _, data = url[5:].partition(",")
    mime = head.split(";", 1)[0] or None
    return mime, _b64(data) if head.endswith(";base64") else len(data)


def _b64(data: object) -> int | None:
    if not isinstance(data, str):
        return None
    import base64  # only for a part's size: not at every start
    import binascii

    try:
        return len(base64.b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        return None


def _size(n: int) -> str:
    if n < 1000:
        return f"{n} B"
    if n < 1_000_000:
        return f"{round(n / 1000)} KB"
    return f"{n / 1_000_000:.1f} MB"


def sniffed(data: bytes) -> str | None:
    """The media type of a file by its first bytes: the images, PDF and audio a model can
    take as content parts (None: anything else, text included)."""
    head = data[:16]
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if head.startswith(b"RIFF") and head[8:12] == b"WEBP":
        return "image/webp"
    if head.startswith(b"%PDF-"):
        return "application/pdf"
    if head.startswith(b"RIFF") and head[8:12] == b"WAVE":
        return "audio/wav"
    if head.startswith(b"ID3") or (len(head) > 1 and head[0] == 0xFF and head[1] & 0xE0 == 0xE0):
        return "audio/mpeg"
    return None


def part_for(name: str, mime: str, data: bytes) -> dict[str, Any]:
    """A file as a content part in chat completions' shape: an image as `image_url`, a PDF
    as `file`, audio as `input_audio` (each wire client writes its own protocol's form)."""
    import base64

    encoded = base64.b64encode(data).decode("ascii")
    if mime.startswith("image/"):
        return {"type": "image_url", "image_url": {"url": f"data:{mime};base64,{encoded}"}}
    if mime.startswith("audio/"):
        fmt = "wav" if mime == "audio/wav" else "mp3"
        return {"type": "input_audio", "input_audio": {"data": encoded, "format": fmt}}
    return {
        "type": "file",
        "file": {"filename": name, "file_data": f"data:{mime};base64,{encoded}"},
    }


# Per-block annotations clients add and move between requests; not part of the meaning.
_ANNOTATIONS = frozenset({"cache_control"})


def media_meaning(m: Message) -> list[object]:
    """The non-text parts of a message without annotations, to compare resent messages."""
    given = parts(m) or []
    return [
        {k: v for k, v in p.items() if k not in _ANNOTATIONS}
        for p in given
        if p.get("type") != TEXT
    ]
