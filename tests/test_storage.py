"""Storage: migrations to head, SQLite's settings, cascading deletes, deferred heavy columns."""

from __future__ import annotations

import re

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import delete, event, func, select, text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import create_async_engine
from sqlmodel import SQLModel, col

import engine.storage.tables  # noqa: F401  (every table on the metadata compared)
from engine.library.knowledge.retrieval import KNOWLEDGE_TEXT
from engine.library.scenarios.start import start_adventure
from engine.llm.retrieval.lexical import search
from engine.people.accounts import touch_server, touch_user
from engine.storage.coordination_models import RequestRecord, TurnLease
from engine.storage.database import Database, alembic_config, described_by_models
from engine.storage.dialect import is_busy
from engine.storage.knowledge_models import KnowledgeChunk, KnowledgeSource
from engine.storage.memory_models import Memory
from engine.storage.models import (
    Adventure,
    AdventureCard,
    Branch,
    Scenario,
    ScenarioCard,
    Server,
    StoryNode,
    Take,
    User,
)
from engine.story.memory.retrieval import MemoryRetriever
from tests.helpers import new_adventure, node_count


async def test_a_fresh_database_is_at_the_newest_revision(db: Database):
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    async with db.engine.connect() as connection:
        current = await connection.run_sync(
            lambda sync: MigrationContext.configure(sync).get_current_revision()
        )
        # The migrations build exactly the schema the models describe.
        diff = await connection.run_sync(
            lambda sync: compare_metadata(
                MigrationContext.configure(sync, opts={"include_name": described_by_models}),
                SQLModel.metadata,
            )
        )
    assert current == head
    assert diff == []


async def test_migrating_twice_changes_nothing(db: Database):
    await db.migrate()
    async with db.session() as session:
        assert await session.scalar(select(func.count()).select_from(Scenario)) >= 1


async def test_sqlite_runs_with_wal_foreign_keys_and_a_busy_timeout(db: Database):
    if not db.is_sqlite:
        pytest.skip("SQLite settings")
    async with db.engine.connect() as connection:
        assert (await connection.execute(text("PRAGMA journal_mode"))).scalar() == "wal"
        assert (await connection.execute(text("PRAGMA foreign_keys"))).scalar() == 1
        assert (await connection.execute(text("PRAGMA busy_timeout"))).scalar() >= 5000


async def _populate(db: Database, *, server_id: int | None, user_id: int) -> int:
    """An adventure with cards, a turn, a take, a memory, a lease and a request record."""
    async with db.session() as session, session.begin():
        await touch_user(session, user_id, "Ash")
        if server_id is not None:
            await touch_server(session, server_id, "The Hearth")
        scenario = Scenario(title="Owned", server_id=server_id, owner_id=user_id, prompt="Go.")
        session.add(scenario)
        await session.flush()
        session.add(ScenarioCard(scenario_id=scenario.id, title="Card", keys="card"))
        await session.flush()
        adventure = await start_adventure(
            session, scenario.id, channel_id=42, server_id=server_id, host_id=user_id
        )
        node = StoryNode(
            adventure_id=adventure.id,
            parent_id=adventure.head_node_id,
            index=1,
            role="narrator",
            action="continue",
            text="x",
        )
        session.add(node)
        await session.flush()
        session.add(Take(node_id=node.id, number=2, text="y"))
        session.add(Memory(adventure_id=adventure.id, text="You went."))
        session.add(TurnLease(adventure_id=adventure.id, holder="test"))
        session.add(
            RequestRecord(
                interaction_id=10**18 + user_id,
                adventure_id=adventure.id,
                user_id=user_id,
                payload_digest="d",
            )
        )
        return adventure.id


async def _count(db: Database, model) -> int:
    async with db.session() as session:
        return await session.scalar(select(func.count()).select_from(model))


OWNED = (AdventureCard, Branch, Memory, Take, TurnLease, RequestRecord)


