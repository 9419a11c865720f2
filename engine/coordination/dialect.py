"""The two statements of coordination that SQLite and PostgreSQL spell differently.

Both speak ``INSERT … ON CONFLICT``, but SQLAlchemy builds it per dialect; and only PostgreSQL
locks a single row (SQLite locks the whole database for a writer, which serves as well).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Table, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession


def is_postgres(session: AsyncSession) -> bool:
    return session.get_bind().dialect.name == "postgresql"


def insert(session: AsyncSession, table: Table) -> Any:
    """An ``INSERT`` that can take ``on_conflict_do_update`` / ``on_conflict_do_nothing``."""
    return (postgresql.insert if is_postgres(session) else sqlite.insert)(table)


async def lock_row(session: AsyncSession, table: Table, key: Any, *columns: Any) -> Any:
    """Read one row by primary key and keep it from changing until the transaction ends.

    PostgreSQL: ``SELECT ... FOR UPDATE``. SQLite has no row locks, and with Python's sqlite3 a
    plain SELECT even runs outside the transaction; a (no-op) UPDATE opens the transaction and
    takes the database's write lock, which every other writer waits for. ``None``: no such row
    (nothing is locked on PostgreSQL then; a concurrent INSERT is settled by its conflict).
    """
    (primary,) = table.primary_key.columns
    if is_postgres(session):
        statement: Any = (
            table.select().with_only_columns(*columns).where(primary == key).with_for_update()
        )
    else:
        statement = update(table).where(primary == key).values({primary: primary})
        statement = statement.returning(*columns)
    return (await session.execute(statement)).first()
