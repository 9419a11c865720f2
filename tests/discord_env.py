"""Campfire's own bot on the local Discord stand-in, with the fake model behind it.

Loaded as a plugin by ``tests/conftest.py``, so the ``env`` fixture is there in every test
module; a test that needs other settings calls ``campfire_on_standin`` itself.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from bot.config import load_settings
from bot.discord_bot import CampfireBot
from bot.standin import FakeDiscord, StandIn
from tests.fakes.openai_server import FakeModelServer


@dataclass
class DiscordEnv:
    bot: CampfireBot
    standin: StandIn
    fake: FakeDiscord
    guild: int
    channel: int
    alice: int
    bob: int

    async def done(self) -> None:
        """Until the bot has finished with everything it was sent."""
        await self.standin.idle()

    def narration(self, channel_id: int) -> list[str]:
        """The bot's own channel messages there (not interaction responses), in order."""
        return [
            m.content
            for m in self.fake.messages(channel_id)
            if m.author_id == self.bot.user.id and m.interaction_id is None and not m.ephemeral
        ]


@asynccontextmanager
async def campfire_on_standin(
    tmp_path: Path,
    model: FakeModelServer,
    caplog: pytest.LogCaptureFixture,
    database_url: str,
    **settings,
) -> AsyncIterator[DiscordEnv]:
    """The bot on ``database_url`` (the ``database_url`` fixture: a copy of the migrated
    template, on each backend), its data folder in ``tmp_path``."""
    caplog.set_level(logging.WARNING)
    config = load_settings(
        data_dir=tmp_path / "data",
        database_url=database_url,
        model_url=model.base_url,
        model_name=model.model,
        model_timeout=3,
        **settings,
    )
    bot = CampfireBot(config)
    standin = StandIn(bot)
    fake = standin.fake
    guild = fake.add_guild("The Hearth")
    channel = fake.add_text_channel(guild, "adventures")
    alice = fake.add_user("alice", member_of=[guild], manage_guild=True)
    bob = fake.add_user("bob", member_of=[guild])
    async with standin:
        yield DiscordEnv(bot, standin, fake, guild, channel, alice, bob)
        await standin.idle()
    assert fake.unknown_routes == []
    assert fake.failures == []  # every interaction was acknowledged within 3 s
    assert fake.rate_limited == []  # the bot paced itself under Discord's limits
    # caplog.records holds this phase's records only (the fixture's teardown): the test's own
    # are the call phase's.
    records = [*caplog.get_records("setup"), *caplog.get_records("call"), *caplog.records]
    errors = [r.getMessage() for r in records if r.levelno >= logging.ERROR]
    assert errors == []


@pytest.fixture
async def env(
    tmp_path: Path,
    fake_model: FakeModelServer,
    caplog: pytest.LogCaptureFixture,
    database_url: str,
) -> AsyncIterator[DiscordEnv]:
    """Campfire on the stand-in with the default settings: a guild, a channel, alice (who
    manages the server) and bob."""
    async with campfire_on_standin(tmp_path, fake_model, caplog, database_url) as environment:
        yield environment
