"""An adventure's thread through the Discord stand-in: whoever starts it is in it, a start that
fails leaves no empty thread open, an archived thread's adventure is reachable again (from the
thread and from the channel it came from), and channels that cannot hold a public thread are
refused before anything is opened."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from bot.standin import StandinFile
from bot.standin.permissions import P_MANAGE_THREADS
from bot.standin.records import (
    GUILD_ANNOUNCEMENT,
    GUILD_FORUM,
    GUILD_MEDIA,
    GUILD_STAGE_VOICE,
    GUILD_VOICE,
    iter_components,
)
from cogs.ui.threads import START_FAILED_NOTE
from engine.storage.models import Adventure
from tests.discord_env import DiscordEnv, campfire_on_standin
from tests.fakes.openai_server import Reply
from tests.test_adventure_rights import answer, export_file
from tests.test_scenario_commands import preview


async def adventure_count(env: DiscordEnv) -> int:
    async with env.bot.services.db.session() as session:
        return int(await session.scalar(select(func.count()).select_from(Adventure)) or 0)


def with_manage_threads(env: DiscordEnv) -> None:
    """The bot's role given Manage Threads by a server admin (the invite does not ask for it)."""
    guild = env.fake.world.guilds[env.guild]
    guild.roles[guild.bot_role_id].permissions |= P_MANAGE_THREADS


# --- whoever begins an adventure is in its thread ---------------------------------------------


async def test_the_starter_is_a_member_of_the_thread_start_opens(env: DiscordEnv):
    thread = await env.start_thread(env.bob)
    assert env.bob in env.fake.world.channels[thread].members


async def test_the_importer_is_a_member_of_the_thread_an_import_opens(env: DiscordEnv):
    first = await env.start_thread(env.alice)
    file = await export_file(env, env.alice, first)
    record = await env.fake.slash(env.bob, env.channel, "adventure import", file=file)
    await env.done()
    assert "is restored in" in answer(env, record).content
    restored = env.fake.threads(env.channel)[-1]
    assert restored != first
    assert env.bob in env.fake.world.channels[restored].members


# --- a start that fails -------------------------------------------------------------------------


@pytest.mark.parametrize("manage_threads", [True, False], ids=["manage-threads", "invite-only"])
async def test_a_start_that_fails_leaves_no_empty_open_thread(
    tmp_path, fake_model, caplog, database_url, manage_threads
):
    async with campfire_on_standin(
        tmp_path, fake_model, caplog, database_url, adventures_per_hour=1
    ) as env:
        if manage_threads:
            with_manage_threads(env)
        _record, message = await preview(env, env.alice, env.channel, "aid-new-scenario.json")
        await env.fake.press(env.alice, message.id, label="Confirm")
        await env.done()
        menu = await env.fake.slash(env.alice, env.channel, "start", scenario="Clockwork")
        await env.done()
        chosen = await env.fake.press(env.alice, answer(env, menu).id, label="Tinkerer")
        await env.done()
        assert chosen.modal is not None
        inputs = [
            c["custom_id"]
            for c in iter_components(chosen.modal["components"])
            if c.get("type") == 4
        ]
        # While the form is open, the same player begins another adventure: the hour's one.
        await env.start_thread(env.alice)
        (running,) = env.fake.threads(env.channel)

        submitted = await env.fake.submit_modal(
            env.alice, chosen, {inputs[0]: "Ada", inputs[1]: "Bo"}
        )
        await env.done()
        assert "adventures in the last hour" in answer(env, submitted).content
        assert await adventure_count(env) == 1

        threads = env.fake.threads(env.channel)
        if manage_threads:
            assert threads == [running]  # its thread was deleted
            return
        # Without Manage Threads it can be neither deleted nor archived (Modify Channel): it
        # says why it is empty, and archives by itself after a day.
        assert threads[0] == running and len(threads) == 2
        closed = env.fake.world.channels[threads[1]]
        assert not closed.archived and closed.auto_archive_duration == 1440
        assert [m.content for m in env.fake.messages(closed.id)] == [
            START_FAILED_NOTE.format(parent=f"<#{env.channel}>")
        ]


# --- an archived thread's adventure -------------------------------------------------------------


