"""The suite's PostgreSQL databases (``tests.postgres_databases``): a database handed back after
a test is, for the next test, exactly what a new copy of the template is."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from engine.storage.database import Database
from engine.storage.models import Adventure
from tests.conftest import POSTGRES_URL, _migrated_and_seeded, postgres_databases

pytestmark = pytest.mark.skipif(POSTGRES_URL is None, reason="needs CAMPFIRE_TEST_POSTGRES_URL")


async def _contents(url: str) -> dict[str, object]:
    """Every table's rows (sorted: a table's first column need not be unique, and a copy put
    back may hold its rows in another physical order, which no query relies on) and every
    sequence's position."""
    database = Database(url)
    try:
        async with database.session() as session:
            tables = (
                await session.execute(
                    text(
                        "SELECT tablename FROM pg_tables WHERE schemaname = 'public' "
                        "ORDER BY tablename"
                    )
                )
            ).scalars()
            out: dict[str, object] = {}
            for table in tables:
                rows = await session.execute(text(f'SELECT * FROM "{table}"'))
                out[table] = sorted(tuple(map(repr, row)) for row in rows)
            sequences = await session.execute(
                text("SELECT sequencename, last_value FROM pg_sequences ORDER BY 1")
            )
            out["sequences"] = [tuple(row) for row in sequences]
            return out
    finally:
        await database.dispose()


async def test_a_database_handed_back_is_a_new_copy_again():
    assert postgres_databases is not None
    fresh = await postgres_databases.take(_migrated_and_seeded)
    url = postgres_databases.url(fresh)
    before = await _contents(url)
    database = Database(url)
    try:
        async with database.transaction() as session:
            session.add(Adventure(channel_id=42, title="Left behind"))
        async with database.transaction() as session:
            await session.execute(text("DELETE FROM scenario_cards WHERE id = 1"))
    finally:
        await database.dispose()
    assert await _contents(url) != before
    await postgres_databases.give_back(fresh)

    again = await postgres_databases.take(_migrated_and_seeded)
    assert again == fresh  # handed back, not made anew
    assert await _contents(postgres_databases.url(again)) == before
    await postgres_databases.give_back(again)


async def test_a_database_whose_tables_changed_is_dropped_not_handed_out():
    assert postgres_databases is not None
    changed = await postgres_databases.take(_migrated_and_seeded)
    database = Database(postgres_databases.url(changed))
    try:
        async with database.transaction() as session:
            await session.execute(text("ALTER TABLE adventures ADD COLUMN stray integer"))
    finally:
        await database.dispose()
    await postgres_databases.give_back(changed)
    other = await postgres_databases.take(_migrated_and_seeded)
    assert other != changed
    await postgres_databases.give_back(other)
