"""Discord failing under a turn: the stand-in answers the narration's edits with the errors
Discord documents, and the turn must still be stored once, the bot neither crash nor stall."""

from __future__ import annotations

import logging

from bot.standin import MISSING_PERMISSIONS
from tests.discord_env import DiscordEnv
from tests.fakes.openai_server import Reply
from tests.trials.invariants import stored_actions

REPLY = "The stair winds down into the dark, and somewhere below water drips on stone."


async def test_missing_permissions_on_edits_ends_the_narration_quietly(
    env: DiscordEnv, fake_model, caplog
):
    await env.fake.slash(env.alice, env.channel, "start")
    await env.done()
    (thread,) = env.fake.threads(env.channel)
    # The bot lost the right to edit its messages there (403, code 50013) while it narrates.
    env.expect(MISSING_PERMISSIONS.code)
    env.fake.faults.fail_edits(MISSING_PERMISSIONS, times=None, channel_id=thread)
    fake_model.queue(Reply(text=REPLY, delay=0.03), "The water stops.")
    record = await env.fake.slash(env.alice, thread, "do", action="go down")
    await env.done()
    assert env.fake.faults.injected, "the narration was edited under the fault"
    # Stored once; the player's answer is their action, and nothing is logged as a failure.
    assert (await stored_actions(env.bot.services.db))["> alice goes down."] == 1
    assert env.fake.message(record.original_message_id).content == "> alice goes down."
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []

    env.fake.faults.clear()
    await env.fake.slash(env.alice, thread, "do", action="listen")
    await env.done()
    assert env.narration(thread)[-1] == "The water stops."
