"""Suggested actions as buttons under the newest turn (``engine.story.suggestions``).

Each button is ``cf:sg:<adventure>:<version>:<turn>:<n>``: the story it was drawn for and which
of its turn's suggestions it is, never the text (a ``custom_id`` holds 100 characters and is
whatever the client sends; discord-api-docs, Message Components). The label is the suggestion
itself (Discord's 80 characters, which the engine's rules keep to). They go on a row of their
own, under the story's buttons (row 0), the take pager (1) and Do, Say and Story (2): a message
holds 5 rows of 5 buttons, and a turn offers at most 4.

A press plays the suggestion as the presser's own Do, exactly as ``/do`` would (through
``PlayService.act``, with the group's rules: the host's lock and mutes, the party, rounds, the
rate limits), under the story version the button was drawn for: pressed under an older turn,
in another adventure, or a second time under the same turn, it is refused to the presser alone.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import discord

from cogs.ui import bot_of
from cogs.ui.interaction import actor_of, channel_id_of
from cogs.ui.preflight import Preflighted
from cogs.ui.replies import defer_request, reply
from engine.errors import CampfireError
from engine.platform.sanitise import ROW_ID_MAX, row_id
from engine.story.actions import ActionType, PlayerAction
from engine.story.suggestions import MAX_LABEL, MAX_SUGGESTIONS

if TYPE_CHECKING:
    pass

#: Their row: under the story's buttons, the take pager and Do, Say and Story.
SUGGESTION_ROW = 3


def _number(digits: str) -> int:
    # A forged number beyond any row's is 0: it names nothing, and the press is refused.
    return row_id(digits, ROW_ID_MAX) or 0


class SuggestionButton(
    Preflighted,
    discord.ui.DynamicItem[discord.ui.Button],
    template=r"cf:sg:(?P<adventure>\d+):(?P<version>\d+):(?P<node>\d+):(?P<index>\d+)",
):
    """One suggested action under the newest turn."""

    def __init__(
        self, adventure_id: int, version: int, node_id: int, index: int, label: str = "…"
    ) -> None:
        self.adventure_id = adventure_id
        self.version = version
        self.node_id = node_id
        self.index = index
        button: discord.ui.Button = discord.ui.Button(
            label=label[:MAX_LABEL] or "…",
            style=discord.ButtonStyle.primary,
            custom_id=f"cf:sg:{adventure_id}:{version}:{node_id}:{index}",
            row=SUGGESTION_ROW,
        )
        # The DynamicItem after this mixin takes the button; a checker sees only ``object``.
        super().__init__(button)  # type: ignore[call-arg]  # object's __init__ to a checker

    @classmethod
    async def from_custom_id(
        cls, interaction: discord.Interaction, item: discord.ui.Item[Any], match: re.Match[str]
    ) -> SuggestionButton:
        return cls(
            _number(match["adventure"]),
            _number(match["version"]),
            _number(match["node"]),
            _number(match["index"]),
            getattr(item, "label", None) or "…",
        )

    async def callback(self, interaction: discord.Interaction) -> None:
        bot = bot_of(interaction)
        play = bot.services.play
        channel_id = channel_id_of(interaction)
        why = play.places.stale_button(channel_id, self.adventure_id, self.version)
        if why is not None:
            await reply(interaction, f"⚠ {why}")
            return
        # Acknowledged before the database is asked anything (Discord's 3 seconds).
        await defer_request(interaction)
        try:
            text = await bot.services.suggestions.chosen(
                channel_id, adventure_id=self.adventure_id, node_id=self.node_id, index=self.index
            )
        except CampfireError as error:
            await reply(interaction, f"⚠ {error.message}")
            return
        events = play.act(
            actor_of(interaction),
            channel_id,
            PlayerAction(ActionType.DO, text, interaction.user.id),
            request_id=interaction.id,
            seen_version=self.version,
            drawn_for=self.adventure_id,
        )
        channel = interaction.channel
        assert channel is not None and not isinstance(
            channel, discord.ForumChannel | discord.CategoryChannel
        )
        # In rounds, the press answers the player and moves the round panel (cogs.ui.round_panels).
        watched = bot.round_panels.watch(
            channel, events, interaction=interaction, actor=actor_of(interaction)
        )
        await bot.narrator.show(interaction, watched)


def suggestion_buttons(
    adventure_id: int, version: int, node_id: int, texts: Sequence[str]
) -> list[SuggestionButton]:
    """The newest turn's suggested actions, one button each (at most ``MAX_SUGGESTIONS``)."""
    return [
        SuggestionButton(adventure_id, version, node_id, i, text)
        for i, text in enumerate(texts[:MAX_SUGGESTIONS])
    ]
