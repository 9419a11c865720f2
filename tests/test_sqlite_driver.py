"""SQLite's driver adapter (engine.storage.sqlite_driver): one call into the connection's thread
a statement, with what SQLAlchemy's own adapter returns (rows, row counts, the last row id,
errors and their rollback)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import aiosqlite
import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError, OperationalError

from engine.storage import sqlite_driver
from engine.storage.dialect import create_engine


@pytest.fixture
async def engine(tmp_path: Path):
    made = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'driver.db'}")
    async with made.begin() as connection:
        await connection.execute(
            text("CREATE TABLE things (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE)")
        )
    try:
        yield made
    finally:
        await made.dispose()


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """What each call queued on a connection's thread runs, counted (the calls still run)."""
    counted: Counter[str] = Counter()
    queue = aiosqlite.Connection._execute

    async def counting(self, fn, *args, **kwargs):
        counted[getattr(fn, "__name__", repr(fn))] += 1
        return await queue(self, fn, *args, **kwargs)

    monkeypatch.setattr(aiosqlite.Connection, "_execute", counting)
    return counted


async def test_a_statement_is_one_call_into_the_connections_thread(engine, calls):
    async with engine.connect() as connection:
        await connection.execute(text("SELECT 1"))  # the pool's first use: pragmas and all
        calls.clear()
        rows = (await connection.execute(text("SELECT :a AS a, :b AS b"), {"a": 1, "b": "x"})).all()
    assert [tuple(row) for row in rows] == [(1, "x")]
    assert calls["_run"] == 1
    assert set(calls) <= {"_run", "rollback"}  # the connection's return ends its transaction


async def test_rows_counts_and_ids_are_those_sqlite_reports(engine):
    async with engine.begin() as connection:
        inserted = await connection.execute(text("INSERT INTO things (name) VALUES ('lantern')"))
        assert inserted.lastrowid == 1
        many = await connection.execute(
            text("INSERT INTO things (name) VALUES (:name)"),
            [{"name": "rope"}, {"name": "salt"}, {"name": "map"}],
        )
        assert many.rowcount == 3
        changed = await connection.execute(
            text("UPDATE things SET name = name || '!' WHERE id > 1")
        )
        assert changed.rowcount == 3
        names = (await connection.execute(text("SELECT name FROM things ORDER BY id"))).scalars()
        assert list(names) == ["lantern", "rope!", "salt!", "map!"]
        empty = await connection.execute(text("SELECT name FROM things WHERE id > 99"))
        assert empty.keys() == ["name"] and empty.all() == []


async def test_an_error_is_sqlalchemys_and_the_transaction_rolls_back(engine):
    with pytest.raises(IntegrityError, match="UNIQUE constraint failed"):
        async with engine.begin() as connection:
            await connection.execute(text("INSERT INTO things (name) VALUES ('oil')"))
            await connection.execute(text("INSERT INTO things (name) VALUES ('oil')"))
    with pytest.raises(OperationalError, match="no such table"):
        async with engine.connect() as connection:
            await connection.execute(text("SELECT * FROM nothing_here"))
    async with engine.connect() as connection:
        count = (await connection.execute(text("SELECT count(*) FROM things"))).scalar_one()
    assert count == 0


async def test_streamed_results_still_come_in_steps(engine):
    async with engine.begin() as connection:
        await connection.execute(
            text("INSERT INTO things (name) VALUES (:name)"),
            [{"name": f"item {n}"} for n in range(25)],
        )
    async with engine.connect() as connection:
        result = await connection.stream(text("SELECT name FROM things ORDER BY id"))
        names = [row.name async for row in result]
    assert names == [f"item {n}" for n in range(25)]


def test_the_engine_uses_the_adapter_where_aiosqlite_queues_calls_as_it_relies_on():
    assert sqlite_driver.dbapi() is not None
    engine = create_engine("sqlite+aiosqlite://")
    assert type(engine.dialect.dbapi) is type(sqlite_driver.dbapi())
