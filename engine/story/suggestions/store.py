"""Suggested actions in the database: whether an adventure offers them, and each take's own."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.ext.asyncio import AsyncSession

from engine.people.servers import server_settings
from engine.storage.models import Adventure
from engine.storage.play_models import ScenarioPlayOptions, TurnSuggestions


async def suggestions_on(session: AsyncSession, adventure: Adventure) -> bool:
    """Whether the adventure offers suggested actions: unless its scenario's bundle or its
    server switched them off."""
    if adventure.scenario_id is not None:
        options = await session.get(ScenarioPlayOptions, adventure.scenario_id)
        if options is not None and not options.suggestions:
            return False
    return (await server_settings(session, adventure.server_id)).suggestions


async def keep(session: AsyncSession, node_id: int, take: int, texts: Sequence[str]) -> None:
    """Store a take's suggestions (in the transaction that stores the take)."""
    if texts:
        await session.merge(TurnSuggestions(node_id=node_id, take=take, texts=list(texts)))


async def offered(session: AsyncSession, node_id: int, take: int) -> tuple[str, ...]:
    """The suggestions a take offered (none: none were, or they were switched off)."""
    row = await session.get(TurnSuggestions, (node_id, take))
    return tuple(row.texts) if row is not None else ()