async def test_deleting_a_user_removes_what_they_own_in_one_statement(db: Database):
    builtin = await _count(db, Scenario)
    await _populate(db, server_id=None, user_id=7)
    statements = []
    listener = lambda *args: statements.append(args[2])  # noqa: E731
    event.listen(db.engine.sync_engine, "before_cursor_execute", listener)
    async with db.session() as session, session.begin():
        await session.execute(delete(User).where(User.id == 7))
    event.remove(db.engine.sync_engine, "before_cursor_execute", listener)

    assert [s for s in statements if s.lstrip().upper().startswith("DELETE")] == [statements[0]]
    assert await _count(db, Adventure) == 0
    assert await _count(db, StoryNode) == 0
    assert await _count(db, Scenario) == builtin  # shipped scenarios belong to nobody
    for model in OWNED:
        assert await _count(db, model) == 0, model.__name__


async def test_a_server_adventure_survives_its_host_and_goes_with_the_server(db: Database):
    adventure_id = await _populate(db, server_id=99, user_id=8)
    # The host's own scenario goes with them; the server's adventure stays, hostless.
    async with db.session() as session, session.begin():
        await session.execute(update_scenario_owner(adventure_id))
        await session.execute(delete(User).where(User.id == 8))
    async with db.session() as session:
        adventure = await session.get(Adventure, adventure_id)
        assert adventure is not None and adventure.host_id is None
    assert await node_count(db, adventure_id) == 2

    async with db.session() as session, session.begin():
        await session.execute(delete(Server).where(Server.id == 99))
    assert await _count(db, Adventure) == 0
    for model in OWNED:
        if model is not RequestRecord:
            assert await _count(db, model) == 0, model.__name__


def update_scenario_owner(adventure_id: int):
    """Hand the scenario to the server, as an import for the server would be owned."""
    from sqlalchemy import update

    return update(Scenario).where(Scenario.owner_id == 8).values(owner_id=None)


async def test_bulk_loads_of_turns_never_name_heavy_columns(db: Database):
    adventure_id = await _populate(db, server_id=None, user_id=9)
    statements: list[str] = []
    listener = lambda *args: statements.append(args[2])  # noqa: E731
    event.listen(db.engine.sync_engine, "before_cursor_execute", listener)
    async with db.session() as session:
        nodes = list(
            await session.scalars(select(StoryNode).where(StoryNode.adventure_id == adventure_id))
        )
        takes = list(await session.scalars(select(Take)))
        memories = list(await session.scalars(select(Memory)))
    event.remove(db.engine.sync_engine, "before_cursor_execute", listener)
    assert nodes and takes and memories
    named = set(re.findall(r"\b(\w+\.\w+)\b", " ".join(statements)))
    for model, columns in HEAVY.items():
        for column in columns:
            assert f"{model.__tablename__}.{column}" not in named
        # Every light column is still loaded in the one query.
        assert f"{model.__tablename__}.id" in named


HEAVY = {
    StoryNode: ("reasoning", "prompt_snapshot", "state_before", "state_report", "context_report"),
    Take: ("text", "reasoning", "state_after"),
    Memory: ("embedding",),
}


async def test_a_lock_held_past_the_wait_is_told_apart_from_other_errors(db: Database):
    """``is_busy`` on the real errors each database raises when another writer holds the lock
    past the wait: a turn that meets one fails with "busy, press Retry", not as Campfire's
    own fault with a traceback."""
    if db.is_sqlite:
        # No wait at all, so the second writer fails at once instead of after the busy timeout.
        waiting = create_async_engine(db.engine.url, connect_args={"timeout": 0})
        holding = create_async_engine(db.engine.url)
        lock, write = "BEGIN IMMEDIATE", "BEGIN IMMEDIATE"
    else:
        waiting = holding = create_async_engine(db.engine.url)
        lock = "BEGIN; LOCK TABLE users IN EXCLUSIVE MODE"
        write = "SET lock_timeout = '50ms'; LOCK TABLE users IN EXCLUSIVE MODE"
    try:
        async with holding.connect() as holder:
            for statement in lock.split("; "):
                await holder.exec_driver_sql(statement)
            async with waiting.connect() as writer:
                with pytest.raises(DBAPIError) as refused:
                    for statement in write.split("; "):
                        await writer.exec_driver_sql(statement)
                assert is_busy(refused.value)
                await writer.rollback()
                with pytest.raises(DBAPIError) as other:
                    await writer.exec_driver_sql("SELECT * FROM no_such_table")
                assert not is_busy(other.value)
            await holder.rollback()
    finally:
        await waiting.dispose()
        await holding.dispose()


