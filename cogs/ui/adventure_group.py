"""The one ``/adventure`` group: the steering cog's, to which other cogs add their commands when
they load (settings; files: export, import; the shelf: list, resume, end) and from which they
take them when they unload.

Those commands are declared once, in their modules, which a process executes once
(``cogs.ui.discovery.load_cogs``) and which may serve several bots at a time (tests run two): each
bot's group takes a copy of each, since adding a command makes the group its parent."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import TYPE_CHECKING

import discord
from discord import app_commands
from discord.ext import commands

from cogs.ui import bot_of
from cogs.ui.interaction import channel_id_of

if TYPE_CHECKING:
    from cogs.ui import CampfireBot

DESCRIPTION = "The adventures here: list, resume, end, settings, export, import"


def adventure_group(bot: CampfireBot) -> app_commands.Group:
    """The bot's ``/adventure`` group; made here when the steering cog is not loaded (a reduced
    bot), so that every cog adding to it adds to the same one."""
    group = bot.tree.get_command("adventure")
    if isinstance(group, app_commands.Group):
        return group
    group = app_commands.Group(name="adventure", description=DESCRIPTION)
    bot.tree.add_command(group)
    return group


class AdventureCommands(commands.Cog):
    """A cog whose ``COMMANDS`` belong to the ``/adventure`` group."""

    COMMANDS: Sequence[app_commands.Command] = ()

    def __init__(self, bot: CampfireBot) -> None:
        self.bot = bot

    async def cog_load(self) -> None:
        group = adventure_group(self.bot)
        for command in self.COMMANDS:
            group.add_command(copy.copy(command))

    async def cog_unload(self) -> None:
        _take_back(self.bot, "adventure", self.COMMANDS)


class CardCommands(commands.Cog):
    """A cog whose ``COMMANDS`` belong to the steering cog's ``/card`` group (its module says
    ``LOAD_AFTER = ("cogs.steering",)``: the group must be there to add to)."""

    COMMANDS: Sequence[app_commands.Command] = ()

    def __init__(self, bot: CampfireBot) -> None:
        self.bot = bot

    async def cog_load(self) -> None:
        group = self.bot.tree.get_command("card")
        assert isinstance(group, app_commands.Group), "the steering cog makes /card"
        for command in self.COMMANDS:
            group.add_command(copy.copy(command))

    async def cog_unload(self) -> None:
        _take_back(self.bot, "card", self.COMMANDS)


async def card_choices(
    interaction: discord.Interaction, current: str
) -> list[app_commands.Choice[str]]:
    """The autocomplete of every command that names one of the adventure's cards: their
    titles, each with its id as the value (``StoryCards.choices``)."""
    choices = await bot_of(interaction).services.story_cards.choices(
        channel_id_of(interaction), current
    )
    return [app_commands.Choice(name=label, value=value) for label, value in choices]


def _take_back(bot: CampfireBot, name: str, commands_: Sequence[app_commands.Command]) -> None:
    # Gone already when the cog that made the group unloaded first (the bot closing).
    group = bot.tree.get_command(name)
    if isinstance(group, app_commands.Group):
        for command in commands_:
            group.remove_command(command.name)
