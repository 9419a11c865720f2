"""/server …: this server's Campfire settings, for those who manage the server.

One group, so that Discord hides all of it from members without Manage Server
(``default_member_permissions`` applies to top-level commands and groups only; discord-api-docs,
Application Commands, Permissions). Hidden is not refused: a server's admins may show a command
to others (Server Settings → Integrations), so the engine's rights check (``engine.people.access``)
stays the rule. Every setting here is read and written by ``engine.people.servers``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import discord
from discord import app_commands
from discord.ext import commands

from cogs.ui.interaction import actor_of
from cogs.ui.replies import reply

if TYPE_CHECKING:
    from cogs.ui import CampfireBot

#: Who Discord shows /server to by default: members with Manage Server (and administrators).
SERVER_ADMIN_PERMISSIONS = discord.Permissions(manage_guild=True)


class ServerCog(commands.Cog):
    server = app_commands.Group(
        name="server",
        description="This server's Campfire settings (Manage Server)",
        default_permissions=SERVER_ADMIN_PERMISSIONS,
        # Settings of a server mean nothing in a DM: servers only (``contexts``; the deprecated
        # ``dm_permission`` agrees).
        guild_only=True,
        allowed_contexts=app_commands.AppCommandContext(guild=True, dm_channel=False),
    )

    def __init__(self, bot: CampfireBot) -> None:
        self.bot = bot

    @server.command(name="importers")
    @app_commands.describe(role="Members with this role may import; leave empty for managers only")
    async def importers(
        self, interaction: discord.Interaction, role: discord.Role | None = None
    ) -> None:
        """Choose who besides server managers may import scenarios."""
        # Answered before the write: Discord waits 3 s for the first answer.
        await interaction.response.defer(ephemeral=True, thinking=True)
        await self.bot.services.servers.set_importer_role(
            actor_of(interaction), role.id if role else None
        )
        if role is None:
            message = "Only members with the Manage Server permission may import scenarios now."
        else:
            message = f"Members with {role.mention} may now import scenarios, besides managers."
        await reply(interaction, message)

    @server.command(name="suggestions")
    @app_commands.describe(on="Offer suggested actions as buttons under each turn")
    async def suggestions(self, interaction: discord.Interaction, on: bool) -> None:
        """Turn suggested actions under the turns on or off in this server's adventures."""
        # Answered before the write: Discord waits 3 s for the first answer.
        await interaction.response.defer(ephemeral=True, thinking=True)
        await self.bot.services.servers.switch_suggestions(actor_of(interaction), on=on)
        if on:
            message = "Turns in this server's adventures offer suggested actions again."
        else:
            message = "Turns in this server's adventures offer no suggested actions now."
        await reply(interaction, message)


async def setup(bot: CampfireBot) -> None:
    await bot.add_cog(ServerCog(bot))