async def test_the_servers_suggestions_switch_moves_onto_its_row(db: Database):
    """Migration 0024, run as start-up runs it (``Database.migrate``): a server that switched
    suggestions off keeps them off, the others on, and rebuilding the servers table on SQLite
    deletes nothing that references it (its adventures)."""
    async with db.transaction() as session:
        for server_id in (1, 2, 3):
            await touch_server(session, server_id, f"server {server_id}")
        scenario = await session.scalar(select(Scenario).limit(1))
        assert scenario is not None and scenario.id is not None
        await start_adventure(session, scenario.id, server_id=1, host_id=None)

    def downgrade(sync: Connection) -> None:
        command.downgrade(alembic_config(connection=sync), "0023")

    async with db.engine.connect() as connection:
        sqlite = connection.dialect.name == "sqlite"
        if sqlite:
            await connection.exec_driver_sql("PRAGMA foreign_keys=OFF")
            await connection.commit()
        async with connection.begin():
            await connection.run_sync(downgrade)
            await connection.execute(
                text(
                    "INSERT INTO server_play_options (server_id, suggestions) "
                    "VALUES (1, false), (2, true)"
                )
            )
        if sqlite:
            # The pool hands this connection to migrate() next: as every connection is.
            await connection.exec_driver_sql("PRAGMA foreign_keys=ON")
            await connection.commit()
    await db.migrate()
    async with db.session() as session:
        servers = (await session.scalars(select(Server).order_by(col(Server.id)))).all()
        assert [(s.id, s.suggestions) for s in servers] == [(1, False), (2, True), (3, True)]
        adventures = await session.scalar(
            select(func.count()).select_from(Adventure).where(col(Adventure.server_id) == 1)
        )
        assert adventures == 1


async def test_the_search_indexes_learn_each_rows_scope_when_migrated(db: Database):
    """Migrations 0037 and 0038, run as start-up runs them: memories and passages written
    under the old indexes (0036) are found after the upgrade, in their own scope only."""

    def downgrade(sync: Connection) -> None:
        command.downgrade(alembic_config(connection=sync), "0036")

    async with db.engine.connect() as connection:
        async with connection.begin():
            await connection.run_sync(downgrade)
    first, second = await new_adventure(db), await new_adventure(db)
    async with db.session() as session, session.begin():
        session.add(Memory(adventure_id=first, text="The ferryman took three copper coins."))
        session.add(Memory(adventure_id=second, text="A ferryman of copper and coins."))
        for library, passage in [
            (f"adventure:{first}", "The ferry crosses at dawn for three copper coins."),
            (f"adventure:{second}", "The ferry of the other story."),
        ]:
            source = KnowledgeSource(
                library=library, title="Ferries", kind="canon", content_hash="0" * 64, text=""
            )
            session.add(source)
            await session.flush()
            assert source.id is not None
            session.add(KnowledgeChunk(source_id=source.id, library=library, text=passage))
    await db.migrate()
    query = ["> You pay the ferryman copper coins at the ferry."]
    async with db.session() as session:
        found = await MemoryRetriever().retrieve(session, first, query)
        assert [m.text for m in found.chosen] == ["The ferryman took three copper coins."]
        passages = await search(
            session, KNOWLEDGE_TEXT, query, {"library": (f"adventure:{first}",)}
        )
        assert passages.bank_size == 1 and len(passages.scores) == 1
        if db.is_sqlite:
            for fts, columns in [
                ("memories_fts", ["text", "adventure_id"]),
                ("knowledge_chunks_fts", ["heading", "text", "library"]),
            ]:
                await session.execute(text(f"INSERT INTO {fts}({fts}) VALUES ('integrity-check')"))
                read = await session.execute(text(f"SELECT * FROM {fts} LIMIT 0"))
                assert list(read.keys()) == columns
