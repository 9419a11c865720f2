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

from cogs.ui.content_rules import WORDS_HELP, RatingChoice, banned_text, chosen_rating, parse_words
from cogs.ui.interaction import actor_of
from cogs.ui.replies import reply
from engine.people.content import ContentPolicy
from engine.people.servers import ServerView

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

    @server.command(name="rating")
    @app_commands.describe(
        level="safe, moderate or mature (mature only in age-restricted channels); "
        "leave empty to see it"
    )
    async def rating(
        self,
        interaction: discord.Interaction,
        level: RatingChoice | None = None,
    ) -> None:
        """The content rating of this server's adventures: what the narrator may write."""
        await interaction.response.defer(ephemeral=True, thinking=True)
        servers = self.bot.services.servers
        actor = actor_of(interaction)
        if level is None:
            view = await servers.of_managed(actor)
        else:
            view = await servers.set_rating(actor, chosen_rating(level))
        await reply(interaction, rating_text(view, servers.content, changed=level is not None))

    @server.command(name="banned")
    @app_commands.describe(words=WORDS_HELP)
    async def banned(self, interaction: discord.Interaction, words: str | None = None) -> None:
        """Words no adventure of this server may use: actions holding one are refused."""
        await interaction.response.defer(ephemeral=True, thinking=True)
        servers = self.bot.services.servers
        actor = actor_of(interaction)
        if words is None:
            view = await servers.of_managed(actor)
        else:
            view = await servers.set_banned(actor, parse_words(words))
        await reply(interaction, banned_text(view.banned_words, "this server's adventures"))

    @server.command(name="reports")
    @app_commands.describe(
        channel="Where players' reports of turns go (the bot must be able to post there)",
        off="Turn reports off",
    )
    async def reports(
        self,
        interaction: discord.Interaction,
        channel: discord.TextChannel | None = None,
        off: bool = False,
    ) -> None:
        """Choose the channel where players' 🚩 reports of turns go, for your moderators."""
        await interaction.response.defer(ephemeral=True, thinking=True)
        servers = self.bot.services.servers
        actor = actor_of(interaction)
        if channel is not None and not off:
            lacking = reports_channel_lacks(channel)
            if lacking:
                await reply(
                    interaction,
                    f"⚠ Campfire cannot post reports in {channel.mention}: it lacks "
                    f"{lacking} there. Give it those, or choose another channel. Nothing "
                    "was changed.",
                )
                return
        if off:
            view = await servers.set_reports_channel(actor, None)
        elif channel is not None:
            view = await servers.set_reports_channel(actor, channel.id)
        else:
            view = await servers.of_managed(actor)
        if view.reports_channel_id is None:
            message = (
                "Reports are off: 🚩 Report under a turn's Insights tells players this server "
                "has no reports channel. Choose one with `/server reports channel:`."
            )
        else:
            lead = "Reports now go to" if channel is not None and not off else "Reports go to"
            message = (
                f"{lead} <#{view.reports_channel_id}>: players report a turn with 🚩 Report "
                "under its Insights; the report shows the turn's text, a link and an Undo "
                "button for the host and members who manage the server or its messages."
            )
        await reply(interaction, message)


def reports_channel_lacks(channel: discord.TextChannel) -> str:
    """The permissions the bot lacks to post a report in ``channel``, in words ("" if none)."""
    me = channel.guild.me
    if me is None:  # the member list not cached: the post itself will tell
        return ""
    permissions = channel.permissions_for(me)
    names = {
        "view_channel": "View Channel",
        "send_messages": "Send Messages",
        "embed_links": "Embed Links",
    }
    return ", ".join(label for name, label in names.items() if not getattr(permissions, name))


def rating_text(view: ServerView, policy: ContentPolicy, *, changed: bool) -> str:
    rating = view.content_rating or policy.default
    origin = "set for this server" if view.content_rating else "the bot's default"
    lead = "The content rating is now" if changed else "The content rating is"
    return (
        f"{lead} **{rating.label}** ({origin}; the bot allows up to {policy.ceiling.label}). "
        "In channels Discord does not mark age-restricted, adventures are held to moderate at "
        "most. A scenario rated higher than its place does not start there."
    )


async def setup(bot: CampfireBot) -> None:
    await bot.add_cog(ServerCog(bot))
