"""The database: an async SQLAlchemy engine, sessions, and migrations to head.

SQLite (aiosqlite) is the embedded default and needs no setup; PostgreSQL (asyncpg) runs the
same code. A fresh database is created by running every Alembic revision, never by
``create_all``, so a new install and an upgraded one have the same schema.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import cache
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from engine.storage.dialect import WriteGateTimeout, create_engine, hold_setup_lock
from engine.storage.write_gate import WriteGate

MIGRATIONS = Path(__file__).resolve().parent.parent / "migrations"

#: Full-text search structures migrations 0006 (memories) and 0020 (knowledge) build by hand,
#: which the models do not describe (FTS5 tables and their shadow tables on SQLite; generated
#: columns and their indexes on PostgreSQL).
SEARCH_ONLY_NAMES = (
    "memories_fts",
    "search_vector",
    "ix_memories_search_vector",
    "knowledge_chunks_fts",
    "ix_knowledge_chunks_search_vector",
)


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


#: The longest a write transaction waits for its turn at this process's SQLite write gate
#: before it gives up as SQLite would (``WriteGateTimeout``, a busy database).
WRITE_GATE_WAIT_S = 60.0

#: Set while this task (and the tasks it starts) holds its database's write gate: a write
#: transaction opened inside another does not wait for the gate it already holds.
_holding: contextvars.ContextVar[frozenset[int]] = contextvars.ContextVar(
    "campfire_write_gate", default=frozenset()
)


class Database:
    def __init__(self, url: str, *, echo: bool = False) -> None:
        self.url = url
        self.engine = create_engine(url, echo=echo)
        self.is_sqlite = self.engine.dialect.name == "sqlite"
        self.sessions = async_sessionmaker(self.engine, expire_on_commit=False)
        # Per process, and safe so: SQLite has one writer at a time anyway, and across
        # processes its lock and busy timeout still decide (engine.storage.write_gate).
        # PostgreSQL has row locks and needs no gate.
        self._write_gate = WriteGate() if self.is_sqlite else None

    def session(self) -> AsyncSession:
        """A session for reading (a write goes through ``transaction``)."""
        return self.sessions()

    @asynccontextmanager
    async def transaction(self, *, urgent: bool = False) -> AsyncIterator[AsyncSession]:
        """A session in a transaction, committed when the block ends (rolled back if it
        raises). On SQLite, write transactions of this process take turns at the write gate,
        ``urgent`` ones (a player waits on them to see a turn end) before the others."""
        gate = self._write_gate
        if gate is None or id(gate) in _holding.get():
            async with self.sessions() as session, session.begin():
                yield session
            return
        try:
            async with asyncio.timeout(WRITE_GATE_WAIT_S):
                await gate.acquire(urgent=urgent)
        except TimeoutError:
            raise WriteGateTimeout(
                f"waited {WRITE_GATE_WAIT_S:g} s for the database's other writers"
            ) from None
        held = _holding.set(_holding.get() | {id(gate)})
        try:
            async with self.sessions() as session, session.begin():
                yield session
        finally:
            _holding.reset(held)
            gate.release()

    async def migrate(self) -> None:
        """Bring the schema to the newest revision (creating it on a fresh database).

        On SQLite, with its foreign keys off while the migrations run: SQLite alters most of a
        table by copying it to a new one and dropping the old (alembic's batch mode), and a
        drop with foreign keys on deletes every row that references the old table, through
        each ON DELETE CASCADE (sqlite.org, "Foreign Key Support" §5; alembic, "Running
        'Batch' Migrations for SQLite", on referencing foreign keys). The switch is a no-op
        inside a transaction, so it is thrown before the migrations' transaction begins, and
        the references are checked before that transaction commits."""
        async with self.engine.connect() as connection:
            sqlite = connection.dialect.name == "sqlite"
            if sqlite:
                await connection.exec_driver_sql("PRAGMA foreign_keys=OFF")
                await connection.commit()
            try:
                async with connection.begin():
                    await hold_setup_lock(connection)
                    await connection.run_sync(self._upgrade)
                    if sqlite:
                        broken = (
                            await connection.exec_driver_sql("PRAGMA foreign_key_check")
                        ).all()
                        if broken:
                            raise RuntimeError(f"the migrations broke references: {broken[:5]}")
            finally:
                if sqlite:
                    await connection.exec_driver_sql("PRAGMA foreign_keys=ON")
                    await connection.commit()

    @staticmethod
    def _upgrade(connection: Connection) -> None:
        if MigrationContext.configure(connection).get_current_revision() == head_revision():
            return  # at the newest schema already: alembic need not read every migration
        command.upgrade(alembic_config(connection=connection), "head")

    async def dispose(self) -> None:
        await self.engine.dispose()


@cache
def head_revision() -> str | None:
    """The newest migration's revision. Reading it loads every migration script (about a
    tenth of a second), so it is read once a process: the scripts do not change while it runs.
    """
    return ScriptDirectory.from_config(alembic_config()).get_current_head()
