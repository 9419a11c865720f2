"""The stand-in's threads and channel types, driven by a real commands.Bot: Modify Channel and
Delete Channel on threads with Discord's permission rules, thread members, archived threads
refusing edits and answers (50083), and the channels that hold no public thread."""

from __future__ import annotations

from collections.abc import AsyncIterator

import discord
import pytest

from bot.standin.permissions import P_MANAGE_THREADS
from bot.standin.records import GUILD_ANNOUNCEMENT, GUILD_FORUM, GUILD_STAGE_VOICE, GUILD_VOICE
from tests.standin.test_standin import Env, camp_on_standin

MISSING_PERMISSIONS, CHANNEL_TYPE, ARCHIVED = 50013, 50024, 50083


@pytest.fixture
async def env(caplog: pytest.LogCaptureFixture) -> AsyncIterator[Env]:
    """A bare bot (Campfire's own would reopen archived threads itself)."""
    async with camp_on_standin(caplog) as environment:
        yield environment


async def new_thread(env: Env, name: str = "side quest") -> discord.Thread:
    channel = env.bot.get_channel(env.channel)
    assert isinstance(channel, discord.TextChannel)
    return await channel.create_thread(name=name, type=discord.ChannelType.public_thread)


def set_manage_threads(env: Env, allowed: bool) -> None:
    guild = env.fake.world.guilds[env.guild]
    role = guild.roles[guild.bot_role_id]
    if allowed:
        role.permissions |= P_MANAGE_THREADS
    else:
        role.permissions &= ~P_MANAGE_THREADS


async def refused(code: int, call) -> None:
    with pytest.raises(discord.HTTPException) as caught:
        await call
    assert caught.value.code == code


async def test_only_manage_threads_changes_a_thread_its_creator_included(env: Env) -> None:
    # Modify Channel: unarchiving an unlocked thread takes only the right to talk in it;
    # "Otherwise, requires the MANAGE_THREADS permission", the thread's creator included.
    fake = env.fake
    thread = await new_thread(env)
    assert fake.world.channels[thread.id].members == {fake.world.bot_user.id}
    set_manage_threads(env, False)
    await refused(MISSING_PERMISSIONS, thread.delete())
    await refused(MISSING_PERMISSIONS, thread.edit(locked=True))
    await refused(MISSING_PERMISSIONS, thread.edit(name="renamed"))
    await refused(MISSING_PERMISSIONS, thread.edit(auto_archive_duration=60))
    await refused(MISSING_PERMISSIONS, thread.edit(archived=True))
    set_manage_threads(env, True)
    renamed = await thread.edit(name="renamed", auto_archive_duration=60)
    assert renamed.name == "renamed" and renamed.auto_archive_duration == 60
    archived = await thread.edit(archived=True)
    assert archived.archived and fake.world.channels[thread.id].archived
    await fake.flush()
    assert env.bot.get_channel(thread.id) is None  # archived threads leave the cache
    # An archived thread changes only by a request that unarchives it, which anyone who may
    # talk in it may send while it is not locked.
    await refused(ARCHIVED, archived.edit(name="again"))
    set_manage_threads(env, False)
    reopened = await archived.edit(archived=False)
    assert not reopened.archived

    # A thread a moderator locked is unarchived only with Manage Threads.
    fake.archive_thread(thread.id, locked=True)
    await refused(MISSING_PERMISSIONS, reopened.edit(archived=False))
    set_manage_threads(env, True)
    assert not (await reopened.edit(archived=False)).archived
    await reopened.delete()
    await fake.flush()
    assert thread.id not in fake.threads(env.channel)
    assert env.bot.get_channel(thread.id) is None
    fake.expect(MISSING_PERMISSIONS, ARCHIVED)


async def test_members_are_added_to_active_threads_only(env: Env) -> None:
    fake = env.fake
    thread = await new_thread(env)
    await thread.add_user(discord.Object(env.bob))
    await thread.join()
    assert fake.world.channels[thread.id].members == {fake.world.bot_user.id, env.bob}
    fake.archive_thread(thread.id)
    await refused(ARCHIVED, thread.add_user(discord.Object(env.alice)))
    fake.expect(ARCHIVED)


async def test_an_archived_thread_refuses_edits_and_answers(env: Env) -> None:
    fake = env.fake
    thread = await new_thread(env)
    message = await thread.send("before the quiet")
    fake.archive_thread(thread.id)
    await refused(ARCHIVED, message.edit(content="after"))
    record = await fake.slash(env.bob, thread.id, "branch new", name="late")
    assert record.acknowledged is None  # its answer was refused
    # A message unarchives it, as on Discord; then edits land again.
    await thread.send("back")
    await message.edit(content="after")
    assert fake.message(message.id).content == "after"
    fake.expect(ARCHIVED)


async def test_channels_that_hold_no_public_thread(env: Env) -> None:
    fake = env.fake
    news = fake.add_channel(env.guild, "news", type=GUILD_ANNOUNCEMENT)
    forum = fake.add_channel(env.guild, "forum", type=GUILD_FORUM)
    voice = fake.add_channel(env.guild, "voice", type=GUILD_VOICE)
    stage = fake.add_channel(env.guild, "stage", type=GUILD_STAGE_VOICE)
    await fake.flush()
    bot = env.bot
    news_channel = bot.get_channel(news)
    assert isinstance(news_channel, discord.TextChannel) and news_channel.is_news()
    assert isinstance(bot.get_channel(forum), discord.ForumChannel)
    assert isinstance(bot.get_channel(voice), discord.VoiceChannel)
    assert isinstance(bot.get_channel(stage), discord.StageChannel)
    await refused(
        CHANNEL_TYPE,
        news_channel.create_thread(name="public", type=discord.ChannelType.public_thread),
    )
    announcement = await news_channel.create_thread(
        name="announcement", type=discord.ChannelType.news_thread
    )
    assert announcement.type is discord.ChannelType.news_thread
    for channel_id in (forum, voice, stage):
        await refused(
            CHANNEL_TYPE,
            bot.http.start_thread_without_message(
                channel_id, name="x", auto_archive_duration=1440, type=11
            ),
        )
    fake.expect(CHANNEL_TYPE)
