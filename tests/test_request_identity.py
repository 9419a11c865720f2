"""One interaction delivered twice through the Discord stand-in (a gateway replay, one event
reaching two processes): the turn is played once, the repeat gets the first delivery's outcome,
and the same id carrying another action is refused politely. The env checks that nothing
unexpected was logged, every interaction was acknowledged and no route was unknown."""

from __future__ import annotations

import logging

import pytest
from sqlalchemy import func, select

from engine.storage.coordination_models import RequestRecord
from engine.storage.models import Role, StoryNode
from tests.discord_env import DiscordEnv, campfire_on_standin
from tests.fakes.openai_server import Reply

REPLY = "The lantern catches, and the reeds lean away from its light."


@pytest.fixture
async def env(tmp_path, fake_model, caplog, database_url):
    async with campfire_on_standin(tmp_path, fake_model, caplog, database_url) as environment:
        caplog.set_level(logging.INFO, logger="cogs.ui.narration")
        yield environment


async def narrator_turns(env: DiscordEnv, thread: int) -> int:
    adventure = await env.bot.services.play.adventure_in(thread)
    assert adventure is not None
    async with env.bot.services.db.session() as session:
        return await session.scalar(
            select(func.count())
            .select_from(StoryNode)
            .where(
                StoryNode.adventure_id == adventure.adventure_id, StoryNode.role == Role.NARRATOR
            )
        )


def warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def repeats_seen(caplog, interaction_id: int) -> list[str]:
    """What the narrator was told about each repeated delivery of that interaction."""
    prefix = f"interaction {interaction_id}: already "
    return [
        r.getMessage().removeprefix(prefix)
        for r in caplog.records
        if r.name == "cogs.ui.narration" and r.getMessage().startswith(prefix)
    ]


async def test_the_same_interaction_twice_plays_one_turn(env, fake_model, caplog):
    thread = await env.start_thread()
    fake_model.queue(Reply(text=REPLY, delay=0.05))
    record = await env.fake.slash(env.alice, thread, "do", action="light the lantern")
    # Discord takes one initial response per interaction: a repeat's is refused (40060).
    env.expect(40060)
    # Delivered again while the first delivery's turn is still being written ...
    await env.fake.redeliver(record)
    await env.done()
    # ... and once more after it was saved.
    await env.fake.redeliver(record)
    await env.done()

    assert len(fake_model.requests) == 1
    assert await narrator_turns(env, thread) == 2  # the opening and the one turn
    assert repeats_seen(caplog, record.id) in (["running", "done"], ["queued", "done"])
    # The first delivery's answer stands, and the story shows the turn once.
    assert env.fake.message(record.original_message_id).content == "> alice lights the lantern."
    assert env.narration(thread)[1:] == [REPLY]
    bot_messages = [m for m in env.fake.messages(thread) if m.author_id == env.bot.user.id]
    assert len(bot_messages) == 3  # the opening, the action line, the narration
    async with env.bot.services.db.session() as session:
        stored = await session.get(RequestRecord, record.id)
    assert (stored.status, stored.payload) == ("done", {"type": "do", "text": "light the lantern"})
    assert warnings(caplog) == []


async def test_the_same_interaction_with_another_action_is_refused_politely(
    env, fake_model, caplog
):
    thread = await env.start_thread()
    fake_model.queue(REPLY)
    record = await env.fake.slash(env.alice, thread, "do", action="light the lantern")
    await env.done()

    env.expect(40060)  # the repeat's own acknowledgement, refused as on Discord
    await env.fake.redeliver(record, action="run into the marsh")
    await env.done()

    assert len(fake_model.requests) == 1
    assert await narrator_turns(env, thread) == 2
    # Told to the player alone, beside the first answer, which stays as it was.
    (refusal,) = [m for m in env.fake.messages(thread) if m.ephemeral]
    assert refusal.visible_to == env.alice
    assert refusal.content.startswith("⚠ This arrived as a repeat of an earlier action")
    assert "was not played" in refusal.content
    assert env.fake.message(record.original_message_id).content == "> alice lights the lantern."
    assert env.narration(thread)[1:] == [REPLY]
    assert warnings(caplog) == []
