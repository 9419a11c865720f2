"""Registering application commands: the stand-in checks each definition against Discord's
schema (discord-api-docs, Application Commands) and refuses a broken one with 50035 and the
nested errors, as Discord does, so a command tree Discord would refuse fails here first."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import discord
import pytest
from discord.ext import commands

from bot.standin import FakeDiscord, StandIn
from bot.standin.command_schema import check_commands

STRING, INTEGER, SUB_COMMAND, SUB_COMMAND_GROUP = 3, 4, 1, 2


@pytest.fixture
async def fake(caplog: pytest.LogCaptureFixture) -> AsyncIterator[tuple[commands.Bot, FakeDiscord]]:
    caplog.set_level(logging.WARNING)
    bot = commands.Bot(command_prefix="!", intents=discord.Intents.default())
    standin = StandIn(bot)
    standin.fake.add_guild("Commands")
    async with standin:
        yield bot, standin.fake
    assert standin.fake.unknown_routes == []


def command(name: str = "play", **fields: Any) -> dict[str, Any]:
    return {"type": 1, "name": name, "description": "Play a turn", **fields}


def option(name: str = "action", kind: int = STRING, **fields: Any) -> dict[str, Any]:
    return {"type": kind, "name": name, "description": "What you do", **fields}


def sub(name: str, kind: int = SUB_COMMAND, *options: dict[str, Any]) -> dict[str, Any]:
    return {"type": kind, "name": name, "description": f"The {name} part", "options": list(options)}


def choice(name: str, value: Any) -> dict[str, Any]:
    return {"name": name, "value": value}


def _size_of(n_options: int, n_choices: int) -> dict[str, Any]:
    """A command of about 200 characters per choice (name and value of 100 each)."""
    return command(
        options=[
            option(
                f"o{i}",
                choices=[
                    choice(f"{i}-{k}".ljust(100, "n"), f"{i}-{k}".ljust(100, "v"))
                    for k in range(n_choices)
                ],
            )
            for i in range(n_options)
        ]
    )


BROKEN: list[Any] = [
    pytest.param([command("x" * 33)], "In 0.name:", id="name of 33"),
    pytest.param([command("")], "In 0.name:", id="empty name"),
    pytest.param([command("Play")], "In 0.name:", id="uppercase name"),
    pytest.param([command("play now")], "In 0.name:", id="space in name"),
    pytest.param(
        [command(name_localizations={"fr": "Jouer"})],
        "In 0.name_localizations.fr:",
        id="localized name",
    ),
    pytest.param([command(description="")], "In 0.description:", id="empty description"),
    pytest.param([command(description="d" * 101)], "In 0.description:", id="description of 101"),
    pytest.param(
        [command(description_localizations={"de": "d" * 101})],
        "In 0.description_localizations.de:",
        id="localized description",
    ),
    pytest.param([command(options=[option("Action")])], "In 0.options.0.name:", id="option name"),
    pytest.param(
        [command(options=[option(description="d" * 101)])],
        "In 0.options.0.description:",
        id="option description",
    ),
    pytest.param(
        [command(options=[option("a"), option("b", required=True)])],
        "In 0.options.1.required:",
        id="required after optional",
    ),
    pytest.param(
        [command(options=[option("a"), option("a")])],
        "In 0.options.1.name:",
        id="same option twice",
    ),
    pytest.param(
        [command(options=[option(f"o{i}") for i in range(26)])], "In 0.options:", id="26 options"
    ),
    pytest.param(
        [command(options=[option(choices=[choice(f"c{i}", f"c{i}") for i in range(26)])])],
        "In 0.options.0.choices:",
        id="26 choices",
    ),
    pytest.param(
        [command(options=[option(choices=[choice("n" * 101, "v")])])],
        "In 0.options.0.choices.0.name:",
        id="choice name of 101",
    ),
    pytest.param(
        [command(options=[option(choices=[choice("n", "v" * 101)])])],
        "In 0.options.0.choices.0.value:",
        id="choice value of 101",
    ),
    pytest.param(
        [command(options=[option(choices=[choice("n", "v")], autocomplete=True)])],
        "In 0.options.0.autocomplete:",
        id="choices and autocomplete",
    ),
    pytest.param(
        [command(options=[option(max_length=6001)])],
        "In 0.options.0.max_length:",
        id="max_length",
    ),
    pytest.param(
        [command(options=[sub("new", SUB_COMMAND, option()), option("extra")])],
        "In 0.options:",
        id="subcommand beside a parameter",
    ),
    pytest.param(
        [command(options=[sub("outer", SUB_COMMAND_GROUP, sub("inner", SUB_COMMAND_GROUP))])],
        "In 0.options.0.options.0.type:",
        id="group in a group",
    ),
    pytest.param(
        [command(options=[sub("outer", SUB_COMMAND_GROUP, option())])],
        "In 0.options.0.options.0.type:",
        id="parameter in a group",
    ),
    pytest.param(
        [command(options=[sub("new", SUB_COMMAND, sub("deeper"))])],
        "In 0.options.0.options.0.type:",
        id="subcommand in a subcommand",
    ),
    pytest.param(
        [command(options=[sub("new", SUB_COMMAND, *[option(f"o{i}") for i in range(26)])])],
        "In 0.options.0.options:",
        id="26 options in a subcommand",
    ),
    pytest.param([_size_of(2, 20)], "In 0: Command exceeds maximum size (8000)", id="8000"),
    pytest.param(
        [command(default_member_permissions="manage_guild")],
        "In 0.default_member_permissions:",
        id="permissions as a word",
    ),
    pytest.param([command(contexts=[0, 3])], "In 0.contexts.1:", id="unknown context"),
    pytest.param(
        [command(integration_types=[2])], "In 0.integration_types.0:", id="unknown install type"
    ),
    pytest.param([command("a"), command("a")], "In 1.name:", id="same name twice"),
    pytest.param(
        [{"type": 3, "name": "Bookmark", "description": "not for message commands"}],
        "In 0.description:",
        id="message command with a description",
    ),
]


@pytest.mark.parametrize(("commands_", "where"), BROKEN)
async def test_a_broken_definition_is_refused(
    fake: tuple[commands.Bot, FakeDiscord], commands_: list[dict[str, Any]], where: str
) -> None:
    bot, stand_in = fake
    with pytest.raises(discord.HTTPException) as info:
        await bot.http.bulk_upsert_global_commands(stand_in.world.application_id, commands_)
    assert (info.value.status, info.value.code) == (400, 50035)
    assert where in info.value.text
    assert stand_in.commands == {}  # nothing of a refused request is kept


async def test_guild_commands_follow_the_same_rules(fake: tuple[commands.Bot, FakeDiscord]) -> None:
    bot, stand_in = fake
    (guild,) = stand_in.world.guilds
    with pytest.raises(discord.HTTPException) as info:
        await bot.http.bulk_upsert_guild_commands(
            stand_in.world.application_id, guild, [command("Play")]
        )
    assert (info.value.status, info.value.code) == (400, 50035)


async def test_more_than_100_chat_input_commands_are_refused(
    fake: tuple[commands.Bot, FakeDiscord],
) -> None:
    bot, stand_in = fake
    app = stand_in.world.application_id
    with pytest.raises(discord.HTTPException) as info:
        await bot.http.bulk_upsert_global_commands(app, [command(f"c{i}") for i in range(101)])
    assert (info.value.status, info.value.code) == (400, 30032)
    # 100 of them, and user and message commands besides, are allowed.
    extra = [{"type": kind, "name": "Look", "description": ""} for kind in (2, 3)]
    stored = await bot.http.bulk_upsert_global_commands(
        app, [command(f"c{i}") for i in range(100)] + extra
    )
    assert len(stored) == 102


def test_definitions_at_the_limits_are_accepted() -> None:
    assert (
        check_commands(
            [
                command(
                    "x" * 32,
                    description="d" * 100,
                    default_member_permissions=str(1 << 5),
                    contexts=[0, 1],
                    integration_types=[0],
                    # Names may use any script's letters and numbers, "-", "_" and "'".
                    name_localizations={"ja": "遊ぶ", "hi": "खेलें", "fr": "l'aventure_2"},
                    options=[option(f"o{i}", required=i < 3) for i in range(25)],
                ),
                command(
                    "tree",
                    options=[
                        sub("branch", SUB_COMMAND_GROUP, sub("new", SUB_COMMAND, option())),
                        sub("show"),
                    ],
                ),
                _size_of(1, 25),
                command("count", options=[option("n", INTEGER, choices=[choice("one", 1)])]),
            ]
        )
        is None
    )


def test_the_longest_localisation_counts_towards_the_size() -> None:
    # 7,654 characters: under 8,000 until the localisations, longer than the defaults, count.
    base = _size_of(2, 19)
    base["options"].append(option("o2"))
    assert check_commands([base]) is None
    for item in [base, *base["options"]]:
        item["name_localizations"] = {"fr": "n" * 32}
        item["description_localizations"] = {"fr": "d" * 100}
    problem = check_commands([base])
    assert problem is not None and problem[1]["code"] == 50035
    assert "APPLICATION_COMMAND_TOO_LARGE" in str(problem[1]["errors"]["0"])
