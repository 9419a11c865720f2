"""Sharding, intents and where commands appear: Campfire's bot on a stand-in Discord whose gateway
shards as Discord's does (discord-api-docs, Gateway: Sharding, Gateway Intents)."""

from __future__ import annotations

import asyncio

import discord
import pytest
from discord.ext import commands

from bot.__main__ import _discord
from bot.config import ConfigError, load_settings
from bot.standin import FakeDiscord, StandIn
from bot.standin.gateway import (
    CLOSE_SHARDING_REQUIRED,
    INTENT_GUILD_MEMBERS,
    MAX_GUILDS_PER_SHARD,
    GatewaySession,
    shard_of,
)
from bot.standin.harness import point_at, point_back
from cogs.server import SERVER_ADMIN_PERMISSIONS
from engine.storage.models import Server, utcnow
from tests.discord_env import DiscordEnv, campfire_on_standin
from tests.fakes.openai_server import Reply

#: One server more than one gateway connection may hold.
TOO_MANY = MAX_GUILDS_PER_SHARD + 1


def plain_bot(intents: discord.Intents) -> commands.Bot:
    return commands.Bot(command_prefix="!", intents=intents)


def sessions_by_shard(fake: FakeDiscord) -> dict[int, GatewaySession]:
    return {s.shard_id: s for s in fake.gateway.sessions if s.identified}


# -- the stand-in's gateway, with a plain bot --------------------------------------------------


async def test_one_connection_past_2500_servers_is_closed_with_sharding_required():
    bot = plain_bot(discord.Intents(guilds=True))
    standin = StandIn(bot)
    standin.fake.add_guilds(TOO_MANY, owner_id=standin.fake.add_user("owner"))
    with pytest.raises(RuntimeError) as stopped:
        await standin.start()
    closed = stopped.value.__cause__
    assert isinstance(closed, discord.ConnectionClosed)
    assert closed.code == CLOSE_SHARDING_REQUIRED
    assert standin.fake.gateway.closed_with == [CLOSE_SHARDING_REQUIRED]


async def test_a_privileged_intent_not_enabled_for_the_app_closes_the_connection():
    asking = discord.Intents(guilds=True, members=True)
    standin = StandIn(plain_bot(asking))
    standin.fake.add_guild("The Hearth")
    with pytest.raises(RuntimeError) as stopped:
        await standin.start()
    assert isinstance(stopped.value.__cause__, discord.PrivilegedIntentsRequired)
    # Enabled in the Developer Portal, the same intents connect.
    bot = plain_bot(asking)
    enabled = StandIn(bot)
    guild = enabled.fake.add_guild("The Hearth")
    enabled.fake.gateway.privileged_intents = INTENT_GUILD_MEMBERS
    async with enabled:
        assert bot.get_guild(guild) is not None


async def test_campfire_refused_a_privileged_intent_stops_with_the_fix(tmp_path):
    """4014 is a setting to change, not a fault to restart on (each restart identifies again,
    toward Discord's daily cap): ``python -m bot`` stops with the one line that fixes it."""
    fake = FakeDiscord()
    fake.add_guild("The Hearth")
    await fake.start()
    saved = point_at(fake)
    try:
        settings = load_settings(
            discord_token="standin-bot-token",
            message_content=True,
            data_dir=tmp_path / "data",
            database_url=f"sqlite+aiosqlite:///{tmp_path / 'campfire.db'}",
        )
        with pytest.raises(ConfigError, match="Message Content Intent"):
            await asyncio.wait_for(_discord(settings), 60)
    finally:
        point_back(saved)
        await fake.close()


# -- Campfire's bot ------------------------------------------------------------------------------


async def test_campfire_shards_as_discord_recommends_and_plays_on_every_shard(
    tmp_path, fake_model, caplog, database_url
):
    more: list[int] = []

    def thousands_of_servers(fake: FakeDiscord) -> None:
        # With the fixture's own server, one more than a connection may hold.
        more.extend(fake.add_guilds(TOO_MANY - 1, owner_id=fake.add_user("owner")))

    async with campfire_on_standin(
        tmp_path, fake_model, caplog, database_url, world=thousands_of_servers
    ) as env:
        fake, bot = env.fake, env.bot
        # 2,501 servers: Discord recommends 3 shards (about 1 per 1,000), all run here.
        assert bot.shard_count == fake.gateway.recommended_shards() == 3
        sessions = sessions_by_shard(fake)
        assert sorted(sessions) == sorted(bot.shards) == [0, 1, 2]
        assert {g.id for g in bot.guilds} == set(fake.world.guilds)
        for shard, session in sessions.items():
            created = {gid for event, gid in session.received if event == "GUILD_CREATE"}
            assert created == {g for g in fake.world.guilds if shard_of(g, 3) == shard}

        # A turn in a server on shard 1: its events and interactions reach that shard alone.
        guild = next(g for g in more if shard_of(g, 3) == 1)
        channel = fake.add_channel(guild, "campfire")
        carol = fake.add_user("carol", member_of=[guild])
        await fake.flush()
        start = await fake.slash(carol, channel, "start")
        await env.done()
        assert start.failed is None
        (thread,) = fake.threads(channel)
        fake_model.queue(Reply(text="The far shore answers with a bell."))
        await fake.slash(carol, thread, "do", action="ring the bell")
        await env.done()
        assert env.narration(thread)[-1] == "The far shore answers with a bell."
        delivered = {shard: s.received for shard, s in sessions.items()}
        assert ("INTERACTION_CREATE", guild) in delivered[1]
        assert ("INTERACTION_CREATE", guild) not in delivered[0] + delivered[2]
        assert ("THREAD_CREATE", guild) in delivered[1]

        # A DM has no server: shard 0.
        dm = fake.dm_channel(env.alice)
        await fake.slash(env.alice, dm, "start", scenario="lantern")
        await env.done()
        assert env.narration(dm)[0].startswith("Dusk settles")
        assert ("INTERACTION_CREATE", None) in delivered[0]
        assert ("INTERACTION_CREATE", None) not in delivered[1] + delivered[2]


