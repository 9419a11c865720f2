"""Reading an uploaded file as JSON, strictly and within bounds.

Uploaded files come from anywhere, so the reader refuses what a lenient one would guess at:
bytes that are not UTF-8 (or UTF-16 with its byte-order mark), a file cut short, a key given
twice in one object (which value would win is a guess), ``NaN``, a number longer than any real
one (a 5,000-digit integer would otherwise stop Python's own reader, whose limit is 4,300
digits, and a huge float is infinity), and anything larger, longer or deeper than the caps.
Every refusal is an ``ImportRejected`` whose message says what was wrong and where, so nothing
but that error ever reaches a player.
"""

from __future__ import annotations

import codecs
import json
import math
import re
from dataclasses import dataclass
from typing import Any

from engine.library.reading.errors import ImportRejected
from engine.platform.sanitise import sanitise_code, sanitise_json

#: Deeper than any real export (AI Dungeon's options nest two or three levels).
MAX_DEPTH = 40
#: Longest array anywhere in a file (story cards are capped lower again).
MAX_ARRAY_ITEMS = 10_000
#: Values in the whole file, so a flat file of tiny objects cannot run up memory either.
MAX_VALUES = 1_000_000
#: Digits in one integer: ids and counts in real exports are 20 at most (a snowflake is 19).
MAX_INT_DIGITS = 100


@dataclass(frozen=True, slots=True)
class JsonCaps:
    max_bytes: int
    max_depth: int = MAX_DEPTH
    max_array_items: int = MAX_ARRAY_ITEMS
    max_values: int = MAX_VALUES


#: The bytes looked at for a zero byte, which tells binary data from text in another encoding.
BINARY_PROBE = 4096


