"""/narrative: the story's typed narrative state (``engine.story.narrative``), shown to anyone and
corrected by the host.

Issue 21 names these ``/story state`` and ``/story correct``, but ``/story`` is already the
command that plays a story action, and Discord makes a command with subcommands unusable as a
command of its own (discord.com/developers/docs/interactions/application-commands,
"Subcommands and Subcommand Groups"), so the group is ``/narrative``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import discord
from discord import app_commands
from discord.ext import commands

from cogs.ui.interaction import actor_of, channel_id_of
from cogs.ui.replies import reply
from engine.story.narrative.service import CORRECTIONS

if TYPE_CHECKING:
    from cogs.ui import CampfireBot

#: Discord's limit on an option's text (its ``max_length`` may be at most 6,000).
SUBJECT_MAX = 300


class NarrativeCog(commands.Cog):
    narrative = app_commands.Group(
        name="narrative", description="The story's state: who is where, who holds what, threads"
    )

    def __init__(self, bot: CampfireBot) -> None:
        self.bot = bot

    @narrative.command(name="state")
    async def state(self, interaction: discord.Interaction) -> None:
        """Who is where, who holds what, what is true, the open threads, and what changed."""
        await interaction.response.defer(ephemeral=True, thinking=True)
        view = await self.bot.services.story_state.show(channel_id_of(interaction))
        text = view.text
        if not view.tracking:
            text = f"-# Tracking is off (the host turns it on with `/narrative track`).\n{text}"
        if view.last_turn:
            lines = [
                f"- {change.line}" + (" (the host's correction)" if change.by == "host" else "")
                for change in view.last_turn
            ]
            when = f"turn {view.turn_number}" if view.turn_number else "the opening"
            text += f"\n\n**What changed at {when}**\n" + "\n".join(lines)
        embed = discord.Embed(title=f"Story state · {view.title}", description=text)
        await reply(interaction, embed=embed, ephemeral=True)

    @narrative.command(name="correct")
    @app_commands.describe(
        what="What to fix",
        subject=("Who or what: a name; a fact's or thread's text; a relation as “A > B”"),
        value=(
            "The new value: a place, a holder, a kind, what a fact is about, a relation "
            "(empty: none)"
        ),
    )
    @app_commands.choices(what=[app_commands.Choice(name=c, value=c) for c in CORRECTIONS])
    async def correct(
        self,
        interaction: discord.Interaction,
        what: app_commands.Choice[str],
        subject: app_commands.Range[str, 1, SUBJECT_MAX],
        value: app_commands.Range[str, 0, SUBJECT_MAX] = "",
    ) -> None:
        """Correct the story's state (the host): the host's word outranks the narration."""
        await interaction.response.defer(thinking=True)
        changed = await self.bot.services.story_state.correct(
            channel_id_of(interaction), actor_of(interaction), what.value, subject, value
        )
        await reply(interaction, f"Story state corrected:\n{changed}", ephemeral=False)

    @narrative.command(name="track")
    @app_commands.describe(on="Whether the narrator keeps the story's state")
    async def track(self, interaction: discord.Interaction, on: bool) -> None:
        """Turn the story's state tracking on or off (the host)."""
        await interaction.response.defer(thinking=True)
        said = await self.bot.services.story_state.track(
            channel_id_of(interaction), actor_of(interaction), on
        )
        await reply(interaction, said, ephemeral=False)


async def setup(bot: CampfireBot) -> None:
    await bot.add_cog(NarrativeCog(bot))