async def test_a_process_given_shard_ids_runs_only_those_shards(
    tmp_path, fake_model, caplog, database_url
):
    def servers(fake: FakeDiscord) -> None:
        fake.add_guilds(6, owner_id=fake.add_user("owner"))

    async with campfire_on_standin(
        tmp_path, fake_model, caplog, database_url, world=servers, shard_count=2, shard_ids="1"
    ) as env:
        fake = env.fake
        theirs = {g for g in fake.world.guilds if shard_of(g, 2) == 1}
        assert theirs and theirs != set(fake.world.guilds)
        assert [(s.shard_id, s.num_shards) for s in fake.gateway.sessions] == [(1, 2)]
        assert {g.id for g in env.bot.guilds} == theirs
        # Its pacer spends half of the paced part of the bot's 50 requests a second: the
        # other process, running shard 0, spends the other half.
        assert env.bot.narrator.pacer.global_per_second == 20
        # It answers in its own servers.
        guild = min(theirs)
        channel = fake.add_channel(guild, "campfire")
        dana = fake.add_user("dana", member_of=[guild])
        await fake.flush()
        record = await fake.slash(dana, channel, "help")
        await env.done()
        assert record.failed is None and record.response_data is not None


async def test_campfire_asks_only_for_the_intents_it_reads(env: DiscordEnv):
    # Messages, for playing by them; their content only when the operator opts in.
    expected = discord.Intents(guilds=True, guild_messages=True, dm_messages=True)
    assert env.bot.intents == expected
    (session,) = env.fake.gateway.sessions
    assert session.intents == expected.value
    # Members joining: nothing of it is sent to Campfire. People talking: the message, without
    # its content (it does not mention the bot).
    env.fake.add_user("dave", member_of=[env.guild])
    await env.fake.user_message(env.bob, env.channel, "anyone there?")
    await env.fake.settle()
    events = {event for event, _ in session.received}
    assert "GUILD_MEMBER_ADD" not in events and "MESSAGE_CREATE" in events
    seen = env.bot.cached_messages[-1]
    assert seen.author.id == env.bob and seen.content == ""
    # Without the presences intent a server's members come one at a time, with interactions.
    guild, me = env.bot.get_guild(env.guild), env.bot.user
    assert guild is not None and me is not None
    assert [m.id for m in guild.members] == [me.id]


# -- where commands appear -----------------------------------------------------------------------

#: Top-level commands that only those who manage the server see by default.
ADMIN_COMMANDS = {"server"}


async def test_every_command_is_for_server_installs_in_servers_and_the_bots_dms(env: DiscordEnv):
    await env.bot.tree.sync()
    synced = env.fake.commands[None]
    assert ADMIN_COMMANDS <= {c["name"] for c in synced}
    for command in synced:
        # Installed to servers only; never in group DMs, where the bot cannot post.
        assert command["integration_types"] == [0], command["name"]
        if command["name"] in ADMIN_COMMANDS:
            assert command["contexts"] == [0]
            admins = SERVER_ADMIN_PERMISSIONS.value
            assert int(command["default_member_permissions"]) == admins
        else:
            assert command["contexts"] == [0, 1], command["name"]
            assert command["default_member_permissions"] is None, command["name"]


async def test_servers_joined_or_left_while_offline_are_put_right_on_connecting(env: DiscordEnv):
    """READY's servers come as ``guild_available``, never ``guild_join``, and a server left
    while the bot was offline is not told at all: the bot compares on connecting."""
    db = env.bot.services.db
    async with db.session() as session:
        here = await session.get(Server, env.guild)
    # Joined while offline: the stand-in's server has its row once the bot connected.
    assert here is not None and here.left_at is None
    gone = 4_000_000_000_000_000_000 >> 22 << 22  # a server the bot is no longer in
    async with db.transaction() as session:
        session.add(Server(id=gone, name="Gone", created_at=utcnow()))
        # And one re-invited while offline: its pending removal is cancelled.
        (await session.get(Server, env.guild)).left_at = utcnow()
    await env.bot.reconcile_servers()
    async with db.session() as session:
        assert (await session.get(Server, gone)).left_at is not None
        assert (await session.get(Server, env.guild)).left_at is None
