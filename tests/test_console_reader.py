"""Completion at the console's prompt, as Discord's command picker offers it: commands, a
group's subcommands, the options not given yet, an option's choices, the newest buttons' keys."""

from __future__ import annotations

import discord
from discord import app_commands
from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document

from bot.console.reader import CommandCompleter


def tree() -> app_commands.CommandTree:
    commands = app_commands.CommandTree(discord.Client(intents=discord.Intents.none()))
    adventure = app_commands.Group(name="adventure", description="The adventures here")

    @adventure.command(name="list", description="List them")
    async def listed(interaction: discord.Interaction) -> None: ...

    @adventure.command(name="end", description="End one")
    async def ended(interaction: discord.Interaction) -> None: ...

    @app_commands.command(name="insights", description="What the narrator saw")
    @app_commands.describe(turn="Which turn", view="How much")
    @app_commands.choices(
        view=[
            app_commands.Choice(name="short", value="s"),
            app_commands.Choice(name="all of it", value="a"),
        ]
    )
    async def insights(
        interaction: discord.Interaction, turn: int, view: app_commands.Choice[str] | None = None
    ) -> None: ...

    commands.add_command(adventure)
    commands.add_command(insights)
    return commands


def offered(text: str) -> list[tuple[str, int]]:
    completer = CommandCompleter(tree(), lambda: ["continue", "retry", "prev"])
    return [
        (c.text, c.start_position)
        for c in completer.get_completions(Document(text), CompleteEvent())
    ]


def test_commands_then_subcommands_then_options_then_choices():
    assert offered("/adv") == [("/adventure", -4)]
    assert offered("/a") == [("/adventure", -2), ("/as", -2)]  # the console's own /as too
    assert offered("/adventure ") == [("end", 0), ("list", 0)]
    assert offered("/adventure l") == [("list", -1)]
    assert offered("/insights ") == [("turn:", 0), ("view:", 0)]
    assert offered("/insights turn:2 ") == [("view:", 0)]  # given once, not offered again
    assert offered("/insights view:") == [("short", 0), ('"all of it"', 0)]
    assert offered("/insights view:a") == [('"all of it"', -1)]


def test_buttons_by_key_and_nothing_for_plain_text():
    assert offered("!re") == [("!retry", -3)]
    assert offered("open the door") == []
