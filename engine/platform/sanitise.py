"""Text at the engine's boundary: what players (and models) send in, and what goes back out.

Everything a player types reaches the engine through a front end that passes it on as it came:
Discord's JSON may carry any code point, ``\\u0000`` and a lone ``\\ud800`` included. Some of it
cannot be kept or sent on: PostgreSQL ``text`` cannot hold NUL (every write fails), and a lone
surrogate is not Unicode at all (encoding it as UTF-8 for the database, or for the model's HTTP
request, raises). So text entering the engine goes through :func:`sanitise` once, where it
enters (an action when it is made, a form's value when its service takes it, an imported field
when it is read), and everything after that may assume it is clean.

What :func:`sanitise` changes, and why no more:

* NUL and the other C0 controls except tab and line feed, DEL and the C1 controls are dropped:
  none is text anyone writes, a model reads them as noise, and ESC and its kin would drive the
  terminal of whoever reads the console or the log. ``\\r\\n`` and a lone ``\\r`` become ``\\n``.
* A lone surrogate becomes U+FFFD, the replacement character, where the text had something
  broken; a surrogate pair that arrived as two code points is joined into its character.
* Everything else stays: emoji and their joiners, combining marks, every script, and the
  bidirectional controls (U+200E/F, U+202A-E, U+2066-9). Those are how people writing Arabic,
  Hebrew or Persian get mixed-direction text right, and the harm they could do is bounded:
  the Unicode bidirectional algorithm ends every embedding, override and isolate at the end of
  its paragraph, so a player can reorder only the paragraph they wrote, and on Discord every
  message is laid out on its own.

Script code is code: it keeps every character it was written with except NUL, which no
database column holds (:func:`sanitise_code`).

Going out, :func:`echo` is the one way player text is quoted back in a reply: sanitised, and
cut with an ellipsis to the limit of the Discord field it goes into, so a long name or query can
never push a reply over Discord's limits (a message over them is refused whole: 50035 Invalid
Form Body).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

#: The largest id a row has: ids are PostgreSQL ``integer`` columns (SQLite's hold more, but
#: the same bound holds on both). A number typed by a player above it is no row's id, and is
#: never put in a query (PostgreSQL refuses it as out of range; SQLite overflows at 2**63).
ROW_ID_MAX = 2**31 - 1
#: The largest value of a BIGINT column (those holding Discord snowflakes, such as a request's
#: interaction id).
BIG_ID_MAX = 2**63 - 1

#: The most of a player's text quoted inside a sentence of a reply ("no scenario matches
#: “…”"): enough to recognise it, and the length Discord gives names (channels, option labels).
QUOTE_MAX = 100

_NEWLINES = re.compile(r"\r\n?")
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")
_ELLIPSIS = "…"


def sanitise(text: str) -> str:
    """``text`` as the engine keeps it: no control characters but tab and line feed, line
    breaks as ``\\n``, no lone surrogates."""
    text = _CONTROLS.sub("", _NEWLINES.sub("\n", text))
    return _mend_surrogates(text)


def sanitise_code(code: str) -> str:
    """Script code as the engine keeps it: only NUL goes (and a lone surrogate, which is not
    text at all, becomes U+FFFD)."""
    return _mend_surrogates(code.replace("\x00", ""))


def sanitise_json(value: Any, clean: Callable[[str], str] = sanitise) -> Any:
    """Every string in parsed JSON (keys too) through ``clean``; other values as they are."""
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, list):
        return [sanitise_json(item, clean) for item in value]
    if isinstance(value, dict):
        return {clean(str(k)): sanitise_json(item, clean) for k, item in value.items()}
    return value


def echo(text: str, limit: int) -> str:
    """Player text quoted back in a reply: sanitised, and at most ``limit`` characters (cut
    with an ellipsis). ``limit`` is the room the Discord field leaves for it."""
    text = sanitise(text)
    if len(text) <= limit:
        return text
    return text[: max(limit - len(_ELLIPSIS), 0)].rstrip() + _ELLIPSIS


def row_id(typed: str, maximum: int = ROW_ID_MAX) -> int | None:
    """The row id a player typed (``"42"``), or None when it is not one: not plain ASCII
    digits (``"²"`` and ``"٣"`` are digits to ``str.isdigit`` but not to ``int``), or beyond
    any row's id (``maximum``: ``BIG_ID_MAX`` for a column holding Discord snowflakes)."""
    typed = typed.strip()
    if not (typed.isascii() and typed.isdigit()) or len(typed) > len(str(maximum)):
        return None
    value = int(typed)
    return value if 1 <= value <= maximum else None


def _mend_surrogates(text: str) -> str:
    if _SURROGATE.search(text) is None:
        return text
    # UTF-16 with surrogatepass joins a high and low surrogate into their character; what is
    # left alone decodes as U+FFFD.
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
