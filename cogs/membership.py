"""Who is here: every person who interacts gets a user row, and servers joined or left are
recorded (a left server's data goes a grace period later unless the bot is invited back).

A contact is recorded after the interaction is answered, never before: discord.py dispatches
``on_interaction`` as its own task, running alongside the command, and a write there could hold
the database while the command still has to answer within Discord's 3 seconds. It is recorded
at most once an hour for a person in a place (``engine.people.profiles.CONTACT_INTERVAL_S``), and
never for autocomplete, which is typing, not a visit.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

import discord
from discord.ext import commands

from cogs.profile import DELETE_COMMAND
from cogs.ui.interaction import actor_of

if TYPE_CHECKING:
    from cogs.ui import CampfireBot

log = logging.getLogger(__name__)

#: How long a contact record waits for its interaction's answer: past Discord's 3 seconds the
#: interaction has failed, and the record is written all the same.
ANSWER_WAIT_S = 3.5
#: How often it looks (discord.py marks a response done, but offers nothing to wait on).
ANSWER_POLL_S = 0.05


async def answered(interaction: discord.Interaction) -> None:
    """Until ``interaction`` has its first answer (a reply, a defer or a form), or could no
    longer get one."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + ANSWER_WAIT_S
    while not interaction.response.is_done() and loop.time() < deadline:  # noqa: ASYNC110
        await asyncio.sleep(ANSWER_POLL_S)


class MembershipCog(commands.Cog):
    def __init__(self, bot: CampfireBot) -> None:
        self.bot = bot

    @commands.Cog.listener()
    async def on_interaction(self, interaction: discord.Interaction) -> None:
        if interaction.type is discord.InteractionType.autocomplete:
            return
        command = interaction.command
        if command is not None and command.qualified_name == DELETE_COMMAND:
            # The one interaction after which nothing of them may stay: recorded now, it could
            # land after the deletion it asks for (both run at once) and make their row again.
            return
        try:
            await self.bot.services.profiles.record_contact(
                actor_of(interaction), after=lambda: answered(interaction)
            )
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
