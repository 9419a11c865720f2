"""Hands the engine the way its card proposals reach the host (``cogs.ui.card_proposals``)
while the cog is loaded."""

from __future__ import annotations

from typing import TYPE_CHECKING

from discord.ext import commands

from cogs.ui.card_proposals import deliver
from engine.story.steering.card_proposals import ProposedCard

if TYPE_CHECKING:
    from cogs.ui import CampfireBot


class CardProposalDelivery(commands.Cog):
    """Hands the engine the way its proposals reach the host while the cog is loaded."""

    def __init__(self, bot: CampfireBot) -> None:
        self.bot = bot

    async def cog_load(self) -> None:
        # A bot that only declares its commands (``python -m bot sync``) has no services.
        if not self.bot.commands_only:
            self.bot.services.card_proposals.deliver = self._deliver

    async def cog_unload(self) -> None:
        # Unloaded: a proposal made meanwhile stays in its row, shown to nobody.
        if not self.bot.commands_only:
            self.bot.services.card_proposals.deliver = None

    async def _deliver(self, proposed: ProposedCard, request_id: int | None) -> None:
        await deliver(self.bot, proposed, request_id)


async def setup(bot: CampfireBot) -> None:
    await bot.add_cog(CardProposalDelivery(bot))