def decode_text(data: bytes) -> str:
    """The file's text: UTF-8 (a byte-order mark is dropped) or UTF-16 with its mark."""
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8) :]
    elif data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError as error:
            raise ImportRejected(
                f"The file says it is UTF-16 text but byte {error.start:,} is not: "
                "save it again as UTF-8."
            ) from None
    if data.startswith(b"\x89PNG"):
        raise ImportRejected(
            "This is a PNG image, not a JSON file. Export the card or scenario as JSON and "
            "attach that."
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        if b"\x00" in data[:BINARY_PROBE]:
            # No text file holds a zero byte: this is an image, an archive or a damaged file,
            # and "save it as UTF-8" would send the player looking for a setting.
            raise ImportRejected(
                "The file is not text: it holds binary data (another kind of file, or a "
                "damaged one). Attach the file as it was exported."
            ) from None
        line = data[: error.start].count(b"\n") + 1
        raise ImportRejected(
            f"The file is not UTF-8 text: byte {error.start:,} (line {line}) is "
            f"0x{data[error.start]:02x}. Save it again as UTF-8 (JSON files always are)."
        ) from None


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ImportRejected(
                f"The key “{key[:60]}” appears twice in one object of the file; which one is "
                "meant is a guess, so nothing was imported. Remove one of them."
            )
        out[key] = value
    return out


def _no_constants(name: str) -> Any:
    raise ImportRejected(f"The file uses {name}, which is not standard JSON.")


class _NumberTooLong(Exception):
    """A number no export holds; where it is gets found after the reader stops."""


def _bounded_int(digits: str) -> int:
    if len(digits.lstrip("-")) > MAX_INT_DIGITS:
        raise _NumberTooLong
    return int(digits)


def _finite_float(digits: str) -> float:
    value = float(digits)
    if not math.isfinite(value):
        raise _NumberTooLong
    return value


#: A JSON string (skipped) or a number: the first number matched is the first number in the file.
_STRING_OR_NUMBER = re.compile(r'"(?:[^"\\]|\\.)*"|-?\d[\d.eE+-]*')


def loads(text: str, *, what: str = "The file") -> Any:
    """``json.loads`` with the reader's rules: no key twice, no ``NaN``, no number too long to
    read (refused as ``what`` having one). Raises ``json.JSONDecodeError`` for text that is not
    JSON, for the caller to word."""
    try:
        return json.loads(
            text,
            object_pairs_hook=_no_duplicates,
            parse_constant=_no_constants,
            parse_int=_bounded_int,
            parse_float=_finite_float,
        )
    except _NumberTooLong:
        raise _number_too_long(text, what) from None


def _number_too_long(text: str, what: str) -> ImportRejected:
    line = 0
    for match in _STRING_OR_NUMBER.finditer(text):
        token = match.group(0)
        if token.startswith('"'):
            continue
        try:
            _finite_float(token) if any(c in token for c in ".eE") else _bounded_int(token)
        except (_NumberTooLong, ValueError):
            line = text.count("\n", 0, match.start()) + 1
            break
    where = f" (line {line})" if line else ""
    return ImportRejected(
        f"{what} has a number too long to read{where}: at most {MAX_INT_DIGITS} digits are "
        "accepted, and no export writes a longer one. Check the file, or export it again."
    )


def load_json(data: bytes, caps: JsonCaps) -> Any:
    """Parse ``data`` as one JSON document within ``caps``."""
    if len(data) > caps.max_bytes:
        raise ImportRejected(
            f"The file is {_size(len(data))}; the largest accepted is {_size(caps.max_bytes)}."
        )
    text = decode_text(data)
    if not text.strip():
        raise ImportRejected("The file is empty.")
    start = text.lstrip()[:1]
    if start not in ("{", "["):
        raise ImportRejected(
            "The file is not JSON (it should start with “{” or “[”). Attach the .json file the "
            "export gave you."
        )
    try:
        value = loads(text)
    except RecursionError:
        raise ImportRejected(
            f"The file's JSON is nested too deeply (more than {caps.max_depth} levels)."
        ) from None
    except json.JSONDecodeError as error:
        if error.pos >= len(text.rstrip()) or _unclosed(text):
            raise ImportRejected(
                f"The file ends before its JSON does (line {error.lineno}): it looks cut short. "
                "Export it again."
            ) from None
        raise ImportRejected(
            f"The file is not valid JSON: {error.msg.lower()} (line {error.lineno}, "
            f"column {error.colno})."
        ) from None
    _check_shape(value, caps)
    # JSON may escape NUL (``\u0000``), which no PostgreSQL text holds, and half of a UTF-16
    # pair alone (``\ud800``), which is not text at all: every string of the file is made
    # storable here, whatever it is (code included); readers sanitise the texts they keep.
    return sanitise_json(value, sanitise_code)


def _unclosed(text: str) -> bool:
    """Whether the text ends inside a string or with brackets still open: a file cut short."""
    depth, in_string, escaped = 0, False, False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
    return in_string or depth > 0


def _check_shape(value: Any, caps: JsonCaps) -> None:
    """Depth, array lengths and the number of values, walked without recursion."""
    stack: list[tuple[Any, int, str]] = [(value, 1, "")]
    seen = 0
    while stack:
        item, depth, where = stack.pop()
        seen += 1
        if seen > caps.max_values:
            raise ImportRejected(f"The file holds more than {caps.max_values:,} values.")
        if depth > caps.max_depth:
            raise ImportRejected(
                f"The file's JSON is nested too deeply (more than {caps.max_depth} levels, "
                f"at {where})."
            )
        if isinstance(item, list):
            if len(item) > caps.max_array_items:
                raise ImportRejected(
                    f"{where or 'The file'} is a list of {len(item):,} items; at most "
                    f"{caps.max_array_items:,} are accepted."
                )
            stack.extend((child, depth + 1, f"{where}[{i}]") for i, child in enumerate(item))
        elif isinstance(item, dict):
            stack.extend(
                (child, depth + 1, f"{where}.{key}" if where else str(key))
                for key, child in item.items()
            )


def _size(n: int) -> str:
    if n >= 1024 * 1024:
        return f"{n / (1024 * 1024):.1f} MiB"
    if n >= 1024:
        return f"{n / 1024:.0f} KiB"
    return f"{n} bytes"
