"""A bot that dies mid-turn and starts again, through the stand-in: play resumes at once, and
the players of each cut-off turn are told, with a Retry, in threads and DMs alike."""

from __future__ import annotations

import time
from datetime import timedelta

from tests.discord_env import DiscordEnv, campfire_on_standin, crash, restarted
from tests.fakes.openai_server import Reply
from tests.helpers import leave_dead_turn, until

NOTICE = "was interrupted when the bot stopped"


def notices(env: DiscordEnv, channel: int) -> list:
    return [m for m in env.fake.messages(channel) if NOTICE in m.content]


async def start_in(env: DiscordEnv, user: int, channel: int) -> int:
    """An adventure started by ``user`` in ``channel``; its thread, or the DM itself."""
    threads = set(env.fake.threads(env.channel))
    record = await env.fake.slash(user, channel, "start", scenario="lantern")
    await env.done()
    assert record.failed is None
    (new,) = set(env.fake.threads(env.channel)) - threads or {channel}
    return new


async def test_a_bot_killed_mid_turn_plays_again_at_once_after_restart(
    tmp_path, fake_model, caplog, database_url
):
    # The model's reply must outlast the dead bot; the new one's arrive at once.
    async with campfire_on_standin(
        tmp_path, fake_model, caplog, database_url, model_timeout=30
    ) as first:
        thread = await start_in(first, first.alice, first.channel)
        dm = first.fake.dm_channel(first.alice)
        await start_in(first, first.alice, dm)
        fake_model.queue(Reply(text="Never finished.", delay=20), Reply(text="Nor this.", delay=20))
        await first.fake.slash(first.bob, thread, "do", action="cross the bridge")
        await first.fake.slash(first.alice, dm, "do", action="light the lantern")
        await until(lambda: len(fake_model.requests) == 2)  # both turns are being written

        await crash(first)
        async with restarted(first) as second:
            # Told at once, in the thread and in the DM (which no cache of the new bot knows).
            await until(lambda: notices(second, thread) and notices(second, dm))
            (in_thread,) = notices(second, thread)
            (in_dm,) = notices(second, dm)
            assert "“cross the bridge”" in in_thread.content
            assert "“light the lantern”" in in_dm.content
            assert [label for label, _, _ in in_dm.buttons] == ["Retry"]
            assert [label for label, _, _ in in_thread.buttons] == ["Retry"]

            # The next action plays now, not once the dead bot's lease has expired (30 s).
            fake_model.queue("Bob waits by the water.", "The lantern catches at last.")
            started = time.monotonic()
            record = await second.fake.slash(second.bob, thread, "do", action="wait")
            await second.done()
            assert record.original_message_id is not None
            assert "still writing" not in second.fake.message(record.original_message_id).content
            assert second.narration(thread)[-1] == "Bob waits by the water."
            assert time.monotonic() - started < 10

            await second.fake.press(second.alice, in_dm.id, label="Retry")
            await second.done()
            assert second.narration(dm)[-1] == "The lantern catches at last."
            # Each cut-off turn was announced once.
            assert len(notices(second, thread)) == len(notices(second, dm)) == 1


async def test_interrupted_turns_are_announced_in_archived_threads_and_dms(env, fake_model):
    quiet = await start_in(env, env.alice, env.channel)
    locked = await start_in(env, env.alice, env.channel)
    dm = env.fake.dm_channel(env.bob)
    await start_in(env, env.bob, dm)
    for number, (channel, user) in enumerate(
        ((quiet, env.alice), (locked, env.alice), (dm, env.bob)), start=1
    ):
        adventure = await env.bot.services.play.adventure_in(channel)
        assert adventure is not None
        # A process died mid-turn there a while ago; its lease has expired.
        await leave_dead_turn(
            env.bot.services.db,
            adventure.adventure_id,
            request_id=900 + number,
            user_id=user,
            action={"type": "do", "text": f"knock {number} times"},
            clock=lambda: env.bot.services.leases.clock() - timedelta(minutes=5),
        )
    # Threads archive when idle, and drop out of the bot's cache; a moderator locked one, where
    # Discord refuses the bot's message (50083 Thread is archived).
    env.expect(50083)
    env.fake.archive_thread(quiet)
    env.fake.archive_thread(locked, locked=True)
    await env.fake.flush()
    assert env.bot.get_channel(quiet) is None and env.bot.get_channel(locked) is None

    await env.bot.announce_interrupted_turns()
    await env.done()
    (in_quiet,) = notices(env, quiet)
    assert "“knock 1 times”" in in_quiet.content
    assert [label for label, _, _ in in_quiet.buttons] == ["Retry"]
    # Writing in it unarchived it, as on Discord.
    assert not env.fake.world.channels[quiet].archived
    # The locked thread refused it (Discord's 50083); the DM was told all the same.
    assert notices(env, locked) == []
    (in_dm,) = notices(env, dm)
    assert "“knock 3 times”" in in_dm.content
