"""The interactions that played turns lately, by id, so that what follows a turn in the
background can answer the player through the same interaction: a card the story proposes to
the host (``cogs.ui.card_proposals``) reaches them as an ephemeral follow-up when their own
interaction started that turn, and by DM otherwise.

Discord keeps an interaction's token valid for 15 minutes ("Interaction tokens are valid for 15
minutes", discord.com/developers/docs/interactions/receiving-and-responding); one is kept a
little less than that, and only so many are kept at all.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

import discord

from cogs.ui.narration_routes import TOKEN_LIFETIME

#: How long an interaction is kept: its token's 15 minutes, less a minute to use it in.
KEPT_S = TOKEN_LIFETIME.total_seconds() - 60.0
#: The most kept at once (the oldest go first): turns played in a quarter of an hour.
MAX_KEPT = 2_000


class RecentInteractions:
    """This process's recent turn-playing interactions (``per_process``)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._kept: OrderedDict[int, tuple[float, discord.Interaction]] = OrderedDict()

    def note(self, interaction: discord.Interaction) -> None:
        now = self.clock()
        self._kept[interaction.id] = (now, interaction)
        self._kept.move_to_end(interaction.id)
        while self._kept:
            oldest_id, (at, _) = next(iter(self._kept.items()))
            if len(self._kept) <= MAX_KEPT and now - at < KEPT_S:
                break
            del self._kept[oldest_id]

    def take(self, interaction_id: int | None) -> discord.Interaction | None:
        """The interaction with this id if it is kept and its token still young; forgotten."""
        if interaction_id is None:
            return None
        kept = self._kept.pop(interaction_id, None)
        if kept is None or self.clock() - kept[0] >= KEPT_S:
            return None
        return kept[1]
