"""Small real images for tests that send or show content parts (no Pillow needed)."""

from __future__ import annotations

import base64
import struct
import zlib
from typing import Any


def square_png(size: int = 64, rgb: tuple[int, int, int] = (220, 20, 20)) -> bytes:
    """A square PNG, `size` pixels a side, of one colour: 8-bit RGB, no interlace, one IDAT chunk."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    row = b"\x00" + bytes(rgb) * size  # filter type 0, then the pixels
    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(row * size, 9))
        + chunk(b"IEND", b"")
    )


def data_url(data: bytes, mime: str = "image/png") -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def image_part(url: str) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": url}}


def has_run(png: bytes, rgb: tuple[int, int, int], length: int) -> bool:
    """Whether a screenshot (8-bit RGB or RGBA PNG, as Chromium writes) has a row holding
    `length` pixels of exactly `rgb` side by side: an image of that colour was drawn."""
    width, height, depth, colour = struct.unpack(">IIBB", png[16:26])
    if depth != 8 or colour not in (2, 6):
        raise ValueError(f"not an 8-bit RGB(A) PNG: depth {depth}, colour type {colour}")
    data, at = bytearray(), 8
    while at < len(png):
        (size,) = struct.unpack(">I", png[at : at + 4])
        if png[at + 4 : at + 8] == b"IDAT":
            data += png[at + 8 : at + 8 + size]
        at += 12 + size
    raw, step = zlib.decompress(bytes(data)), 3 if colour == 2 else 4
    stride, wanted = 1 + width * step, bytes(rgb)
    previous = bytearray(width * step)
    for y in range(height):
        row = bytearray(raw[y * stride + 1 : (y + 1) * stride])
        _unfilter(raw[y * stride], row, previous, step)
        run = 0
        for x in range(0, len(row), step):
            run = run + 1 if row[x : x + 3] == wanted else 0
            if run >= length:
                return True
        previous = row
    return False


def _unfilter(kind: int, row: bytearray, previous: bytearray, step: int) -> None:
    """PNG's five row filters undone in place (None, Sub, Up, Average, Paeth)."""
    for i in range(len(row)):
        left = row[i - step] if i >= step else 0
        up, corner = previous[i], previous[i - step] if i >= step else 0
        if kind == 1:
            row[i] = (row[i] + left) & 0xFF
        elif kind == 2:
            row[i] = (row[i] + up) & 0xFF
        elif kind == 3:
            row[i] = (row[i] + (left + up) // 2) & 0xFF
        elif kind == 4:
            p = left + up - corner
            pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
            row[i] = (
                row[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)
            ) & 0xFF
