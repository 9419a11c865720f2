"""The PostgreSQL databases of a test process: one migrated and seeded template, and copies of it
that tests use one at a time and hand back.

A copy is made once (``CREATE DATABASE … TEMPLATE``) and, after each test, put back as the
template has it rather than dropped and made again: the tables the test wrote to emptied, the
template's rows and every sequence's position given back. Making and dropping a database cost
about 0.2 s of CPU (the server writes the whole copy to its log), for each of some 800 tests;
putting one back costs a fifth of that. A copy whose tables, columns, constraints or indexes are
not the template's any more (a test that changed the schema) is dropped instead, and so is one
that could not be put back: no test gets a database another test left different.

A test process runs one test at a time, so what is here (the template's name and contents, the
copies waiting) is the process's own.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Table, insert, select, text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool
from sqlmodel import SQLModel

import engine.storage.models  # noqa: F401 - every table in SQLModel.metadata

#: What makes two databases' tables the same: every column of every table, with its type, and
#: every constraint and index, by name and definition.
_SCHEMA = text(
    """
    SELECT md5(coalesce(string_agg(item, ';' ORDER BY item), '')) FROM (
        SELECT table_name || '.' || column_name || ':' || data_type || ':'
               || is_nullable || ':' || coalesce(column_default, '') AS item
        FROM information_schema.columns WHERE table_schema = 'public'
        UNION ALL
        SELECT conrelid::regclass::text || '.' || conname || ':' || pg_get_constraintdef(oid)
        FROM pg_constraint WHERE connamespace = 'public'::regnamespace
        UNION ALL
        SELECT indexdef FROM pg_indexes WHERE schemaname = 'public'
    ) AS parts
    """
)


@dataclass
class _Template:
    name: str
    schema: str
    tables: list[str]
    #: The seeded rows, table by table in an order their foreign keys allow.
    rows: list[tuple[Table, list[dict[str, Any]]]]
    #: Every sequence, as ``setval``'s arguments that put it where the template has it.
    sequences: list[tuple[str, int, bool]]
    #: Copies made from it and waiting for a test.
    waiting: list[str] = field(default_factory=list)


class PostgresDatabases:
    """The template and its copies on the server at ``admin_url`` (a superuser's)."""

    def __init__(self, admin_url: str) -> None:
        self.admin_url = admin_url
        self._admin: AsyncEngine | None = None
        self._engines: dict[str, AsyncEngine] = {}
        self._template: _Template | None = None

    def url(self, name: str) -> str:
        return make_url(self.admin_url).set(database=name).render_as_string(hide_password=False)

    async def _execute(self, statement: str, **params: Any) -> None:
        # One autocommit engine a process: CREATE and DROP DATABASE refuse a transaction.
        if self._admin is None:
            self._admin = create_async_engine(
                self.admin_url, isolation_level="AUTOCOMMIT", poolclass=NullPool
            )
        async with self._admin.connect() as connection:
            await connection.execute(text(statement), params)

    async def template(self, migrate_and_seed) -> str:
        """The template's name, made (by ``migrate_and_seed(url)``) the first time."""
        if self._template is None:
            name = f"campfire_template_{uuid.uuid4().hex[:12]}"
            await self._execute(f'CREATE DATABASE "{name}"')
            await migrate_and_seed(self.url(name))
            self._template = await self._read_template(name)
        return self._template.name

    async def _read_template(self, name: str) -> _Template:
        engine = create_async_engine(self.url(name))
        try:
            async with engine.connect() as connection:
                schema = (await connection.execute(_SCHEMA)).scalar_one()
                tables = list(
                    (
                        await connection.execute(
                            text(
                                "SELECT tablename FROM pg_tables WHERE schemaname = 'public' "
                                "AND tablename <> 'alembic_version' ORDER BY tablename"
                            )
                        )
                    ).scalars()
                )
                rows = []
                for table_name in await _in_key_order(connection, tables):
                    table = SQLModel.metadata.tables[table_name]
                    # Generated columns are the database's to fill.
                    written = [column for column in table.columns if column.computed is None]
                    found = [
                        dict(row._mapping) for row in await connection.execute(select(*written))
                    ]
                    if found:
                        rows.append((table, found))
                sequences = [
                    (str(sequence), int(value), bool(called))
                    for sequence, value, called in await connection.execute(
                        text(
                            "SELECT schemaname || '.' || sequencename, "
                            "coalesce(last_value, start_value), last_value IS NOT NULL "
                            "FROM pg_sequences"
                        )
                    )
                ]
        finally:
            await engine.dispose()
        return _Template(name, str(schema), tables, rows, sequences)

    async def take(self, migrate_and_seed) -> str:
        """A database as the template is, for one test: one handed back, or a new copy."""
        template = await self.template(migrate_and_seed)
        assert self._template is not None
        if self._template.waiting:
            return self._template.waiting.pop()
        name = f"campfire_test_{uuid.uuid4().hex[:12]}"
        await self._execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
        return name

    async def give_back(self, name: str) -> None:
        """Put ``name`` back as the template has it, for the next test; drop it if it cannot be."""
        assert self._template is not None
        # A connection the test left open would hold locks the emptying waits for.
        await self._execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = :name AND pid <> pg_backend_pid()",
            name=name,
        )
        try:
            restored = await self._restore(name, self._template)
        except Exception:
            restored = False
        if restored:
            self._template.waiting.append(name)
        else:
            await self.drop(name)

    def _engine(self, name: str) -> AsyncEngine:
        # No pool: each test runs on an event loop of its own, and a pooled connection belongs
        # to the loop that opened it.
        if name not in self._engines:
            self._engines[name] = create_async_engine(self.url(name), poolclass=NullPool)
        return self._engines[name]

    async def _restore(self, name: str, template: _Template) -> bool:
        async with self._engine(name).begin() as connection:
            if (await connection.execute(_SCHEMA)).scalar_one() != template.schema:
                return False
            # Only the tables the test wrote to, emptied row by row: far cheaper than TRUNCATE,
            # which makes each of some forty tables and their indexes new files. Foreign keys
            # are not checked meanwhile (a replica's setting, for this transaction), so the
            # order does not matter; what is left satisfies them, as the template does.
            await connection.execute(text("SET LOCAL session_replication_role = replica"))
            written = " UNION ALL ".join(
                f"SELECT '{table}' WHERE EXISTS (SELECT 1 FROM \"{table}\")"
                for table in template.tables
            )
            for (table,) in await connection.execute(text(written)):
                await connection.execute(text(f'DELETE FROM "{table}"'))
            for table, rows in template.rows:
                await connection.execute(insert(table), rows)
            await connection.execute(
                text(
                    "SELECT setval(CAST(s AS regclass), v, c) FROM unnest(CAST(:s AS text[]), "
                    "CAST(:v AS bigint[]), CAST(:c AS boolean[])) AS x(s, v, c)"
                ),
                {
                    "s": [sequence for sequence, _, _ in template.sequences],
                    "v": [value for _, value, _ in template.sequences],
                    "c": [called for _, _, called in template.sequences],
                },
            )
        return True

    async def empty(self) -> str:
        """A new database with nothing in it (no tables), for a test of what a first start does;
        the test drops it."""
        name = f"campfire_empty_{uuid.uuid4().hex[:12]}"
        await self._execute(f'CREATE DATABASE "{name}"')
        return name

    async def drop(self, name: str) -> None:
        engine = self._engines.pop(name, None)
        if engine is not None:
            await engine.dispose()
        await self._execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    async def close(self) -> None:
        """Drop the template and every copy waiting."""
        if self._template is not None:
            for name in self._template.waiting:
                await self.drop(name)
            await self.drop(self._template.name)
            self._template = None
        if self._admin is not None:
            await self._admin.dispose()
            self._admin = None


async def _in_key_order(connection: AsyncConnection, tables: list[str]) -> list[str]:
    """``tables`` ordered so that each comes after the tables its foreign keys name."""
    edges = await connection.execute(
        text(
            "SELECT conrelid::regclass::text, confrelid::regclass::text FROM pg_constraint "
            "WHERE contype = 'f' AND connamespace = 'public'::regnamespace"
        )
    )
    needs: dict[str, set[str]] = {table: set() for table in tables}
    for table, target in edges:
        name, target_name = str(table).strip('"'), str(target).strip('"')
        if name in needs and target_name != name:
            needs[name].add(target_name)
    ordered: list[str] = []
    while needs:
        ready = sorted(table for table, before in needs.items() if not before - set(ordered))
        if not ready:  # a cycle: whatever is left, as it is (the seed has none)
            ready = sorted(needs)
        for table in ready:
            ordered.append(table)
            del needs[table]
    return ordered
