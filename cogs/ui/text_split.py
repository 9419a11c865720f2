"""Splitting narration into Discord-sized pieces at good boundaries.

Discord refuses message content over 2000 characters (counted in code points, which is what
``len`` counts). A long narration therefore goes into several messages, and where it is cut
matters to the reader. :func:`take_piece` cuts one piece off the front of a text, preferring, in
this order, the last

1. paragraph boundary (a whitespace run that holds a blank line),
2. line break,
3. sentence end (``.``, ``!``, ``?`` or ``…``, possibly repeated, possibly followed by closing
   quotes, brackets or Markdown emphasis, then whitespace),
4. space (any whitespace run),

that lies in the window, and only when there is none of those a hard cut at the limit (moved back
so that it does not separate a combining mark or a joined emoji from the character before it).

A boundary only counts when something other than whitespace comes before it, so no piece is
whitespace only unless the text gives no choice. The whitespace run at a boundary stays on the end
of the earlier piece (as much of it as fits), so the pieces rejoin exactly:
``"".join(split_message(text)) == text``.

**Stability.** ``take_piece(text, limit)`` reads nothing past ``text[:limit + 1]`` when the text
is longer than the limit. So once a text has grown past a piece's window, that piece is settled:
more text cannot change it. It follows that :func:`split_message` is stable under extension:
every piece but the last of ``split_message(t)`` is also a piece of ``split_message(t + more)``,
in the same place. The streaming editor relies on this: it freezes a message as soon as the text
outgrows it, and the final split lands on exactly the pieces it already froze.

**Display.** Discord strips leading and trailing whitespace from message content, so what a
message shows is ``piece.strip()``. :func:`display_pieces` gives those (dropping pieces that are
whitespace only). Because every cut is made in or next to a whitespace run where one exists,
joining the display pieces with ``"\\n\\n"`` (or ``" "``) loses only whitespace: the text
without its whitespace equals the joined pieces without theirs. A hard cut (a word longer than
the limit) splits a word; the characters are still all there.
"""

from __future__ import annotations

import re
import unicodedata

DISCORD_LIMIT = 2000

_WHITESPACE_RUN = re.compile(r"\s+")
_BLANK_LINE = re.compile(r"\n[^\S\n]*\n")
_SENTENCE_END = re.compile(r"[.!?…]+[\"'”’»)\]*_~|]*\Z")
# How far a hard cut may move back to keep a cluster together.
_MAX_CLUSTER_BACKOFF = 16

PARAGRAPH, LINE, SENTENCE, SPACE, HARD = range(5)


def _boundary_kind(before: str, run: str) -> int:
    """How good a cut in the whitespace ``run`` is, given the text ``before`` it."""
    if _BLANK_LINE.search(run):
        return PARAGRAPH
    if "\n" in run:
        return LINE
    if _SENTENCE_END.search(before[-12:]):
        return SENTENCE
    return SPACE


def _joins_previous(ch: str) -> bool:
    """Whether ``ch`` belongs to the character before it (combining mark, emoji modifier…)."""
    return unicodedata.category(ch) in ("Mn", "Mc", "Me", "Sk") or ch in "\u200d\ufe0f"


def _hard_cut(text: str, limit: int) -> int:
    cut = limit
    floor = max(1, limit - _MAX_CLUSTER_BACKOFF)
    while cut > floor and (_joins_previous(text[cut]) or text[cut - 1] == "\u200d"):
        cut -= 1
    if _joins_previous(text[cut]) or text[cut - 1] == "\u200d":
        return limit  # an absurdly long cluster: cut it anyway
    return cut


def take_piece(text: str, limit: int = DISCORD_LIMIT) -> tuple[str, str]:
    """Cut one piece of at most ``limit`` characters off the front of ``text``.

    Returns ``(piece, rest)`` with ``piece + rest == text``. When the text fits, the piece is the
    whole text and the rest is empty. Otherwise the cut is at the best boundary (see the module
    docstring) and depends only on ``text[:limit + 1]``.
    """
    if limit < 1:
        raise ValueError("limit must be at least 1")
    if len(text) <= limit:
        return text, ""
    window = text[: limit + 1]
    best_kind = HARD
    best_cut = 0
    for run in _WHITESPACE_RUN.finditer(window):
        start, end = run.span()
        if start == 0:
            continue  # nothing but whitespace before it
        cut = min(end, limit)
        kind = _boundary_kind(window[:start], run.group())
        # Later runs give longer pieces; a better kind beats any position.
        if kind < best_kind or (kind == best_kind and cut >= best_cut):
            best_kind, best_cut = kind, cut
    if best_kind == HARD:
        best_cut = _hard_cut(text, limit)
    return text[:best_cut], text[best_cut:]


def split_message(text: str, limit: int = DISCORD_LIMIT) -> list[str]:
    """Split ``text`` into pieces of at most ``limit`` characters that rejoin exactly.

    No piece is empty; an empty text gives ``[]``. Stable under extension (module docstring).
    """
    pieces: list[str] = []
    rest = text
    while rest:
        piece, rest = take_piece(rest, limit)
        pieces.append(piece)
    return pieces


def display_pieces(text: str, limit: int = DISCORD_LIMIT) -> list[str]:
    """The pieces of :func:`split_message` as Discord shows them: stripped, blank ones dropped.

    Joining them with ``"\\n\\n"`` or ``" "`` gives back the text up to whitespace.
    """
    return [shown for piece in split_message(text, limit) if (shown := piece.strip())]
