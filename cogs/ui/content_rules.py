"""How content rules are typed and shown: a list of banned words as players give it (comma-
separated, ``none`` to clear) and as it is shown back. The rules themselves are the engine's
(``engine.people.content``)."""

from __future__ import annotations

from typing import Literal

from discord.utils import escape_markdown

from engine.people.content import Rating

#: Typed to clear a list.
CLEAR = "none"
#: What a rating option offers: a level, or ``default`` for the operator's.
RatingChoice = Literal["safe", "moderate", "mature", "default"]
#: The ``words:`` option of the banned-words commands.
WORDS_HELP = "Words or phrases, separated by commas; `none` clears the list; leave empty to see it"


def chosen_rating(level: RatingChoice) -> Rating | None:
    """The rating a player chose (None: the operator's default)."""
    return None if level == "default" else Rating[level.upper()]


def parse_words(typed: str) -> list[str]:
    """A comma-separated list as typed; ``none`` (or nothing) clears it."""
    if typed.strip().lower() in (CLEAR, ""):
        return []
    return [part for part in typed.split(",") if part.strip()]


def banned_text(words: tuple[str, ...] | list[str], where: str) -> str:
    if not words:
        return (
            f"No words are banned in {where} of their own (the bot's operator may ban some "
            "everywhere). Set some with `words:`, separated by commas."
        )
    shown = ", ".join(f"“{escape_markdown(word)}”" for word in words)
    return (
        f"Banned in {where}: {shown}. An action holding one is refused; the narrator's are "
        "masked. `words: none` clears the list."
    )
