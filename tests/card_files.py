"""Character card PNGs made for tests: a 1×1 image with the card in a text chunk, laid out as
PNG 1.2 says (signature, then chunks of length, type, data and CRC; www.w3.org/TR/png) and as
the card specs embed it (base64 of the card's UTF-8 JSON under the keyword ``chara`` for V2,
``ccv3`` for V3)."""

from __future__ import annotations

import base64
import json
import struct
import zlib
from typing import Any

SIGNATURE = b"\x89PNG\r\n\x1a\n"


def chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def image(*text_chunks: bytes, end: bool = True) -> bytes:
    """A 1×1 grey PNG with the given chunks after its pixels (where SillyTavern writes the
    card), and its end unless told not to."""
    header = chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0))
    pixels = chunk(b"IDAT", zlib.compress(b"\x00\x80"))
    return (
        SIGNATURE + header + pixels + b"".join(text_chunks) + (chunk(b"IEND", b"") if end else b"")
    )


def card_text(card: dict[str, Any]) -> bytes:
    return base64.b64encode(json.dumps(card).encode("utf-8"))


def text_chunk(keyword: bytes, text: bytes) -> bytes:
    return chunk(b"tEXt", keyword + b"\0" + text)


def ztxt_chunk(keyword: bytes, text: bytes) -> bytes:
    return chunk(b"zTXt", keyword + b"\0\0" + zlib.compress(text))


def itxt_chunk(keyword: bytes, text: bytes, *, compressed: bool) -> bytes:
    body = zlib.compress(text) if compressed else text
    return chunk(b"iTXt", keyword + b"\0" + bytes([int(compressed), 0]) + b"\0\0" + body)


def card_png(card: dict[str, Any], keyword: bytes = b"chara") -> bytes:
    return image(text_chunk(keyword, card_text(card)))
