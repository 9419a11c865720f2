"""Shared fixtures: a migrated database, the fake model server, a provider pointed at it.

The database fixture runs every test on SQLite, and also on PostgreSQL when
``CAMPFIRE_TEST_POSTGRES_URL`` names a server (``scripts/test`` starts a throwaway one), each
test in a database of its own.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from engine.library import seed_builtin_scenarios
from engine.providers.openai_compat import OpenAICompatibleProvider
from engine.storage.database import Database
from tests.fakes.openai_server import FakeModelServer

POSTGRES_URL = os.environ.get("CAMPFIRE_TEST_POSTGRES_URL")
BACKENDS = ["sqlite"] + (["postgresql"] if POSTGRES_URL else [])


async def _postgres_database() -> tuple[str, str]:
    """Create an empty database on the test server; returns its URL and name."""
    assert POSTGRES_URL
    name = f"campfire_test_{uuid.uuid4().hex[:12]}"
    admin = create_async_engine(POSTGRES_URL, isolation_level="AUTOCOMMIT")
    async with admin.connect() as connection:
        await connection.execute(text(f'CREATE DATABASE "{name}"'))
    await admin.dispose()
    return make_url(POSTGRES_URL).set(database=name).render_as_string(hide_password=False), name


async def _drop_postgres_database(name: str) -> None:
    assert POSTGRES_URL
    admin = create_async_engine(POSTGRES_URL, isolation_level="AUTOCOMMIT")
    async with admin.connect() as connection:
        await connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    await admin.dispose()


@pytest.fixture(params=BACKENDS)
async def db(request: pytest.FixtureRequest, tmp_path) -> AsyncIterator[Database]:
    name = None
    if request.param == "postgresql":
        url, name = await _postgres_database()
    else:
        url = f"sqlite+aiosqlite:///{tmp_path / 'campfire.db'}"
    database = Database(url)
    await database.migrate()
    async with database.session() as session, session.begin():
        await seed_builtin_scenarios(session)
    try:
        yield database
    finally:
        await database.dispose()
        if name:
            await _drop_postgres_database(name)


@pytest.fixture
def fake_model() -> Iterator[FakeModelServer]:
    with FakeModelServer() as server:
        yield server


@pytest.fixture
async def provider(fake_model: FakeModelServer) -> AsyncIterator[OpenAICompatibleProvider]:
    client = OpenAICompatibleProvider(fake_model.base_url, fake_model.model, timeout=2.0)
    try:
        yield client
    finally:
        await client.aclose()
