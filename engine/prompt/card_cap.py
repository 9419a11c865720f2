"""The most story cards one adventure (or one scenario) holds: one rule for every way cards come.

The number is the operator's setting (``CAMPFIRE_MAX_STORY_CARDS``). The rule is the same
whether cards are added by hand (``/card add``), left by a script, or brought in by an import: an
adventure may hold ``most`` cards, not one more. What differs is only what happens past it: a
card added by hand is refused, a script's changes are not kept
(``engine.library.scripting.results``),
and an import keeps the first ``most`` cards of a scenario and says so in its preview
(``engine.library.formats.draft``).

Published AI Dungeon story-card exports reach about a thousand cards, hence the default.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The default of ``CAMPFIRE_MAX_STORY_CARDS``.
DEFAULT_MAX_CARDS = 1000


@dataclass(frozen=True, slots=True)
class CardCap:
    most: int = DEFAULT_MAX_CARDS

    def room(self, count: int) -> int:
        """How many more cards fit beside ``count``."""
        return max(0, self.most - count)

    def holds(self, count: int) -> bool:
        """Whether an adventure may hold ``count`` cards."""
        return count <= self.most

    def full(self, count: int) -> str | None:
        """Why one more card cannot join ``count`` (None: it can)."""
        if self.room(count) > 0:
            return None
        return (
            f"This adventure already has {count:,} story cards, the most it can hold "
            f"({self.most:,}). Remove one first."
        )

    def too_many(self, count: int, whose: str) -> str | None:
        """Why ``whose`` ``count`` cards are too many (None: they fit)."""
        if self.holds(count):
            return None
        return f"{whose} {count:,} story cards; an adventure may hold at most {self.most:,}."
