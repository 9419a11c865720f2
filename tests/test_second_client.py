"""A second client proves the seam between the cogs and the bot that holds them.

The cogs know the bot they run in only as the protocol of what they use (``cogs.ui.CampfireBot``).
Here they are loaded into a plain, unsharded ``discord.ext.commands.Bot`` that meets it (the
engine's services, a narrator, round panels), and driven by dpytest, which replaces discord.py's
HTTP client and gateway state with its own (and refuses an ``AutoShardedClient``, which
Campfire's own bot is). The two drivers test different things: the stand-in
(``bot.standin``) is Discord as the bot meets it over HTTP and the gateway, with Discord's
limits, permissions and error codes, and runs Campfire's real bot; dpytest builds discord.py's
objects in the process and records what the bot sent, so it shows that nothing in the cogs
depends on the process, the sharding or the stand-in.

Plain-message play (``cogs.message_play``) is what dpytest drives: it has no interactions.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import discord
import discord.ext.test as dpytest
import pytest
from discord.ext import commands

from bot.config import Settings, load_settings
from bot.discord_bot import gateway_intents
from bot.services import build_services
from cogs.message_play import MESSAGE_PLAY_OFF, NO_ADVENTURE
from cogs.ui.discovery import load_cogs, persistent_items
from cogs.ui.narration import Narrator
from cogs.ui.pacing import RatePacer
from cogs.ui.round_panels import RoundPanels
from engine.people.access.rules import Actor
from engine.services import Services
from tests.fakes.openai_server import FakeModelServer


class PlainBot(commands.Bot):
    """An unsharded discord.py bot holding Campfire's services: what ``cogs.ui.CampfireBot``
    asks of a bot, and nothing of ``bot.discord_bot`` (no scheduler, no metrics, no shards)."""

    services: Services
    narrator: Narrator
    round_panels: RoundPanels
    #: It always holds services (``python -m bot sync``'s bot is the one that does not).
    commands_only = False

    def __init__(self, settings: Settings) -> None:
        intents = gateway_intents(message_content=True)
        # dpytest keeps its members in discord.py's member cache, which caches members only
        # under the Members intent (Campfire's own bot asks for none: an interaction carries its
        # member).
        intents.members = True
        super().__init__(
            command_prefix=commands.when_mentioned,
            intents=intents,
            allowed_mentions=discord.AllowedMentions.none(),
        )
        self.settings = settings

    async def on_message(self, message: discord.Message, /) -> None:
        """No text commands, as in Campfire's bot: a message is play (``cogs.message_play``)."""

    async def hold(self, services: Services) -> None:
        """Build the front end over ``services`` as Campfire's bot does: the narrator, the round
        panels, every cog found in ``cogs/`` and every persistent button."""
        self.services = services
        # dpytest answers at once: no pacing to Discord's windows is needed.
        self.narrator = Narrator(self, RatePacer(per_seconds=0.05, global_per_second=1000))
        self.round_panels = RoundPanels(self)
        await load_cogs(self)
        self.add_dynamic_items(*persistent_items())


@pytest.fixture
async def plain_bot(
    tmp_path: Path, fake_model: FakeModelServer, database_url: str
) -> AsyncIterator[PlainBot]:
    settings = load_settings(
        data_dir=tmp_path / "data",
        database_url=database_url,
        model_url=fake_model.base_url,
        model_name=fake_model.model,
        model_timeout=3,
        turns_per_user_per_minute=10_000,
        turns_per_adventure_per_minute=10_000,
    )
    bot = PlainBot(settings)
    await bot._async_setup_hook()  # the loop discord.py's login would set up
    dpytest.configure(bot, guilds=["The Hearth"], text_channels=["adventures"], members=["alice"])
    await bot.hold(await build_services(settings))
    try:
        yield bot
    finally:
        await dpytest.empty_queue()
        bot.round_panels.cancel()
        await bot.services.play.queue.close()
        await bot.services.aclose()


def _actor(member: discord.Member) -> Actor:
    guild = member.guild
    return Actor(
        user_id=member.id,
        user_name=member.display_name,
        server_id=guild.id,
        server_name=guild.name,
        manages_server=True,
    )


async def _adventure_with_message_play(bot: PlainBot, on: bool) -> discord.TextChannel:
    config = dpytest.get_config()
    channel = config.channels[0]
    alice = config.members[0]
    await bot.services.play.start(_actor(alice), channel.id, "Lantern")
    await bot.services.generation_settings.set(channel.id, _actor(alice), message_play=on)
    return channel


async def _story(bot: PlainBot, channel_id: int) -> list[str]:
    return await bot.services.play.recent_story(channel_id)


async def test_a_mention_where_no_adventure_runs_is_answered(plain_bot: PlainBot):
    me = plain_bot.user
    assert me is not None
    await dpytest.message(f"<@{me.id}> I look around.")
    assert dpytest.verify().message().contains().content(NO_ADVENTURE)


async def test_a_mention_where_message_play_is_off_is_refused(plain_bot: PlainBot):
    channel = await _adventure_with_message_play(plain_bot, on=False)
    before = await _story(plain_bot, channel.id)
    me = plain_bot.user
    assert me is not None
    await dpytest.message(f"<@{me.id}> I look around.")
    assert dpytest.verify().message().contains().content(MESSAGE_PLAY_OFF)
    assert await _story(plain_bot, channel.id) == before


async def test_a_plain_message_plays_and_the_narration_is_posted(
    plain_bot: PlainBot, fake_model: FakeModelServer
):
    channel = await _adventure_with_message_play(plain_bot, on=True)
    fake_model.queue("The wick catches, and the road ahead glows amber.")
    await dpytest.message("I light the first lantern.")
    story = await _story(plain_bot, channel.id)
    # In a server the action is told in its actor's name (characters).
    assert story[-2:] == [
        "> alice_0_nick lights the first lantern.",
        "The wick catches, and the road ahead glows amber.",
    ]
    # The narration streamed into one message, edited to its end ("▌" marks a stream still
    # being written); the player's own message shows the action.
    posted = [message async for message in channel.history(limit=10)]
    bots = [message for message in posted if message.author == plain_bot.user]
    assert [message.content for message in bots] == [
        "The wick catches, and the road ahead glows amber."
    ]


async def test_a_mention_plays_without_the_mention(
    plain_bot: PlainBot, fake_model: FakeModelServer
):
    channel = await _adventure_with_message_play(plain_bot, on=True)
    me = plain_bot.user
    assert me is not None
    fake_model.queue("The gate groans open.")
    await dpytest.message(f"<@{me.id}> I open the gate.")
    assert (await _story(plain_bot, channel.id))[-2:] == [
        "> alice_0_nick opens the gate.",
        "The gate groans open.",
    ]
