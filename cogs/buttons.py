"""Buttons that survive restarts: their state lives in the ``custom_id``.

Each is a ``DynamicItem``: discord.py rebuilds it from the ``custom_id`` of whatever message is
pressed, even one sent before the bot restarted. The version in a Continue button's id is the
story version it was drawn under; a press under an older version is refused politely.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import discord

from cogs.context import actor_of, channel_id_of
from cogs.insights import show_insights_safely
from cogs.replies import reply
from engine.actions import PlayerAction
from engine.storage.models import ActionType

if TYPE_CHECKING:
    from bot.discord_bot import CampfireBot


def _button(
    label: str, emoji: str, custom_id: str, style: discord.ButtonStyle
) -> discord.ui.Button:
    return discord.ui.Button(label=label, emoji=emoji, style=style, custom_id=custom_id)


class ContinueButton(
    discord.ui.DynamicItem[discord.ui.Button],
    template=r"cf:continue:(?P<adventure>\d+):(?P<version>\d+)",
):
    def __init__(self, adventure_id: int, version: int) -> None:
        self.adventure_id = adventure_id
        self.version = version
        super().__init__(
            _button(
                "Continue",
                "⏩",
                f"cf:continue:{adventure_id}:{version}",
                discord.ButtonStyle.primary,
            )
        )

    @classmethod
    async def from_custom_id(
        cls, interaction: discord.Interaction, item: discord.ui.Item[Any], match: re.Match[str]
    ) -> ContinueButton:
        return cls(int(match["adventure"]), int(match["version"]))

    async def callback(self, interaction: discord.Interaction) -> None:
        bot: CampfireBot = interaction.client  # type: ignore[assignment]
        current = await bot.services.play.adventure_in(channel_id_of(interaction))
        if current is None or current.version != self.version:
            # Answered to the presser alone; a press that races another is caught later, by
            # the request record.
            await reply(interaction, "⚠ The story has moved on since that button was drawn.")
            return
        await interaction.response.defer(thinking=True)
        action = PlayerAction(ActionType.CONTINUE, "", interaction.user.id)
        events = bot.services.play.act(
            actor_of(interaction),
            channel_id_of(interaction),
            action,
            request_id=interaction.id,
            seen_version=self.version,
        )
        await bot.narrator.show(interaction, events)


class RetryButton(discord.ui.DynamicItem[discord.ui.Button], template=r"cf:retry:(?P<request>\d+)"):
    """Plays again an action whose turn failed or was interrupted."""

    def __init__(self, request_id: int) -> None:
        self.request_id = request_id
        super().__init__(
            _button("Retry", "🔁", f"cf:retry:{request_id}", discord.ButtonStyle.secondary)
        )

    @classmethod
    async def from_custom_id(
        cls, interaction: discord.Interaction, item: discord.ui.Item[Any], match: re.Match[str]
    ) -> RetryButton:
        return cls(int(match["request"]))

    async def callback(self, interaction: discord.Interaction) -> None:
        bot: CampfireBot = interaction.client  # type: ignore[assignment]
        await interaction.response.defer(thinking=True)
        events = bot.services.play.retry_request(
            actor_of(interaction),
            channel_id_of(interaction),
            self.request_id,
            new_request_id=interaction.id,
        )
        await bot.narrator.show(interaction, events)


class InsightsButton(
    discord.ui.DynamicItem[discord.ui.Button], template=r"cf:insights:(?P<node>\d+)"
):
    """Shows one narrator turn's Insights to whoever presses it, privately. It names the turn,
    not a story version, so it keeps working under any turn, old or new."""

    def __init__(self, node_id: int) -> None:
        self.node_id = node_id
        super().__init__(
            _button("Insights", "🔍", f"cf:insights:{node_id}", discord.ButtonStyle.secondary)
        )

    @classmethod
    async def from_custom_id(
        cls, interaction: discord.Interaction, item: discord.ui.Item[Any], match: re.Match[str]
    ) -> InsightsButton:
        return cls(int(match["node"]))

    async def callback(self, interaction: discord.Interaction) -> None:
        await show_insights_safely(interaction, node_id=self.node_id)


def turn_buttons(adventure_id: int, version: int, node_id: int | None = None) -> discord.ui.View:
    """The newest turn's buttons; 🔍 Insights when the turn is the narrator's ``node_id``."""
    view = discord.ui.View(timeout=None)
    view.add_item(ContinueButton(adventure_id, version))
    if node_id is not None:
        view.add_item(InsightsButton(node_id))
    return view


def retry_button(request_id: int) -> discord.ui.View:
    view = discord.ui.View(timeout=None)
    view.add_item(RetryButton(request_id))
    return view


DYNAMIC_ITEMS = (ContinueButton, RetryButton, InsightsButton)
