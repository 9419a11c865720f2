"""Chapter plans in the database: a scenario's, copied to an adventure at its start."""

from __future__ import annotations

import copy
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from engine.storage.chapter_models import AdventureChapters, ScenarioChapters
from engine.storage.models import Adventure
from engine.story.chapters.progress import PROGRESS_KEY, initial_progress


def add_scenario_plan(session: AsyncSession, scenario_id: int, plan: dict[str, Any]) -> None:
    """Keep a checked plan with a scenario just stored (nothing when it has none)."""
    if plan:
        session.add(ScenarioChapters(scenario_id=scenario_id, plan=copy.deepcopy(plan)))


async def drop_scenario_plan(session: AsyncSession, scenario_id: int | None) -> None:
    """Before a shipped scenario is stored again with its parts."""
    await session.execute(
        delete(ScenarioChapters).where(col(ScenarioChapters.scenario_id) == scenario_id)
    )


async def scenario_plan(session: AsyncSession, scenario_id: int | None) -> dict[str, Any]:
    if scenario_id is None:
        return {}
    plan = await session.scalar(
        select(col(ScenarioChapters.plan)).where(col(ScenarioChapters.scenario_id) == scenario_id)
    )
    return plan or {}


async def adventure_plan(session: AsyncSession, adventure_id: int) -> dict[str, Any]:
    plan = await session.scalar(
        select(col(AdventureChapters.plan)).where(
            col(AdventureChapters.adventure_id) == adventure_id
        )
    )
    return plan or {}


async def begin_chapters(
    session: AsyncSession, adventure: Adventure, scenario_id: int | None
) -> None:
    """Give a new adventure its scenario's plan and the progress at its first beat (in the
    world state, which the opening's snapshot then holds)."""
    plan = await scenario_plan(session, scenario_id)
    if not plan:
        return
    assert adventure.id is not None
    session.add(AdventureChapters(adventure_id=adventure.id, plan=plan))
    adventure.world_state = {**(adventure.world_state or {}), PROGRESS_KEY: initial_progress(plan)}


def plays_chapters(adventure: Adventure) -> bool:
    """Whether the adventure follows chapters (read without a query: its progress is there)."""
    return isinstance((adventure.world_state or {}).get(PROGRESS_KEY), dict)
