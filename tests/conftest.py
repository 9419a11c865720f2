"""Shared fixtures: a migrated database, the fake model server, a provider pointed at it, and
(from ``tests.discord_env``) Campfire on the Discord stand-in.

The database fixtures run every test on SQLite, and also on PostgreSQL when
``CAMPFIRE_TEST_POSTGRES_URL`` names a server (``scripts/test`` starts a throwaway one), each
test in a database of its own. ``tests/README.md`` says which fixture to use when.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from engine.library.scenarios.shipped import seed_builtin_scenarios
from engine.library.scripting.workers import close as close_script_workers
from engine.llm.providers.openai_compat import OpenAICompatibleProvider
from engine.storage.database import Database
from tests.compiled_cache import shared_compiled_cache
from tests.fakes.openai_server import FakeModelServer
from tests.postgres_databases import PostgresDatabases

pytest_plugins = ["tests.discord_env"]

POSTGRES_URL = os.environ.get("CAMPFIRE_TEST_POSTGRES_URL")
BACKENDS = ["sqlite"] + (["postgresql"] if POSTGRES_URL else [])


#: Each backend's migrated and seeded database, built once per test session; every test gets a
#: copy (a file copy on SQLite; on PostgreSQL a copy made once and put back after each test,
#: ``tests.postgres_databases``), because running the migrations for each of a thousand tests
#: costs minutes.
_templates: dict[str, str] = {}


async def _migrated_and_seeded(url: str) -> None:
    database = Database(url)
    try:
        await database.migrate()
        async with database.session() as session, session.begin():
            await seed_builtin_scenarios(session)
    finally:
        await database.dispose()


#: This test process's PostgreSQL template and the copies tests take and hand back.
postgres_databases = PostgresDatabases(POSTGRES_URL) if POSTGRES_URL else None


async def _sqlite_template(templates: Path) -> str:
    if "sqlite" not in _templates:
        template = templates / "campfire-template.db"
        await _migrated_and_seeded(f"sqlite+aiosqlite:///{template}")
        _templates["sqlite"] = str(template)
    # Disposed above, so the template's write-ahead log is folded into the one file.
    return _templates["sqlite"]


async def _sqlite_database(path: Path, templates: Path) -> str:
    shutil.copyfile(await _sqlite_template(templates), path)
    return f"sqlite+aiosqlite:///{path}"


@pytest.fixture(scope="session", autouse=True)
def _drop_templates() -> Iterator[None]:
    yield
    if postgres_databases is not None:
        asyncio.run(postgres_databases.close())


@pytest.fixture(scope="session", autouse=True)
def _compiled_once_a_process() -> Iterator[None]:
    """Each statement compiled once a test process, not once an engine
    (``tests.compiled_cache``)."""
    with shared_compiled_cache():
        yield


@pytest.fixture(scope="session", autouse=True)
def _warm_script_workers() -> Iterator[None]:
    """One warm pool of script workers for the whole session (per test process): a bot's close
    ends this process's workers (``Services.aclose``), and each of the suite's hundreds of bots
    would otherwise start new ones, an interpreter each. A worker keeps nothing between runs
    (every run gets a fresh QuickJS context), so sharing them changes no test; one that needs a
    pool of its own makes one (``workers.ScriptWorkers()``)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("engine.services.close_script_workers", lambda: None)
        yield
    close_script_workers()


@pytest.fixture(params=BACKENDS)
async def database_url(
    request: pytest.FixtureRequest, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[str]:
    """The URL of a migrated and seeded database of the test's own, on each backend in turn."""
    if request.param == "postgresql":
        assert postgres_databases is not None
        name = await postgres_databases.take(_migrated_and_seeded)
        try:
            yield postgres_databases.url(name)
        finally:
            await postgres_databases.give_back(name)
    else:
        yield await _sqlite_database(tmp_path / "campfire.db", tmp_path_factory.getbasetemp())


@pytest.fixture
def installed_data_dir(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``tmp_path / "data"`` as a first start leaves it: the SQLite database (``campfire.db``,
    the settings' default there) migrated and seeded, a copy of the template. For a test that
    starts Campfire on that folder (``python -m bot``, the console) and is not about the first
    start: migrating a fresh database costs each such start over a second of CPU."""
    data = tmp_path / "data"
    data.mkdir()
    # On a thread with a loop of its own: a sync fixture may run while the test's loop is set.
    with ThreadPoolExecutor(max_workers=1) as thread:
        template = thread.submit(
            asyncio.run, _sqlite_template(tmp_path_factory.getbasetemp())
        ).result()
    shutil.copyfile(template, data / "campfire.db")
    return data


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[Database]:
    database = Database(database_url)
    try:
        yield database
    finally:
        await database.dispose()


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
