"""The character card inside a PNG image, read with a bounded chunk reader.

A card PNG carries its card as base64 of the card's UTF-8 JSON in a text chunk: keyword
``chara`` for V2 (github.com/malfoyslastname/character-card-spec-v2, spec_v2.md, "PNG") and
``ccv3`` for V3 (github.com/kwaroran/character-card-spec-v3, SPEC_V3.md, "Embedding Methods":
when both are there, ``ccv3`` wins). The specs say ``tEXt``; a tool that compresses it writes
``zTXt`` or ``iTXt`` (PNG 1.2, sections 4.2.3.1-3 of www.w3.org/TR/png), read here too.

Why not Pillow: it decodes an image's header and keeps every text chunk it meets (up to its own
limits) to hand back an image, when all an import needs is one text chunk and never a pixel. The
chunk layout (length, type, data, CRC: PNG 1.2 section 3.2) is simple enough to walk here, under
bounds chosen for a hostile file: the whole file's size (checked before this), the number of
chunks, each text chunk's size, the size a compressed one may inflate to, a CRC on what is read,
and a file cut short refused by name. Pixel data (``IDAT``) is stepped over, never read.
"""

from __future__ import annotations

import base64
import binascii
import struct
import zlib

from engine.library.reading.errors import ImportRejected

SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: The card chunks' keywords, the one to prefer first.
KEYWORDS = (b"ccv3", b"chara")
#: More chunks than a real image has: pixel data split into 8 KiB chunks (the common size) of a
#: 20 MiB image is 2,560.
MAX_CHUNKS = 4_096
_TEXT_TYPES = (b"tEXt", b"zTXt", b"iTXt")


def is_png(data: bytes) -> bool:
    return data.startswith(SIGNATURE)


def card_json_from_png(data: bytes, *, max_json_bytes: int) -> bytes:
    """The card's JSON bytes from a card PNG (the ``ccv3`` chunk, else ``chara``); raises
    ``ImportRejected`` saying what is wrong with the file."""
    # Base64 is 4 bytes for every 3: the largest chunk that can hold a card within the cap.
    max_chunk = (max_json_bytes + 2) // 3 * 4 + 1024
    found: dict[bytes, bytes] = {}
    offset = len(SIGNATURE)
    for count in range(MAX_CHUNKS + 1):
        if count == MAX_CHUNKS:
            raise ImportRejected(
                f"The PNG holds more than {MAX_CHUNKS:,} chunks, more than any real image: "
                "it is not read."
            )
        if offset + 8 > len(data):
            raise ImportRejected(_cut_short(offset))
        length, kind = struct.unpack(">I4s", data[offset : offset + 8])
        start, end = offset + 8, offset + 8 + length
        if end + 4 > len(data):
            raise ImportRejected(_cut_short(offset))
        if kind == b"IEND":
            break
        if kind in _TEXT_TYPES:
            body = data[start:end]
            keyword = body.split(b"\0", 1)[0]
            # Only the first chunk of each keyword is read: a file of many (each a bomb within
            # the cap) costs no more than one.
            if keyword in KEYWORDS and keyword not in found:
                if length > max_chunk:
                    raise ImportRejected(
                        f"The PNG's card ({keyword.decode()} chunk) is {length / 1024:,.0f} KiB; "
                        f"a card may have at most {max_json_bytes / 1024:,.0f} KiB of JSON."
                    )
                (crc,) = struct.unpack(">I", data[end : end + 4])
                if zlib.crc32(data[offset + 4 : end]) != crc:
                    raise ImportRejected(
                        f"The PNG's {keyword.decode()} chunk is damaged (its checksum does not "
                        "match): save or download the card again."
                    )
                found[keyword] = _text_of(kind, body, keyword, max_chunk)
        offset = end + 4
    for keyword in KEYWORDS:
        if keyword in found:
            return _unbase64(found[keyword], keyword, max_json_bytes)
    raise ImportRejected(
        "This PNG image holds no character card (no chara or ccv3 text chunk). Attach the "
        "card as its creator shared it, or its JSON export."
    )


def _text_of(kind: bytes, body: bytes, keyword: bytes, max_bytes: int) -> bytes:
    """The text of a ``tEXt``, ``zTXt`` or ``iTXt`` chunk, inflated within ``max_bytes``."""
    rest = body[len(keyword) + 1 :]
    if kind == b"tEXt":
        return rest
    if kind == b"zTXt":
        # Compression method (0: zlib), then the compressed text.
        return _inflate(rest[1:], keyword, max_bytes)
    # iTXt: compression flag, method, language tag\0, translated keyword\0, text.
    if len(rest) < 2:
        raise ImportRejected(f"The PNG's {keyword.decode()} chunk is cut short.")
    flag, tail = rest[0], rest[2:]
    parts = tail.split(b"\0", 2)
    if len(parts) < 3:
        raise ImportRejected(f"The PNG's {keyword.decode()} chunk is malformed.")
    text = parts[2]
    return _inflate(text, keyword, max_bytes) if flag else text


def _inflate(data: bytes, keyword: bytes, max_bytes: int) -> bytes:
    """Decompress at most ``max_bytes`` (one byte more says there is more): a small chunk that
    would inflate to gigabytes is refused, never inflated."""
    inflater = zlib.decompressobj()
    try:
        out = inflater.decompress(data, max_bytes + 1)
    except zlib.error:
        raise ImportRejected(
            f"The PNG's {keyword.decode()} chunk is compressed but its data is damaged."
        ) from None
    if len(out) > max_bytes or inflater.unconsumed_tail:
        raise ImportRejected(
            f"The PNG's {keyword.decode()} chunk inflates to more than "
            f"{max_bytes / 1024:,.0f} KiB, more than any card: it is not read."
        )
    return out


def _unbase64(text: bytes, keyword: bytes, max_bytes: int) -> bytes:
    try:
        decoded = base64.b64decode(b"".join(text.split()), validate=True)
    except (binascii.Error, ValueError):
        raise ImportRejected(
            f"The PNG's {keyword.decode()} chunk is not base64 text, as a card's must be."
        ) from None
    if len(decoded) > max_bytes:
        raise ImportRejected(
            f"The PNG's card is {len(decoded) / 1024:,.0f} KiB of JSON; at most "
            f"{max_bytes / 1024:,.0f} KiB are accepted."
        )
    return decoded


def _cut_short(offset: int) -> str:
    return (
        f"The PNG is cut short (a chunk at byte {offset:,} runs past the end of the file): "
        "download the card again."
    )
