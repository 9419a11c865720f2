"""/profile: what Campfire stores about you, keeping it, and deleting it. Answers are private,
and each command defers before it writes."""

from __future__ import annotations

from typing import TYPE_CHECKING

import discord
from discord import app_commands
from discord.ext import commands

from cogs.ui.content import fit_text
from cogs.ui.content_rules import RatingChoice, chosen_rating
from cogs.ui.interaction import actor_of
from engine.errors import InvalidInput

if TYPE_CHECKING:
    from cogs.ui import CampfireBot
    from engine.people.profiles import Profile

#: What a person types to confirm deleting their data.
CONFIRM_WORD = "delete"
#: The command that deletes it (no contact is recorded for it: cogs.membership).
DELETE_COMMAND = "profile delete"


def profile_text(profile: Profile) -> str:
    def when(moment) -> str:
        return discord.utils.format_dt(moment, "D")

    lines = [
        f"**What Campfire stores about you** ({discord.utils.escape_markdown(profile.name)})",
        f"First seen {when(profile.created_at)}, last seen {when(profile.last_seen_at)}.",
        f"• Scenarios you own: {profile.scenarios}",
        f"• Adventures of your own (DMs): {profile.own_adventures}",
        f"• Server adventures you host: {profile.hosted_adventures} (they belong to the server)",
        f"• Story entries you wrote: {profile.story_entries}",
        "",
    ]
    if profile.guest:
        lines.append(
            f"You are a guest: if you do not come back, your data is deleted after "
            f"{profile.retention_days} idle days (around {when(profile.removal_after)}). "
            "`/profile keep` keeps it."
        )
    elif profile.keep_data:
        lines.append("You chose to keep your data. `/profile keep keep:False` undoes that.")
    else:
        lines.append("Your data is kept because you own scenarios.")
    lines.append(
        f"`/profile delete confirm:{CONFIRM_WORD}` deletes all of it now: your scenarios, "
        "your own adventures and their stories. Server adventures stay with their server."
    )
    return "\n".join(lines)


async def _defer(interaction: discord.Interaction) -> None:
    """Before the database is written (a deletion may wait for a turn being stored)."""
    await interaction.response.defer(thinking=True, ephemeral=True)


class ProfileCog(commands.Cog):
    profile = app_commands.Group(name="profile", description="What Campfire stores about you")

    def __init__(self, bot: CampfireBot) -> None:
        self.bot = bot

    @profile.command(name="show")
    async def profile_show(self, interaction: discord.Interaction) -> None:
        """See what Campfire stores about you (to you alone)."""
        await _defer(interaction)  # asking refreshes "last seen", a write
        found = await self.bot.services.profiles.show(actor_of(interaction))
        await interaction.followup.send(fit_text(profile_text(found)), ephemeral=True)

    @profile.command(name="keep")
    @app_commands.describe(keep="Keep your data even if you stop playing for a while")
    async def profile_keep(self, interaction: discord.Interaction, keep: bool = True) -> None:
        """Keep your data (you are no longer a guest whose data goes when idle)."""
        profiles = self.bot.services.profiles
        await _defer(interaction)
        await profiles.keep(actor_of(interaction), keep)
        if keep:
            text = "Your data will be kept until you delete it with `/profile delete`."
        else:
            days = profiles.retention_days
            text = f"Your data will go after {days} idle days unless you own scenarios."
        await interaction.followup.send(text, ephemeral=True)

    @profile.command(name="delete")
    @app_commands.describe(confirm=f"Type {CONFIRM_WORD} to confirm")
    async def profile_delete(self, interaction: discord.Interaction, confirm: str) -> None:
        """Delete everything Campfire stores about you, now."""
        if confirm.strip().casefold() != CONFIRM_WORD:
            raise InvalidInput(
                f"Nothing was deleted: type `{CONFIRM_WORD}` in the confirm option to delete "
                "your data."
            )
        await _defer(interaction)
        # Their turns still queued or being written are dropped with it (engine.people.profiles).
        await self.bot.services.profiles.delete(actor_of(interaction))
        await interaction.followup.send(
            "Everything Campfire stored about you is deleted, and your actions still waiting "
            "or being written were dropped. Playing again starts afresh.",
            ephemeral=True,
        )

    @profile.command(name="rating")
    @app_commands.describe(
        level="safe, moderate or mature; default: the bot's; leave empty to see it"
    )
    async def profile_rating(
        self,
        interaction: discord.Interaction,
        level: RatingChoice | None = None,
    ) -> None:
        """The content rating of your own adventures in DMs with the bot."""
        await _defer(interaction)
        profiles = self.bot.services.profiles
        actor = actor_of(interaction)
        if level is None:
            rating = await profiles.rating(actor)
        else:
            rating = await profiles.set_rating(actor, chosen_rating(level))
        ceiling = profiles.content.ceiling.label
        await interaction.followup.send(
            f"Your adventures in DMs with the bot are rated **{rating.label}** (the bot allows "
            f"up to {ceiling}). In a server, the server's rating applies.",
            ephemeral=True,
        )


async def setup(bot: CampfireBot) -> None:
    await bot.add_cog(ProfileCog(bot))
