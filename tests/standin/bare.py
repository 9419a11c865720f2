"""A bare discord.py bot (not Campfire's) logged in to the stand-in, for the stand-in's own
tests: one server with a text channel, alice (who manages the server) and bob.

The same checks as for Campfire's bot (``tests.discord_env``) run when it stops: no unknown
route, no refusal the test did not declare with ``fake.expect``, nothing discord.py logged as
an error (what it cannot parse, a handler that raised).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import discord
import pytest

from bot.standin import FakeDiscord, StandIn


@dataclass
class Place:
    fake: FakeDiscord
    guild: int
    channel: int
    alice: int
    bob: int


@asynccontextmanager
async def on_standin(
    bot: discord.Client, caplog: pytest.LogCaptureFixture, *, server: str = "Campfire Test"
) -> AsyncIterator[Place]:
    caplog.set_level(logging.WARNING)
    standin = StandIn(bot)
    fake = standin.fake
    guild = fake.add_guild(server)
    channel = fake.add_channel(guild, "adventures")
    alice = fake.add_user("alice", member_of=[guild], manage_guild=True)
    bob = fake.add_user("bob", member_of=[guild])
    async with standin:
        yield Place(fake, guild, channel, alice, bob)
        await fake.settle()
    assert fake.unknown_routes == []
    assert fake.unexpected_refusals() == []
    errors = [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.ERROR and r.name.startswith("discord")
    ]
    assert errors == []
