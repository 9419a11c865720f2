"""A character card's two names for the people in its texts, ``{{char}}`` and ``{{user}}``.

SillyTavern replaces ``{{char}}`` with the character's name and ``{{user}}`` with the user's
persona name in every field of a card (docs.sillytavern.app/usage/core-concepts/macros: the
names are matched in any case; ``<BOT>`` and ``<USER>`` are TavernAI's older spelling, and V3
adds ``<char>``: SPEC_V3.md, "nickname", which also says ``{{char}}`` is the nickname when the
card has one).

Campfire decides them in two steps:

- ``{{char}}`` is the card's own character, known at import: replaced then (``name_char``).
- ``{{user}}`` is whoever plays, known only at /start: every spelling is stored as
  ``{{user}}`` (so an export gives the card back as written) and replaced when an adventure
  starts (``fill_user``). In a DM the player is "You", as every solo action is written
  (``engine.story.actions``), so ``{{user}}`` becomes "you" ("{{user}}'s" "your",
  "{{user}} is" "you are", capitalised where a sentence begins). In a server the story is
  told of characters by name, so /start asks the host for their character's name (the same
  question as AI Dungeon's ``${character.name}``, ``USER_QUESTION``), ``{{user}}`` becomes
  that name, and the host's character is named so (``engine.library.scenarios.start``).
"""

from __future__ import annotations

import re

from engine.platform.sanitise import sanitise

CHAR_MACRO = re.compile(r"\{\{char\}\}|<bot>|<char>", re.IGNORECASE)
USER_MACRO = re.compile(r"\{\{user\}\}|<user>", re.IGNORECASE)
#: How ``{{user}}`` is kept in a stored scenario.
USER = "{{user}}"
#: The /start question whose answer is ``{{user}}`` in a server (AI Dungeon's built-in one).
USER_QUESTION = "character.name"

_USER_AS_YOU = re.compile(r"\{\{user\}\}(?P<tail>(?:'|’)s\b| (?:is|was|has)\b)?", re.IGNORECASE)
_YOU_TAILS = {"'s": "r", "’s": "r", " is": " are", " was": " were", " has": " have"}
# A sentence begins at the start, after a line break, or after . ! ? (and any closing quote or
# emphasis) and space, with any opening quote or markdown emphasis in between.
_SENTENCE_START = re.compile(r'(?:^|\n|[.!?…][*_"”)]*\s+)["“*_(\s]*$')


def name_char(text: str, name: str) -> str:
    """The card's text with its character named, and every spelling of the user as
    ``{{user}}``."""
    return USER_MACRO.sub(USER, CHAR_MACRO.sub(lambda _m: name, text))


def uses_user(text: str) -> bool:
    return USER in text


def fill_user(text: str, name: str | None) -> str:
    """``{{user}}`` as the player: ``name`` (their character, in a server), else "you"."""
    if USER not in text:
        return text
    if name:
        # What a player typed at /start: sanitised as it enters the story.
        named = sanitise(name).strip()
        return text.replace(USER, named)

    def you(match: re.Match[str]) -> str:
        tail = match.group("tail") or ""
        word = "you" + _YOU_TAILS.get(tail.lower(), tail)
        if _SENTENCE_START.search(match.string, 0, match.start()):
            word = word[0].upper() + word[1:]
        return word

    return _USER_AS_YOU.sub(you, text)
