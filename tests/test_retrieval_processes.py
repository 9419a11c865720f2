"""What a turn's retrieval costs when it has nothing to find, and that what one process keeps
from turn to turn never hides what another process wrote: two ``Database`` instances on one
database stand in for two processes (each its own engine and connections), with the real
retrievers and context engine."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import numpy as np
import pytest
from sqlalchemy import delete, event, update
from sqlmodel import col

from engine.library.knowledge.classes import KnowledgeClass
from engine.library.knowledge.library import KnowledgeLibrary, Target
from engine.library.knowledge.retrieval import KnowledgeRetriever
from engine.llm.providers.embeddings import EmbeddingClient
from engine.llm.retrieval.semantic import to_bytes, vector_digest
from engine.llm.retrieval.vectors import VectorCache
from engine.people.access.rules import Actor
from engine.storage.database import Database
from engine.storage.memory_models import Memory
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


# --- memory vectors kept per process ------------------------------------------------------------

VOCABULARY = ("key", "silver", "wolves", "mill", "ferry", "coins", "storm", "bridge")


class WordEmbedder:
    """A deterministic embedding model: one dimension per word of ``VOCABULARY``."""

    model = "fake-words"

    async def embed(self, texts):
        return np.stack([words_vector(text) for text in texts])


def words_vector(text: str) -> np.ndarray:
    words = text.lower().replace(".", " ").split()
    return np.array([float(words.count(w)) for w in VOCABULARY], dtype=np.float32) + 0.01


async def remember(db: Database, adventure_id: int, *texts: str) -> list[int]:
    """Memories with their vectors, written as the memory writer writes them."""
    async with db.session() as session, session.begin():
        rows = [
            Memory(
                adventure_id=adventure_id,
                text=text,
                embedding=(data := to_bytes(words_vector(text))),
                embedding_model=WordEmbedder.model,
                embedding_dim=len(VOCABULARY),
                embedding_digest=vector_digest(data),
            )
            for text in texts
        ]
        session.add_all(rows)
        await session.flush()
        return [row.id for row in rows]


async def rewrite(db: Database, memory_id: int, text: str) -> None:
    """An edit and the new vector, as the bank and the writer store them."""
    data = to_bytes(words_vector(text))
    async with db.session() as session, session.begin():
        await session.execute(
            update(Memory)
            .where(col(Memory.id) == memory_id)
            .values(text=text, embedding=data, embedding_digest=vector_digest(data))
        )


def retriever() -> MemoryRetriever:
    return MemoryRetriever(cast("EmbeddingClient", WordEmbedder()), floor=0.9)


async def recall(db: Database, memories: MemoryRetriever, adventure_id: int, query: str):
    async with db.session() as session:
        found = await memories.retrieve(session, adventure_id, [query])
    return {m.id: m for m in found.chosen}


def vectors_read(statements: Statements) -> int:
    """How many statements read vectors (rather than ids and digests)."""
    return sum("memories.embedding," in s for s in statements.sent)


async def test_a_vector_changed_or_deleted_by_another_process_is_never_served_stale(db, other):
    adventure = await new_adventure(db)
    key, wolves, bridge = await remember(
        db, adventure, "Mira hid the silver key.", "Wolves circled the mill.", "The storm."
    )
    here = retriever()
    statements = Statements(db)
    found = await recall(db, here, adventure, "silver key")
    assert found[key].cosine == pytest.approx(1.0, abs=0.01) and vectors_read(statements) == 1
    # The next turn reads ids and digests only: every vector is current.
    statements.sent.clear()
    found = await recall(db, here, adventure, "the silver key")
    assert key in found and vectors_read(statements) == 0

    # The other process rewrites the memory (no shared word is left, so only a stale vector
    # could admit it) and deletes another; the next turn here sees both.
    await rewrite(other, key, "The ferry coins.")
    async with other.session() as session, session.begin():
        await session.execute(delete(Memory).where(col(Memory.id) == wolves))
    statements.sent.clear()
    found = await recall(db, here, adventure, "silver key")
    assert key not in found
    assert await recall(db, here, adventure, "wolves mill") == {}
    found = await recall(db, here, adventure, "ferry coins")
    assert found[key].cosine == pytest.approx(1.0, abs=0.01)
    scope = here.vectors.scope(("memories", adventure, WordEmbedder.model))
    assert set(scope.vectors) == {key, bridge}


async def test_an_id_used_again_by_another_memory_is_read_again(db, other):
    adventure = await new_adventure(db)
    _key, storm = await remember(db, adventure, "Mira hid the silver key.", "The storm.")
    here = retriever()
    await recall(db, here, adventure, "storm bridge")
    # Another process deletes the newest memory and writes one: SQLite hands out its id again.
    async with other.session() as session, session.begin():
        await session.execute(delete(Memory).where(col(Memory.id) == storm))
    (again,) = await remember(other, adventure, "Wolves at the mill.")
    assert again == storm or not db.is_sqlite
    # Only the storm's old vector could admit it for the storm.
    assert again not in await recall(db, here, adventure, "storm")
    found = await recall(db, here, adventure, "wolves mill")
    assert found[again].cosine == pytest.approx(1.0, abs=0.01)


async def test_a_forgotten_memory_or_a_cleared_vector_is_dropped_from_the_copy(db, other):
    adventure = await new_adventure(db)
    key, wolves = await remember(db, adventure, "Mira hid the silver key.", "Wolves at the mill.")
    here = retriever()
    await recall(db, here, adventure, "silver key")
    async with other.session() as session, session.begin():
        await session.execute(update(Memory).where(col(Memory.id) == key).values(forgotten=True))
        # An edit clears the vector until the writer embeds the new text.
        await session.execute(
            update(Memory)
            .where(col(Memory.id) == wolves)
            .values(text="Ferry coins.", embedding=None, embedding_digest=None)
        )
    assert await recall(db, here, adventure, "silver key") == {}
    assert await recall(db, here, adventure, "wolves mill") == {}
    assert here.vectors.scope(("memories", adventure, WordEmbedder.model)).vectors == {}


async def test_the_copies_are_bounded_least_recently_used_adventure_first(db):
    first, second = await new_adventure(db, channel_id=1), await new_adventure(db, channel_id=2)
    await remember(db, first, "Mira hid the silver key.", "Wolves at the mill.")
    await remember(db, second, "The ferry coins.", "The bridge in the storm.")
    # Room for one adventure's two vectors and their stacked matrix (32 bytes each).
    memories = MemoryRetriever(
        cast("EmbeddingClient", WordEmbedder()), floor=0.9, vectors=VectorCache(max_bytes=128)
    )
    await recall(db, memories, first, "silver key")
    assert memories.vectors.nbytes == 128
    found = await recall(db, memories, second, "ferry coins")
    assert found and memories.vectors.nbytes <= 128
    assert memories.vectors.scope(("memories", second, WordEmbedder.model)).vectors
    # The first adventure's copy went; its next turn reads its vectors again and is right.
    found = await recall(db, memories, first, "silver key")
    assert [m.cosine for m in found.values()] == [pytest.approx(1.0, abs=0.01)]
    assert memories.vectors.nbytes <= 128
