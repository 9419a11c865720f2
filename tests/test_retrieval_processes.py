"""What a turn's retrieval costs when it has nothing to find, and that what one process keeps
from turn to turn never hides what another process wrote: two ``Database`` instances on one
database stand in for two processes (each its own engine and connections), with the real
retrievers and context engine."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import event

from engine.library.knowledge.classes import KnowledgeClass
from engine.library.knowledge.library import KnowledgeLibrary, Target
from engine.library.knowledge.retrieval import KnowledgeRetriever
from engine.people.access.rules import Actor
from engine.storage.database import Database
from engine.storage.models import Adventure
from engine.story.memory.retrieval import MemoryRetriever
from engine.turns.context import ContextEngine
from tests.helpers import new_adventure

SETTING = (Path(__file__).parent / "data" / "brindlemoor.md").read_bytes()
PLAYER = Actor(user_id=7, user_name="ada")
CHANNEL = 1
ACTION = "> You ask about Brindlemoor's harbourmaster and the fen."


class Statements:
    """The statements an engine sends, as text."""

    def __init__(self, db: Database) -> None:
        self.sent: list[str] = []
        event.listen(db.engine.sync_engine, "before_cursor_execute", self._before)

    def _before(self, _conn, _cursor, statement, *_args) -> None:
        self.sent.append(statement)


async def gather(db: Database, engine: ContextEngine, adventure_id: int):
    """A turn's reads, as a turn does them: a new session, the adventure loaded, gather."""
    async with db.session() as session:
        adventure = await session.get(Adventure, adventure_id)
        assert adventure is not None
        return await engine.gather(session, adventure, ACTION)


@pytest.fixture
async def other(database_url: str):
    """A second process on the same database."""
    database = Database(database_url)
    try:
        yield database
    finally:
        await database.dispose()


async def test_an_empty_knowledge_library_costs_no_statement_and_an_import_elsewhere_is_seen(
    db, other
):
    adventure = await new_adventure(db, channel_id=CHANNEL)
    engine = ContextEngine(retrievers=[MemoryRetriever(), KnowledgeRetriever()])
    statements = Statements(db)
    inputs = await gather(db, engine, adventure)
    assert inputs.knowledge == () and inputs.knowledge_note == ""
    # Only the adventure's own load touches the knowledge tables (its knowledge_present).
    touching = [s for s in statements.sent if "knowledge_chunks" in s]
    assert len(touching) == 1 and touching[0].lstrip().upper().startswith("SELECT ADVENTURES.")

    # Another process imports a setting into the adventure's library: the next turn here
    # searches it and finds the passage.
    library = KnowledgeLibrary(other, max_bytes=2 * 1024 * 1024)
    draft = await library.preview(
        PLAYER, CHANNEL, SETTING, "brindlemoor.md", KnowledgeClass.CANON, target=Target.ADVENTURE
    )
    await library.save(PLAYER, draft)
    inputs = await gather(db, engine, adventure)
    assert inputs.knowledge and "passages" in inputs.knowledge_note


async def test_without_the_adventure_loaded_the_retriever_reads_its_place_once(db):
    adventure = await new_adventure(db, channel_id=CHANNEL)
    statements = Statements(db)
    async with db.session() as session:
        found = await KnowledgeRetriever().retrieve(session, adventure, [ACTION])
    assert found.chosen == [] and found.summary == ""
    assert len(statements.sent) == 1  # the place and whether there is anything: no search
