"""Every model reply has an end: a time limit and a length limit per reply
(CAMPFIRE_MODEL_REPLY_SECONDS, CAMPFIRE_MODEL_REPLY_CHARS), enforced by Campfire whatever the
server does, for turns and for background work alike."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import func, select

from engine.errors import ModelReplyCutOff
from engine.llm.providers.base import ChatMessage, GenerationParams, ReplyLimits
from engine.llm.providers.local import LocalLlamaProvider, bundled_model_path
from engine.llm.providers.openai_compat import OpenAICompatibleProvider
from engine.llm.providers.resolver import OperatorDefault
from engine.platform.events import TextDelta
from engine.storage.models import ActionType, Adventure, StoryNode
from engine.story.memory.writer import MemoryWriter
from engine.turns.engine import TurnEngine
from tests.discord_env import DiscordEnv, campfire_on_standin
from tests.fakes.openai_server import FakeModelServer, Reply
from tests.helpers import new_adventure, play


async def story_of(env: DiscordEnv, channel_id: int) -> tuple[int, int | None, int]:
    """The adventure's node count, head and version: what a saved turn would change."""
    async with env.bot.services.db.session() as session:
        adventure = (
            await session.scalars(select(Adventure).where(Adventure.channel_id == channel_id))
        ).one()
        nodes = await session.scalar(
            select(func.count())
            .select_from(StoryNode)
            .where(StoryNode.adventure_id == adventure.id)
        )
        return nodes or 0, adventure.head_node_id, adventure.version


async def test_a_reply_that_never_ends_is_stopped_at_the_time_limit_and_play_goes_on(
    tmp_path, fake_model, caplog, database_url
):
    async with campfire_on_standin(
        tmp_path, fake_model, caplog, database_url, model_reply_seconds=0.8
    ) as env:
        provider = env.bot.services.provider
        assert isinstance(provider, OpenAICompatibleProvider)
        assert provider.limits == ReplyLimits(seconds=0.8, chars=20_000)  # from the settings
        thread = await env.start_thread()
        # A turn to undo later, played under a roomy limit: on a busy machine even a short
        # reply can take longer than the 0.8 s meant for the endless one.
        provider.limits = ReplyLimits(seconds=30)
        fake_model.queue("The reeds part.")
        await env.fake.slash(env.alice, thread, "do", action="listen")
        await env.done()
        provider.limits = ReplyLimits(seconds=0.8)
        before = await story_of(env, thread)

        fake_model.queue(Reply(fault="endless", delay=0.01))
        record = await env.fake.slash(env.alice, thread, "do", action="light the lantern")
        # Without the limit the stream goes on for ever: fail here instead of hanging.
        async with asyncio.timeout(20):
            await env.done()
        response = env.fake.message(record.original_message_id)
        assert response.content == (
            "> alice lights the lantern.\n⚠ The model was still writing after 0.8 seconds, the "
            "most one reply may take, so it was stopped. Nothing was saved; press Retry."
        )
        assert [label for label, _, _ in response.buttons] == ["Retry"]
        # What had streamed says where the narration stopped; the connection was dropped.
        partial = env.fake.last_message(thread)
        assert "and on" in partial.content and "nothing was saved" in partial.content
        assert await asyncio.to_thread(fake_model.wait_for_disconnect, 3)
        assert await story_of(env, thread) == before

        # The turn is over: undo is not refused as "still writing".
        undo = await env.fake.slash(env.alice, thread, "undo")
        await env.done()
        assert "undid" in env.fake.message(undo.original_message_id).content


async def test_a_reply_past_the_length_limit_is_stopped_and_nothing_is_saved(
    tmp_path, fake_model, caplog, database_url
):
    async with campfire_on_standin(
        tmp_path, fake_model, caplog, database_url, model_reply_chars=400
    ) as env:
        thread = await env.start_thread()
        before = await story_of(env, thread)
        fake_model.queue(Reply(fault="endless"))
        record = await env.fake.slash(env.alice, thread, "do", action="light the lantern")
        async with asyncio.timeout(20):
            await env.done()
        response = env.fake.message(record.original_message_id)
        assert "⚠ The model kept writing past 400 characters" in response.content
        assert [label for label, _, _ in response.buttons] == ["Retry"]
        assert await asyncio.to_thread(fake_model.wait_for_disconnect, 3)
        assert await story_of(env, thread) == before


async def test_background_work_is_bounded_too(db, provider, fake_model: FakeModelServer):
    """A memory call whose model never stops ends at the limit and moves no cursor."""
    engine = TurnEngine(db, OperatorDefault(provider))
    adventure = await new_adventure(db)
    for n in range(12):
        fake_model.queue(f"Turn {n} goes by.")
        events = await play(engine, adventure, ActionType.DO, f"walk on ({n})")
        assert type(events[-1]).__name__ == "TurnDone", events[-1]
    bounded = OpenAICompatibleProvider(
        fake_model.base_url, fake_model.model, timeout=3, limits=ReplyLimits(seconds=0.5)
    )
    try:
        writer = MemoryWriter(db, OperatorDefault(bounded))
        fake_model.queue(Reply(fault="endless", delay=0.01))
        async with asyncio.timeout(10):
            report = await writer.catch_up(adventure)
    finally:
        await bounded.aclose()
    assert report.memories == 0
    assert "Passage:" in fake_model.requests[-1]["messages"][-1]["content"]
    assert await asyncio.to_thread(fake_model.wait_for_disconnect, 3)
    async with db.session() as session:
        assert (await session.get(Adventure, adventure)).memory_cursor == 0


@pytest.mark.skipif(bundled_model_path() is None, reason="the 'local' extra is not installed")
async def test_the_embedded_model_is_bounded_by_the_same_limits():
    local = LocalLlamaProvider(n_ctx=512, limits=ReplyLimits(chars=100))
    messages = [ChatMessage("user", "Tell a long story about a lantern.")]
    seen = []
    with pytest.raises(ModelReplyCutOff):
        async for chunk in local.stream(messages, GenerationParams(max_tokens=400)):
            if isinstance(chunk, TextDelta):
                seen.append(chunk.text)
    assert len("".join(seen)) <= 100
