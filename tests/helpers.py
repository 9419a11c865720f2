"""Small helpers the engine tests share."""

from __future__ import annotations

from sqlalchemy import func, select

from engine.actions import PlayerAction
from engine.adventures import start_adventure
from engine.events import TurnEvent
from engine.storage.database import Database
from engine.storage.models import ActionType, Scenario, StoryNode
from engine.turns import TurnEngine


async def new_adventure(db: Database, *, channel_id: int = 1) -> int:
    async with db.session() as session, session.begin():
        scenario_id = await session.scalar(select(Scenario.id).order_by(Scenario.id))
        adventure = await start_adventure(session, scenario_id, channel_id=channel_id)
        return adventure.id


async def play(
    engine: TurnEngine, adventure_id: int, kind: ActionType, text: str = ""
) -> list[TurnEvent]:
    return [event async for event in engine.play(adventure_id, PlayerAction(kind, text))]


async def node_count(db: Database, adventure_id: int) -> int:
    async with db.session() as session:
        return await session.scalar(
            select(func.count())
            .select_from(StoryNode)
            .where(StoryNode.adventure_id == adventure_id)
        )
