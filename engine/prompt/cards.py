"""Story cards' keys and the cards as the context engine reads them.

A card's keys are comma-separated, as AI Dungeon stores them. A key matches the scan window (the
last few story entries and the player's new action) case-insensitively (both are compared
``casefold()``-ed, so "STRASSE" matches "Straße"), as a whole word: it must not start or end in
the middle of a word, so "Mira" matches "Mira's lantern" but not "Miranda". Keys are escaped,
never read as patterns, so any text is a safe key; a key that is empty (or only spaces) never
matches. Whitespace inside a key matches any run of whitespace.

A card's world-info options (``engine.prompt.lore``, SillyTavern's World Info entry options)
change that per card (case-sensitive keys, keys that match inside words, regular-expression
keys on RE2); ``engine.prompt.card_scan`` decides which cards a turn takes, with the others
(secondary keys, scan depth, probability, recursion, timers, groups). A card without options
matches as above.

Everything here is pure; a card's keys are compiled once per distinct ``keys`` text and the
compiled pattern is shared by every turn that sees the same keys.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache, lru_cache
from typing import Any

from sqlalchemy import Integer, Select, Text, bindparam, cast, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from engine.prompt.lore import DEFAULT_LORE, Lore, read_lore
from engine.storage.models import AdventureCard

#: How many of the newest story entries are scanned for keys, besides the player's new action.
DEFAULT_SCAN_ENTRIES = 4


def parse_keys(keys: str | Sequence[str]) -> tuple[str, ...]:
    """The keys of a comma-separated list, stripped, without empty or repeated ones.

    Repeats are found case-insensitively (matching is), and the first spelling is kept.
    """
    if isinstance(keys, str):
        return _parse_text(keys)
    return _parse_parts([part for text in keys for part in text.split(",")])


@lru_cache(maxsize=4096)
def _parse_text(keys: str) -> tuple[str, ...]:
    # Cached: every turn reads the same cards' keys again.
    return _parse_parts(keys.split(","))


def _parse_parts(parts: Sequence[str]) -> tuple[str, ...]:
    seen: set[str] = set()
    out: list[str] = []
    for part in parts:
        key = " ".join(part.split())
        folded = key.casefold()
        if key and folded not in seen:
            seen.add(folded)
            out.append(key)
    return tuple(out)


def _key_pattern(key: str) -> str:
    return r"\s+".join(re.escape(word) for word in key.split())


@dataclass(frozen=True, slots=True)
class KeyMatcher:
    """A card's keys, compiled: one pattern for all of them, over case-folded text unless the
    card is case-sensitive."""

    keys: tuple[str, ...]
    #: The first word of each key (case-folded unless case-sensitive): a key can only match
    #: where its first word occurs, and a substring test is a hundred times cheaper than the
    #: pattern's search.
    probes: tuple[str, ...]
    #: Group ``i + 1`` is ``keys[i]``.
    pattern: re.Pattern[str]
    case_sensitive: bool = False

    def prepare(self, text: str) -> str:
        """``text`` as ``find`` reads it: case-folded unless the keys are case-sensitive."""
        return text if self.case_sensitive else text.casefold()

    def find(self, text: str) -> str | None:
        """The key that occurs first in ``text`` (already ``prepare``-d), or None."""
        if not any(probe in text for probe in self.probes):
            return None
        found = self.pattern.search(text)
        if found is None or found.lastindex is None:
            return None
        return self.keys[found.lastindex - 1]


@lru_cache(maxsize=4096)
def compile_keys(
    keys: tuple[str, ...], case_sensitive: bool = False, whole_words: bool = True
) -> KeyMatcher | None:
    """The matcher for parsed keys (see ``parse_keys``); None if there are none.

    Whole words: a key must not start or end inside a word. SillyTavern's ``matchKeys`` does
    so for one-word keys (``(?:^|\\W)key(?:$|\\W)``) and matches longer keys anywhere; here
    every key, as Campfire always did. Without whole words a key matches inside words too.
    """
    folded = [key if case_sensitive else key.casefold() for key in keys]
    folded_keys = [(key, fold) for key, fold in zip(keys, folded, strict=True) if fold.split()]
    if not folded_keys:
        return None
    alternatives = "|".join(f"({_key_pattern(fold)})" for _, fold in folded_keys)
    pattern = rf"(?<!\w)(?:{alternatives})(?!\w)" if whole_words else alternatives
    return KeyMatcher(
        keys=tuple(key for key, _ in folded_keys),
        probes=tuple(dict.fromkeys(fold.split()[0] for _, fold in folded_keys)),
        pattern=re.compile(pattern),
        case_sensitive=case_sensitive,
    )


def find_trigger(keys: str | Sequence[str], text: str) -> str | None:
    """The key (as written on the card) that occurs first in ``text``, or None."""
    matcher = compile_keys(parse_keys(keys))
    return matcher.find(text.casefold()) if matcher and text else None


@dataclass(frozen=True, slots=True)
class Card:
    """A story card as the context engine sees it (a row of ``adventure_cards``, or a test's)."""

    title: str
    entry: str
    keys: tuple[str, ...] = ()
    always_on: bool = False
    id: int | None = None
    position: int = 0
    type: str = ""
    #: Its world-info options (``engine.prompt.lore``).
    lore: Lore = DEFAULT_LORE
    #: Compiled from ``keys`` with the options' case and whole-word settings (shared through
    #: ``compile_keys``' cache).
    matcher: KeyMatcher | None = field(default=None, compare=False, repr=False)
    #: One matcher per secondary key (the logics ask which of them occur).
    secondary: tuple[KeyMatcher | None, ...] = field(default=(), compare=False, repr=False)

    @classmethod
    def of(
        cls,
        title: str,
        entry: str,
        keys: str | Sequence[str] = "",
        *,
        always_on: bool = False,
        id: int | None = None,
        position: int = 0,
        type: str = "",
        lore: Lore | Mapping[str, Any] | None = None,
    ) -> Card:
        parsed = parse_keys(keys)
        options = lore if isinstance(lore, Lore) else read_lore(lore)
        case = bool(options.case_sensitive)
        whole = options.whole_words is not False
        return cls(
            title=title,
            entry=entry,
            keys=parsed,
            always_on=always_on,
            id=id,
            position=position,
            type=type,
            lore=options,
            matcher=compile_keys(parsed, case, whole),
            secondary=tuple(compile_keys((key,), case, whole) for key in options.secondary),
        )

    def trigger(self, text: str) -> str | None:
        """The key that triggers this card in ``text``, or None."""
        return self.matcher.find(self.matcher.prepare(text)) if self.matcher and text else None


def scan_text(
    entries: Sequence[str], action_text: str = "", size: int = DEFAULT_SCAN_ENTRIES
) -> str:
    """The text keys are looked for in: the last ``size`` entries and the new action."""
    window = list(entries[-size:]) if size > 0 else []
    if action_text:
        window.append(action_text)
    return "\n".join(window)


# --- reads -------------------------------------------------------------------------------------


@cache
def _cards_query() -> Select[Any]:
    """``load_context_cards``' statement, built once: light columns only, never the
    description; the options as their stored JSON text (``_context_card`` parses them)."""
    return (
        select(
            col(AdventureCard.id),
            col(AdventureCard.title),
            col(AdventureCard.entry),
            col(AdventureCard.keys),
            col(AdventureCard.always_on),
            col(AdventureCard.position),
            col(AdventureCard.type),
            cast(col(AdventureCard.lore), Text).label("lore"),
        )
        .where(col(AdventureCard.adventure_id) == bindparam("adventure_id", type_=Integer))
        .order_by(col(AdventureCard.position), col(AdventureCard.id))
    )


@lru_cache(maxsize=4096)
def _context_card(
    id: int,
    title: str,
    entry: str,
    keys: str,
    always_on: bool,
    position: int,
    type: str,
    lore: str | None,
) -> Card:
    """A card as the context reads it, from its row's values: every turn reads every card, and
    parsing the keys and options again each turn cost as much as reading them. Cards are
    immutable and the row's every value is the key, so a card written since is a new entry."""
    return Card.of(
        title,
        entry,
        keys,
        always_on=always_on,
        id=id,
        position=position,
        type=type,
        lore=json.loads(lore) if lore else None,
    )


async def load_context_cards(session: AsyncSession, adventure_id: int) -> list[Card]:
    """The adventure's cards as the context reads them (no description), in their order; whole
    rows, for snapshots and scripts, are ``engine.story.snapshots.load_cards``."""
    rows = await session.execute(_cards_query(), {"adventure_id": adventure_id})
    return [_context_card(*row) for row in rows]
