"""/state: the adventure's world state, and a host's correction of it."""

from __future__ import annotations

from typing import TYPE_CHECKING

import discord
from discord import app_commands
from discord.ext import commands

from cogs.ui.content import fit_embed
from cogs.ui.interaction import actor_of, channel_id_of
from cogs.ui.replies import reply

if TYPE_CHECKING:
    from cogs.ui import CampfireBot


class WorldStateCog(commands.Cog):
    state = app_commands.Group(name="state", description="The adventure's world state")

    def __init__(self, bot: CampfireBot) -> None:
        self.bot = bot

    @state.command(name="show")
    async def show(self, interaction: discord.Interaction) -> None:
        """Show the whole world state, with what each number means."""
        view = await self.bot.services.world_state.show(channel_id_of(interaction))
        embed = discord.Embed(title=f"World state · {view.title}", description=view.text)
        await interaction.response.send_message(embed=fit_embed(embed), ephemeral=True)

    @state.command(name="set")
    @app_commands.describe(
        path="What to change, e.g. player.hp or npcs.gwen.trust",
        value="The new value: a number, true/false, or text",
    )
    async def set_(self, interaction: discord.Interaction, path: str, value: str) -> None:
        """Correct one value (the host and server managers), checked like any change."""
        await interaction.response.defer(thinking=True)
        changed = await self.bot.services.world_state.set(
            channel_id_of(interaction), actor_of(interaction), path, value
        )
        await reply(interaction, f"World state updated: {changed}", ephemeral=False)


async def setup(bot: CampfireBot) -> None:
    await bot.add_cog(WorldStateCog(bot))
