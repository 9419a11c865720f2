"""The caps on adventures per player: begun (started or imported) per hour, and running at once.
Decided in the database, so they hold however many processes run; refused politely, before a
thread is opened."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from sqlalchemy import func, select, update

from bot.standin import StandinFile
from engine.llm.providers.resolver import OperatorDefault
from engine.people.access.rules import Actor
from engine.people.adventure_caps import AdventureCaps, CapReached
from engine.platform.coordination.leases import TurnLeases
from engine.platform.queue import AdventureQueue
from engine.play.service import PlayService
from engine.play.shelf import AdventureShelf
from engine.storage.models import Adventure, utcnow
from engine.turns.engine import TurnEngine
from tests.discord_env import campfire_on_standin

GUILD = 500
WREN = Actor(user_id=3, user_name="Wren", server_id=GUILD, server_name="Hearth")


def capped(db, provider, *, per_hour: int = 100, active: int = 100) -> PlayService:
    return PlayService(
        db,
        TurnEngine(db, OperatorDefault(provider)),
        TurnLeases(db, holder="p1"),
        AdventureQueue(cap=5),
        caps=AdventureCaps(per_hour=per_hour, active=active),
    )


async def count_adventures(db) -> int:
    async with db.session() as session:
        return await session.scalar(select(func.count()).select_from(Adventure))


async def set_times(db, adventure_id: int, **times) -> None:
    async with db.session() as session, session.begin():
        await session.execute(update(Adventure).where(Adventure.id == adventure_id).values(**times))


async def test_the_hourly_cap_counts_starts_and_imports_and_opens_no_thread(
    tmp_path, fake_model, caplog, database_url
):
    async with campfire_on_standin(
        tmp_path, fake_model, caplog, database_url, adventures_per_hour=2
    ) as env:
        for _ in range(2):
            record = await env.fake.slash(env.bob, env.channel, "start")
            await env.done()
            assert record.failed is None
        first = env.fake.threads(env.channel)[0]
        exported = await env.fake.slash(env.bob, first, "adventure export")
        await env.done()
        file = env.fake.message(exported.followups[-1]).attachments[0]

        refused = await env.fake.slash(env.bob, env.channel, "start")
        await env.done()
        assert refused.ephemeral
        assert env.fake.message(refused.original_message_id).content == (
            "⚠ You have started 2 adventures in the last hour; you can start another in 60 minutes."
        )
        assert len(env.fake.threads(env.channel)) == 2  # no thread for the refused one

        # An import begins an adventure too, in a DM as anywhere.
        dm = env.fake.dm_channel(env.bob)
        imported = await env.fake.slash(
            env.bob, dm, "adventure import", file=StandinFile(file.filename, file.content)
        )
        await env.done()
        answer = env.fake.message(
            imported.followups[-1] if imported.followups else imported.original_message_id
        )
        assert answer.content.startswith("⚠ You have started 2 adventures in the last hour")
        assert await env.bot.services.play.adventure_in(dm) is None

        # The cap is each player's own.
        record = await env.fake.slash(env.alice, env.channel, "start")
        await env.done()
        assert len(env.fake.threads(env.channel)) == 3


async def test_the_hourly_cap_says_when_the_next_start_is_free(db, provider):
    play = capped(db, provider, per_hour=3)
    started = [await play.start(WREN, channel_id=channel, query=None) for channel in (1, 2, 3)]
    now = utcnow()
    # Started 70, 48 and 5 minutes ago: the first no longer counts, the second frees a start
    # in 12 minutes.
    for adventure, minutes in zip(started, (70, 48, 5), strict=True):
        await set_times(db, adventure.adventure_id, started_at=now - timedelta(minutes=minutes))
    await play.start(WREN, channel_id=4, query=None)
    with pytest.raises(CapReached) as refused:
        await play.start(WREN, channel_id=5, query=None)
    assert refused.value.message == (
        "You have started 3 adventures in the last hour; you can start another in 12 minutes."
    )
    assert await count_adventures(db) == 4


async def test_the_active_cap_counts_adventures_running_and_played_lately(db, provider):
    play = capped(db, provider, active=2)
    first = await play.start(WREN, channel_id=1, query=None)
    await play.start(WREN, channel_id=2, query=None)
    with pytest.raises(CapReached) as refused:
        await play.start(WREN, channel_id=3, query=None)
    assert refused.value.message.startswith(
        "You are running 2 adventures (each played in the last 7 days), as many as one player "
        "may run at once. Start the new one inside one of their threads to take its place"
    )
    # One taking the place of another is one for one.
    again = await play.start(WREN, channel_id=1, query=None)
    assert again.adventure_id != first.adventure_id
    # An adventure left alone for a week no longer counts.
    await set_times(db, again.adventure_id, updated_at=utcnow() - timedelta(days=8))
    await play.start(WREN, channel_id=3, query=None)
    assert await count_adventures(db) == 4


async def test_starts_at_once_cannot_pass_the_cap(db, provider):
    """Each start counts in its own transaction; the player's row queues them, so starts that
    arrive together (from one process or several) are counted one after the other."""
    play = capped(db, provider, per_hour=3)
    outcomes = await asyncio.gather(
        *(play.start(WREN, channel_id=channel, query=None) for channel in range(10, 20)),
        return_exceptions=True,
    )
    refused = [o for o in outcomes if isinstance(o, BaseException)]
    assert len(refused) == 7 and all(isinstance(o, CapReached) for o in refused)
    assert await count_adventures(db) == 3


async def test_bringing_an_ended_adventure_back_is_under_the_active_cap(db, provider):
    """/adventure resume makes an ended adventure run again: it passed the cap on adventures
    running at once (issue: spend and fairness)."""
    play = capped(db, provider, active=1)
    shelf = AdventureShelf(db, play.places, caps=AdventureCaps(per_hour=100, active=1))
    first = await play.start(WREN, channel_id=1, query=None)
    await set_times(db, first.adventure_id, ended_at=utcnow())  # ended (/adventure end)
    await play.start(WREN, channel_id=2, query=None)  # one running: the cap
    with pytest.raises(CapReached):
        await shelf.resume_plan(WREN, 1, str(first.adventure_id), from_channel=False)
    # Uncapped, the same plan is made.
    free = AdventureShelf(db, play.places)
    plan = await free.resume_plan(WREN, 1, str(first.adventure_id), from_channel=False)
    assert plan.adventure_id == first.adventure_id