async def test_an_action_in_an_archived_thread_reopens_it_and_plays(env: DiscordEnv, fake_model):
    thread = await env.start_thread(env.alice)
    env.fake.archive_thread(thread)  # a day of quiet
    await env.fake.flush()
    fake_model.queue(Reply(text="The door creaks open."))
    record = await env.fake.slash(env.bob, thread, "do", action="knock")
    await env.done()
    assert record.failed is None
    assert not env.fake.world.channels[thread].archived
    assert env.narration(thread)[-1] == "The door creaks open."

    # A button under the turn, once the thread has archived again.
    env.fake.archive_thread(thread)
    await env.fake.flush()
    fake_model.queue(Reply(text="Footsteps answer."))
    pressed = await env.fake.press(env.alice, env.fake.last_message(thread).id, label="Continue")
    await env.done()
    assert pressed.failed is None
    assert env.narration(thread)[-1] == "Footsteps answer."


async def test_an_action_in_the_channel_points_to_the_archived_thread_and_reopens_it(
    env: DiscordEnv,
):
    thread = await env.start_thread(env.alice)
    env.fake.archive_thread(thread)
    await env.fake.flush()
    record = await env.fake.slash(env.bob, env.channel, "do", action="look around")
    await env.done()
    pointer = answer(env, record)
    assert pointer.ephemeral
    assert pointer.content == (
        "The adventure here runs in a thread of this channel; play there:\n"
        f"🏮 **The Lantern Road** goes on in <#{thread}> (it had been archived after a quiet "
        "spell; it is open again)."
    )
    assert not env.fake.world.channels[thread].archived
    assert len(env.narration(thread)) == 1  # nothing was played: the opening only


async def test_an_action_in_the_channel_names_a_locked_thread_and_the_way_to_begin_anew(
    env: DiscordEnv,
):
    thread = await env.start_thread(env.alice)
    env.fake.archive_thread(thread, locked=True)  # a moderator locked it
    await env.fake.flush()
    record = await env.fake.slash(env.bob, env.channel, "say", words="Hello?")
    await env.done()
    assert answer(env, record).content == (
        f"🏮 **The Lantern Road** is in <#{thread}>, which a moderator locked: it cannot go on "
        "there.\n`/start` here begins a new adventure."
    )
    assert env.fake.world.channels[thread].archived  # left as the moderator left it


async def test_start_in_the_channel_names_the_adventures_still_running_in_its_threads(
    env: DiscordEnv,
):
    first = await env.start_thread(env.alice)
    env.fake.archive_thread(first)
    await env.fake.flush()
    record = await env.fake.slash(env.bob, env.channel, "start")
    await env.done()
    second = env.fake.threads(env.channel)[-1]
    assert answer(env, record).content == (
        f"🏮 **The Lantern Road** begins in <#{second}>. Everyone there can play.\n"
        f"Still running from here: **The Lantern Road** in <#{first}>"
    )


# --- channels that cannot hold a public thread --------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "said"),
    [
        (GUILD_ANNOUNCEMENT, "This is an announcement channel"),
        (GUILD_FORUM, "This is a forum"),
        (GUILD_MEDIA, "This is a forum"),
        (GUILD_VOICE, "voice or stage channel's chat"),
        (GUILD_STAGE_VOICE, "voice or stage channel's chat"),
    ],
)
async def test_start_where_no_public_thread_can_open_is_refused_at_once(
    env: DiscordEnv, kind: int, said: str
):
    channel = env.fake.add_channel(env.guild, "elsewhere", type=kind)
    await env.fake.flush()
    record = await env.fake.slash(env.alice, channel, "start")
    await env.done()
    refusal = answer(env, record)
    assert refusal.ephemeral and refusal.id == record.original_message_id  # the first answer
    assert said in refusal.content
    assert refusal.content.endswith(
        "Start one in a text channel (Campfire opens a thread for it there), in a thread, or in "
        "a DM with Campfire."
    )
    assert env.fake.threads(channel) == []
    assert await adventure_count(env) == 0


async def test_import_in_an_announcement_channel_is_refused_at_once(env: DiscordEnv):
    thread = await env.start_thread(env.alice)
    file: StandinFile = await export_file(env, env.alice, thread)
    news = env.fake.add_channel(env.guild, "news", type=GUILD_ANNOUNCEMENT)
    await env.fake.flush()
    record = await env.fake.slash(env.alice, news, "adventure import", file=file)
    await env.done()
    refusal = answer(env, record)
    assert refusal.ephemeral and refusal.id == record.original_message_id
    assert refusal.content.startswith("⚠ This is an announcement channel")
    assert env.fake.threads(news) == []
    assert await adventure_count(env) == 1
