"""/usage: how much of the day's budget on Campfire's model a player (and, in a server, the
server) has used, and the caps. The answer is private."""

from __future__ import annotations

from typing import TYPE_CHECKING

import discord
from discord import app_commands
from discord.ext import commands

from cogs.ui.content import fit_text
from cogs.ui.interaction import actor_of

if TYPE_CHECKING:
    from cogs.ui import CampfireBot
    from engine.people.limits import UsageToday


def usage_text(usage: UsageToday) -> str:
    def line(who: str, tokens: int, turns: int, cap: int) -> str:
        of = f" of {cap:,}" if cap else " (no daily cap)"
        return f"• {who}: {tokens:,}{of} tokens, {turns:,} turn{'s' if turns != 1 else ''}"

    lines = [
        "**Today's use of Campfire's model** (UTC day)",
        line("You", usage.user_tokens, usage.user_turns, usage.user_cap),
    ]
    if usage.server_tokens is not None and usage.server_turns is not None:
        lines.append(line("This server", usage.server_tokens, usage.server_turns, usage.server_cap))
    reset = discord.utils.format_dt(usage.resets_at, "R")
    lines += [
        f"The count starts again at midnight UTC, {reset}.",
        "A model of your own (`/model set`) is not counted or capped.",
    ]
    return "\n".join(lines)


class UsageCog(commands.Cog):
    def __init__(self, bot: CampfireBot) -> None:
        self.bot = bot

    @app_commands.command(name="usage")
    async def usage(self, interaction: discord.Interaction) -> None:
        """Your use of Campfire's model today (and this server's), and the daily caps."""
        await interaction.response.defer(thinking=True, ephemeral=True)
        found = await self.bot.services.limits.usage(actor_of(interaction))
        await interaction.followup.send(fit_text(usage_text(found)), ephemeral=True)


async def setup(bot: CampfireBot) -> None:
    await bot.add_cog(UsageCog(bot))
