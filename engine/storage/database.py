"""The database: an async SQLAlchemy engine, sessions, and migrations to head.

SQLite (aiosqlite) is the embedded default and needs no setup; PostgreSQL (asyncpg) runs the
same code. A fresh database is created by running every Alembic revision, never by
``create_all``, so a new install and an upgraded one have the same schema.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from engine.storage.dialect import create_engine

MIGRATIONS = Path(__file__).resolve().parent.parent / "migrations"

#: Full-text search structures migration 0006 builds by hand, which the models do not describe
#: (an FTS5 table and its shadow tables on SQLite; a generated column and its index on
#: PostgreSQL).
SEARCH_ONLY_NAMES = ("memories_fts", "search_vector", "ix_memories_search_vector")


def described_by_models(name: str | None, type_: str, parent_names: Any) -> bool:
    """Alembic's ``include_name``: leave the hand-built search structures out of comparisons."""
    return not (name and name.startswith(SEARCH_ONLY_NAMES))


def alembic_config(url: str | None = None, connection: Connection | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    if url:
        config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    config.attributes["connection"] = connection
    return config


class Database:
    def __init__(self, url: str, *, echo: bool = False) -> None:
        self.url = url
        self.engine = create_engine(url, echo=echo)
        self.is_sqlite = self.engine.dialect.name == "sqlite"
        self.sessions = async_sessionmaker(self.engine, expire_on_commit=False)

    def session(self) -> AsyncSession:
        return self.sessions()

    async def migrate(self) -> None:
        """Bring the schema to the newest revision (creating it on a fresh database)."""
        async with self.engine.begin() as connection:
            await connection.run_sync(self._upgrade)

    @staticmethod
    def _upgrade(connection: Connection) -> None:
        command.upgrade(alembic_config(connection=connection), "head")

    async def dispose(self) -> None:
        await self.engine.dispose()
