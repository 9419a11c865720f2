"""/insights: what went into a narrator turn's context, shown privately (``cogs.ui.insights``
draws it; the 🔍 button under a turn shows the same)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import discord
from discord import app_commands
from discord.ext import commands

from cogs.ui.insights import show_insights

if TYPE_CHECKING:
    from cogs.ui import CampfireBot


class InsightsCog(commands.Cog):
    def __init__(self, bot: CampfireBot) -> None:
        self.bot = bot

    @app_commands.command(name="insights")
    @app_commands.describe(
        turn="Which AI turn: 1 is the first reply after the opening; empty for the newest"
    )
    async def insights(
        self,
        interaction: discord.Interaction,
        turn: app_commands.Range[int, 1, 1_000_000] | None = None,
    ) -> None:
        """See what went into a turn's context, what it cost, and the exact prompt (private)."""
        await show_insights(interaction, turn=turn)


async def setup(bot: CampfireBot) -> None:
    await bot.add_cog(InsightsCog(bot))
