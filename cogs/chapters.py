"""/chapters: where the adventure stands in its chapters, and the recap of each one ended
(every version, as written). The answer is private."""

from __future__ import annotations

from typing import TYPE_CHECKING

import discord
from discord import app_commands
from discord.ext import commands

from cogs.ui.content import fit_embed
from cogs.ui.interaction import actor_of, channel_id_of

if TYPE_CHECKING:
    from cogs.ui import CampfireBot
    from engine.story.chapters.service import ChaptersView

#: Discord's embed description holds 4,096 characters (discord.com/developers/docs/resources/
#: message#embed-object-embed-limits); ``fit_embed`` cuts what is over, oldest recaps last.


def chapters_text(view: ChaptersView) -> str:
    lines = ["\n".join(view.outline)]
    for recap in reversed(view.recaps):  # the newest first: the earliest give way to the cut
        version = f" · version {recap.version} of {recap.versions}" if recap.versions > 1 else ""
        block = [f"**Chapter {recap.number}: {recap.title}**{version}"]
        block.append(recap.text or "*(no recap from the model: the facts stand alone)*")
        block += [f"-# {line}" for line in recap.facts]
        if not recap.stands:
            block.append("-# Kept from a turn no longer in the story (undone, retried or left).")
        if recap.epilogue:
            block.append(f"**Epilogue**\n{recap.epilogue}")
        lines.append("\n".join(block))
    if not view.recaps:
        lines.append("No chapter has ended yet.")
    return "\n\n".join(lines)


class ChaptersCog(commands.Cog):
    def __init__(self, bot: CampfireBot) -> None:
        self.bot = bot

    @app_commands.command(name="chapters")
    async def chapters(self, interaction: discord.Interaction) -> None:
        """The adventure's chapters: where the story stands, and each ended chapter's recap."""
        await interaction.response.defer(thinking=True, ephemeral=True)
        view = await self.bot.services.chapters.overview(
            channel_id_of(interaction), actor_of(interaction)
        )
        embed = discord.Embed(title=f"Chapters · {view.title}", description=chapters_text(view))
        await interaction.followup.send(embed=fit_embed(embed), ephemeral=True)


async def setup(bot: CampfireBot) -> None:
    await bot.add_cog(ChaptersCog(bot))
