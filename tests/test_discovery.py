"""Cogs and persistent buttons are found where they are declared (``cogs.ui.discovery``): a
running bot loads every cog module and registers every button class, so none can be forgotten
in a list and die at a restart."""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

import discord
import pytest

import cogs
from cogs.ui.discovery import cog_load_order, extension_names, persistent_items
from tests.discord_env import DiscordEnv


def declared_buttons() -> set[str]:
    """Every ``class X(… DynamicItem[…] …, template=…)`` in the source under cogs/, by name."""
    found = set()
    for path in sorted(Path(cogs.__file__).parent.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        for match in re.finditer(r"^class (\w+)\((?:[^)]|\n)*?DynamicItem\[", text, re.M):
            found.add(match.group(1))
    return found


def test_every_button_declared_in_the_source_is_found():
    names = {item.__name__ for item in persistent_items()}
    assert names == declared_buttons()
    # Those whose loss once meant a dead button after a restart, among them.
    assert {"RetryButton", "ReasoningButton", "ListPageButton", "SuggestionButton"} <= names


def test_every_cog_module_is_an_extension_and_group_additions_load_after_the_group():
    modules = {
        info.name
        for info in pkgutil.iter_modules(cogs.__path__, "cogs.")
        if not info.ispkg and hasattr(importlib.import_module(info.name), "setup")
    }
    order = extension_names()
    assert set(order) == modules and len(order) == len(modules)
    for adds_to_the_group in (
        "cogs.adventure_files",
        "cogs.adventure_settings",
        "cogs.adventure_shelf",
    ):
        assert order.index("cogs.steering") < order.index(adds_to_the_group)


def test_a_load_after_loop_is_refused(monkeypatch):
    steering = importlib.import_module("cogs.steering")
    monkeypatch.setattr(steering, "LOAD_AFTER", ("cogs.adventure_files",), raising=False)
    with pytest.raises(RuntimeError, match="LOAD_AFTER loops"):
        cog_load_order()


async def test_the_running_bot_has_every_cog_and_button(env: DiscordEnv):
    registered = set(env.bot._connection._view_store._dynamic_items.values())
    assert registered == set(persistent_items())
    # Each cog module's setup added its cog (discovery.load_cogs).
    assert {type(cog).__module__ for cog in env.bot.cogs.values()} == set(extension_names())
    assert isinstance(env.bot.tree.get_command("adventure"), discord.app_commands.Group)


async def test_two_bots_in_one_process_each_hold_their_own_commands(env: DiscordEnv):
    """Cog modules run once a process (``load_cogs``), yet a second bot beside the first (tests
    run two; ``python -m bot sync`` builds a commands-only one) gets its own commands: those
    added to another cog's group are copies whose parent is that bot's group."""
    from bot.discord_bot import CampfireBot

    second = CampfireBot(env.bot.settings, commands_only=True)
    async with second:  # as ``python -m bot sync`` holds it; leaving closes it
        await second.setup_hook()
        for name in ("adventure", "card"):
            first_group = env.bot.tree.get_command(name)
            second_group = second.tree.get_command(name)
            assert isinstance(first_group, discord.app_commands.Group)
            assert isinstance(second_group, discord.app_commands.Group)
            assert first_group is not second_group
            assert {c.name for c in first_group.commands} == {c.name for c in second_group.commands}
            for command in first_group.commands:
                assert command.parent is first_group
                assert command is not second_group.get_command(command.name)
            for command in second_group.commands:
                assert command.parent is second_group
    # The first bot's commands are untouched by the second's closing (its cogs taking theirs back).
    adventure = env.bot.tree.get_command("adventure")
    assert isinstance(adventure, discord.app_commands.Group)
    assert adventure.get_command("export") is not None
