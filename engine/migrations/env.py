"""Alembic environment. Campfire runs migrations itself (``Database.migrate``) with a connection
it hands over in ``config.attributes``; the ``alembic`` command line works too, given a URL."""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy.ext.asyncio import create_async_engine
from sqlmodel import SQLModel

import engine.storage.tables  # noqa: F401  (registers every table on SQLModel.metadata)
from engine.storage.database import described_by_models

config = context.config
target_metadata = SQLModel.metadata


def _run(connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        # SQLite cannot ALTER most things in place; batch mode rebuilds the table instead.
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
        include_name=described_by_models,
    )
    with context.begin_transaction():
        context.run_migrations()


async def _run_with_own_engine(url: str) -> None:
    engine = create_async_engine(url)
    async with engine.begin() as connection:
        await connection.run_sync(_run)
    await engine.dispose()


def run_migrations_offline() -> None:
    context.configure(
        url=config.get_main_option("sqlalchemy.url"),
        target_metadata=target_metadata,
        literal_binds=True,
    )
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
elif (connection := config.attributes.get("connection")) is not None:
    _run(connection)
else:
    url = config.get_main_option("sqlalchemy.url")
    if url is None:
        raise RuntimeError("No database to migrate: set sqlalchemy.url to its URL.")
    asyncio.run(_run_with_own_engine(url))
