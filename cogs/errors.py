"""The error handler's cog: installs ``cogs.ui.errors.on_app_command_error`` on the command
tree while it is loaded."""

from __future__ import annotations

from typing import TYPE_CHECKING

from discord.ext import commands

from cogs.ui.errors import on_app_command_error

if TYPE_CHECKING:
    from cogs.ui import CampfireBot


class ErrorsCog(commands.Cog):
    def __init__(self, bot: CampfireBot) -> None:
        self.bot = bot

    async def cog_load(self) -> None:
        self._previous = self.bot.tree.on_error
        self.bot.tree.error(on_app_command_error)

    async def cog_unload(self) -> None:
        self.bot.tree.error(self._previous)


async def setup(bot: CampfireBot) -> None:
    await bot.add_cog(ErrorsCog(bot))
