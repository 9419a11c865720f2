"""Who is here: every person who interacts gets a user row, and servers joined or left are
recorded (a left server's data goes a grace period later unless the bot is invited back)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import discord
from discord.ext import commands

from cogs.context import actor_of
from cogs.profile import DELETE_COMMAND

if TYPE_CHECKING:
    from bot.discord_bot import CampfireBot

log = logging.getLogger(__name__)


class MembershipCog(commands.Cog):
    def __init__(self, bot: CampfireBot) -> None:
        self.bot = bot

    @commands.Cog.listener()
    async def on_interaction(self, interaction: discord.Interaction[CampfireBot]) -> None:
        command = interaction.command
        if command is not None and command.qualified_name == DELETE_COMMAND:
            # The one interaction after which nothing of them may stay: recorded now, it could
            # land after the deletion it asks for (both run at once) and make their row again.
            return
        try:
            await self.bot.services.profiles.record_contact(actor_of(interaction))
        except Exception:
            # Bookkeeping must never cost the player their command.
            log.warning("could not record contact with %s", interaction.user.id, exc_info=True)

    @commands.Cog.listener()
    async def on_guild_join(self, guild: discord.Guild) -> None:
        await self.bot.services.profiles.server_joined(guild.id, guild.name)

    @commands.Cog.listener()
    async def on_guild_remove(self, guild: discord.Guild) -> None:
        await self.bot.services.profiles.server_left(guild.id)


async def setup(bot: CampfireBot) -> None:
    await bot.add_cog(MembershipCog(bot))
