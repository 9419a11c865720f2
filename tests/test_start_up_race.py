"""Several processes started at once on a fresh PostgreSQL database (the compose profile's two
shards, a cluster after a deploy): each migrates and seeds the shipped scenarios at start-up,
one at a time under the setup lock (``engine.storage.dialect.hold_setup_lock``), so all of them
start and the database holds one schema and one copy of each scenario."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import func, select
from sqlmodel import col

from engine.library.scenarios.shipped import seed_builtin_scenarios
from engine.storage.database import Database
from engine.storage.dialect import hold_setup_lock
from engine.storage.models import Scenario
from tests.conftest import POSTGRES_URL, postgres_databases

pytestmark = pytest.mark.skipif(POSTGRES_URL is None, reason="needs CAMPFIRE_TEST_POSTGRES_URL")

PROCESSES = 4


async def _start_up(url: str) -> int:
    """What each process does at start-up (``bot.services.build_services``), on its own
    connections."""
    db = Database(url)
    try:
        await db.migrate()
        async with db.transaction() as session:
            await hold_setup_lock(session)
            return await seed_builtin_scenarios(session)
    finally:
        await db.dispose()


async def test_processes_starting_at_once_on_a_fresh_database_all_start():
    assert postgres_databases is not None
    name = await postgres_databases.empty()
    url = postgres_databases.url(name)
    try:
        counts = await asyncio.gather(*(_start_up(url) for _ in range(PROCESSES)))
        shipped = counts[0]
        assert shipped > 0 and counts == [shipped] * PROCESSES
        db = Database(url)
        try:
            async with db.session() as session:
                rows = await session.scalar(
                    select(func.count()).where(col(Scenario.builtin_key).is_not(None))
                )
        finally:
            await db.dispose()
        assert rows == shipped  # one copy of each, not one per process
    finally:
        await postgres_databases.drop(name)
