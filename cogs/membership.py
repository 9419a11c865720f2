"""Who is here: every person who interacts gets a user row, and servers joined or left are
recorded (a left server's data goes a grace period later unless the bot is invited back)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import discord
from discord.ext import commands

from engine.guests import record_contact, server_joined, server_left

if TYPE_CHECKING:
    from bot.discord_bot import CampfireBot

log = logging.getLogger(__name__)


class MembershipCog(commands.Cog):
    def __init__(self, bot: CampfireBot) -> None:
        self.bot = bot

    @commands.Cog.listener()
    async def on_interaction(self, interaction: discord.Interaction) -> None:
        guild = interaction.guild
        try:
            await record_contact(
                self.bot.services.db,
                interaction.user.id,
                interaction.user.display_name,
                server_id=guild.id if guild is not None else None,
                server_name=guild.name if guild is not None else "",
            )
        except Exception:
            # Bookkeeping must never cost the player their command.
            log.warning("could not record contact with %s", interaction.user.id, exc_info=True)

    @commands.Cog.listener()
    async def on_guild_join(self, guild: discord.Guild) -> None:
        await server_joined(self.bot.services.db, guild.id, guild.name)

    @commands.Cog.listener()
    async def on_guild_remove(self, guild: discord.Guild) -> None:
        await server_left(self.bot.services.db, guild.id)


async def setup(bot: CampfireBot) -> None:
    await bot.add_cog(MembershipCog(bot))
