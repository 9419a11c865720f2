"""Small helpers the engine tests share."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from sqlalchemy import func, select, update

from engine.library.scenarios.start import start_adventure
from engine.people.accounts import touch_user
from engine.storage.database import Database
from engine.storage.models import ActionType, Scenario, StoryMessage, StoryNode
from engine.story.actions import PlayerAction
from engine.turns.engine import TurnEngine
from engine.turns.events import TurnEvent


async def new_adventure(db: Database, *, channel_id: int = 1) -> int:
    async with db.session() as session, session.begin():
        # The starter: a scenario without world state, so turns here are plain prose.
        scenario_id = await session.scalar(
            select(Scenario.id).where(Scenario.builtin_key == "lantern-road")
        )
        adventure = await start_adventure(session, scenario_id, channel_id=channel_id)
        return adventure.id


async def play(
    engine: TurnEngine, adventure_id: int, kind: ActionType, text: str = ""
) -> list[TurnEvent]:
    return [event async for event in engine.play(adventure_id, PlayerAction(kind, text))]


async def until(condition: Callable[[], object], *, timeout: float = 10) -> None:  # noqa: ASYNC109
    """Until ``condition()`` holds (polled; something else is doing the work meanwhile)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        await asyncio.sleep(0.02)


async def add_users(db: Database, *user_ids: int) -> None:
    """People who acted: the front end makes their rows when they do (a turn never makes one)."""
    async with db.session() as session, session.begin():
        for user_id in user_ids:
            await touch_user(session, user_id)


async def node_count(db: Database, adventure_id: int) -> int:
    async with db.session() as session:
        return await session.scalar(
            select(func.count())
            .select_from(StoryNode)
            .where(StoryNode.adventure_id == adventure_id)
        )


async def leave_dead_turn(
    db: Database,
    adventure_id: int,
    *,
    request_id: int,
    user_id: int,
    action: dict[str, str],
    clock,
) -> None:
    """What a process leaves when it dies mid-turn: its request marked running, and the
    adventure's lease, claimed at ``clock()``. (The turn itself stores nothing until it
    completes, so there is no half-written turn.)"""
    from engine.platform.coordination.leases import TurnLeases
    from engine.storage.coordination_models import RequestRecord

    async with db.session() as session, session.begin():
        session.add(
            RequestRecord(
                interaction_id=request_id,
                adventure_id=adventure_id,
                user_id=user_id,
                payload_digest="-",
                payload=action,
                status="running",
            )
        )
    await TurnLeases(db, holder="dead-process", clock=clock).claim(adventure_id)


async def forget_where_buttons_are(db: Database) -> None:
    """Forget which messages carry story buttons (as for messages shown before Campfire kept
    that): the bot then leaves those buttons where they are."""
    async with db.session() as session, session.begin():
        await session.execute(update(StoryMessage).values(buttons=False))
