"""A scenario's bundle options for play (``"suggestions"``, ``"fallback"``), kept in a table of
their own (``ScenarioPlayOptions``) beside the scenario: written when a scenario is imported or
a shipped one seeded, read back for an export. A scenario with the defaults keeps no row."""

from __future__ import annotations

from sqlalchemy import delete
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from engine.library.formats.draft import ScenarioDraft
from engine.storage.play_models import ScenarioPlayOptions


async def keep_play_options(session: AsyncSession, scenario_id: int, draft: ScenarioDraft) -> None:
    """Store the draft's play options for the scenario (replacing any it had)."""
    await session.execute(
        delete(ScenarioPlayOptions).where(col(ScenarioPlayOptions.scenario_id) == scenario_id)
    )
    if draft.suggestions and not draft.fallback:
        return
    session.add(
        ScenarioPlayOptions(
            scenario_id=scenario_id, suggestions=draft.suggestions, fallback=list(draft.fallback)
        )
    )


async def load_play_options(session: AsyncSession, scenario_id: int, draft: ScenarioDraft) -> None:
    """Put the scenario's stored play options into ``draft`` (for an export)."""
    options = await session.get(ScenarioPlayOptions, scenario_id)
    if options is not None:
        draft.suggestions = options.suggestions
        draft.fallback = list(options.fallback)
