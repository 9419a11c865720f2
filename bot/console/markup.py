"""Discord's message markup, as a terminal can show it.

Discord's client draws **bold**, *italics*, __underline__, ~~strikethrough~~, `code`, headings,
``-#`` subtext and ``<t:…>`` timestamps (discord-api-docs, Reference, Message Formatting and
"Timestamp Styles"; Discord's help article "Markdown Text 101"). The console shows a timestamp as
a date wherever it prints, and on a terminal the rest with ANSI styles in place of the marks;
into a pipe the marks are taken off (``plain``), so a script reads the words a player sees.
Discord's dialect is not CommonMark (a line break is kept, ``__`` underlines, ``-#`` is subtext),
so a CommonMark renderer would join lines and misread marks: these rules read it instead.
Control characters in the text (a model's or a player's) are dropped before anything is drawn,
so no text can move the cursor or restyle the terminal.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

_TIMESTAMP = re.compile(r"<t:(-?\d{1,13})(?::([tTdDfFR]))?>")
#: Discord's styles (the client's own wording varies with the reader's locale).
_STYLES = {
    "t": "%H:%M",
    "T": "%H:%M:%S",
    "d": "%d/%m/%Y",
    "D": "%d %B %Y",
    "f": "%d %B %Y %H:%M",
    "F": "%A, %d %B %Y %H:%M",
}

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
#: C0 and C1 controls but the line break and the tab, and DEL: none is text to draw.
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_RULES = [
    # A code fence's own lines go; what is between them stays as written.
    (re.compile(r"^```[\w+-]*$", re.MULTILINE), ""),
    (re.compile(r"^#{1,3} (.+)$", re.MULTILINE), "\x1b[1m\\1\x1b[22m"),
    (re.compile(r"^-# (.+)$", re.MULTILINE), "\x1b[2m\\1\x1b[22m"),
    (re.compile(r"\*\*(.+?)\*\*", re.DOTALL), "\x1b[1m\\1\x1b[22m"),
    (re.compile(r"__(.+?)__", re.DOTALL), "\x1b[4m\\1\x1b[24m"),
    (re.compile(r"~~(.+?)~~", re.DOTALL), "\x1b[9m\\1\x1b[29m"),
    (re.compile(r"(?<![\w*])\*(?![\s*])(.+?)(?<![\s*])\*(?![\w*])"), "\x1b[3m\\1\x1b[23m"),
    (re.compile(r"(?<!\w)_(?!\s)(.+?)(?<!\s)_(?!\w)"), "\x1b[3m\\1\x1b[23m"),
    (re.compile(r"`([^`\n]+)`"), "\x1b[7m\\1\x1b[27m"),
]


def timestamps(text: str, *, now: datetime | None = None) -> str:
    """Each ``<t:seconds[:style]>`` as the date it stands for, in this machine's time zone."""

    def shown(match: re.Match[str]) -> str:
        try:
            when = datetime.fromtimestamp(int(match[1]), UTC).astimezone()
        except (OverflowError, OSError, ValueError):
            return match[0]
        style = match[2] or "f"
        if style == "R":
            return _relative(when, now or datetime.now(UTC).astimezone())
        return when.strftime(_STYLES[style])

    return _TIMESTAMP.sub(shown, text)


def styled(text: str) -> str:
    """``text`` for a terminal: its marks replaced by the styles they stand for."""
    text = _CONTROLS.sub("", text)
    for pattern, replacement in _RULES:
        text = pattern.sub(replacement, text)
    return text


def plain(text: str) -> str:
    """``text`` without its marks, as read aloud: the words a player sees, unstyled."""
    return visible(styled(text))


def visible(text: str) -> str:
    """``text`` as wide as the terminal draws it (styles take no room)."""
    return _ANSI.sub("", text)


def _relative(when: datetime, now: datetime) -> str:
    seconds = int((when - now).total_seconds())
    later = seconds >= 0
    seconds = abs(seconds)
    for size, unit in (
        (86400 * 365, "year"),
        (86400 * 30, "month"),
        (86400, "day"),
        (3600, "hour"),
        (60, "minute"),
        (1, "second"),
    ):
        if seconds >= size or unit == "second":
            count = seconds // size
            amount = f"{count} {unit}{'' if count == 1 else 's'}"
            return f"in {amount}" if later else f"{amount} ago"
    return "now"
