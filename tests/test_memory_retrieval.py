"""Retrieval: lexical admission through the database's full-text search, semantic admission
with a calibrated floor, pinned memories, and what Insights is told."""

from __future__ import annotations

import numpy as np
import pytest
from sqlalchemy import select, text, update
from sqlmodel import col

from engine.llm.providers.embeddings import EmbeddingClient
from engine.llm.providers.resolver import OperatorDefault
from engine.llm.retrieval.lexical import query_terms
from engine.llm.retrieval.semantic import CALIBRATION, SemanticIndex, calibrated_floor
from engine.storage.memory_models import Memory
from engine.storage.models import ActionType, Adventure
from engine.story.memory.retrieval import MemoryRetriever
from engine.story.memory.writer import MemoryWriter
from engine.turns.context import ContextEngine
from engine.turns.engine import TurnEngine
from engine.turns.events import TurnFailed
from engine.turns.insights import Insights
from tests.fakes.openai_server import Reply
from tests.helpers import new_adventure, play

BANK = [
    "Mira hid the silver key beneath the chapel altar.",
    "The ferryman demanded three copper coins for the crossing.",
    "Wolves circled the abandoned mill at night.",
    "Old Tamsin sold lantern oil at the crossroads market.",
    "The bridge collapsed during the storm.",
    "Mira promised the ferryman she would return.",
]


async def add_bank(db, adventure_id: int, texts=BANK, **fields) -> list[int]:
    async with db.session() as session, session.begin():
        rows = [Memory(adventure_id=adventure_id, text=t, **fields) for t in texts]
        session.add_all(rows)
        await session.flush()
        return [row.id for row in rows]


async def retrieve(db, retriever: MemoryRetriever, adventure_id: int, *recent: str):
    async with db.session() as session:
        return await retriever.retrieve(session, adventure_id, list(recent))


def test_query_terms_skip_function_words_and_merge_inflections():
    assert query_terms(["> You ask the ferrymen about the ferryman's coins and a coin."]) == [
        "ask",
        "ferrymen",
        "ferryman",
        "coins",
    ]
    assert query_terms(["It was what it was, and so it is."]) == []


async def test_lexical_admission_needs_two_terms_or_a_rare_one(db):
    adventure = await new_adventure(db)
    ids = await add_bank(db, adventure)
    retriever = MemoryRetriever()
    found = await retrieve(db, retriever, adventure, "> You pay the ferryman his copper coins.")
    texts = [m.text for m in found.chosen]
    # Two shared terms (ferryman, copper/coins) first; "Mira promised the ferryman" shares one
    # term, "ferryman", which two memories of six have: not rare, so not admitted.
    assert texts == [BANK[1]]
    assert found.chosen[0].lexical.terms[:3] == ("copper", "coins", "ferryman") or set(
        found.chosen[0].lexical.terms
    ) == {"ferryman", "copper", "coins"}
    assert "lexical" in found.chosen[0].reason and "ferryman" in found.chosen[0].reason
    assert ids[5] not in [m.id for m in found.chosen]


async def test_porter_stemming_matches_other_forms_of_a_word(db):
    adventure = await new_adventure(db)
    await add_bank(db, adventure)
    found = await retrieve(db, MemoryRetriever(), adventure, "> You watch wolves circling.")
    # "circling" matches "circled" through the stemmer: with "wolves", two terms.
    assert [m.text for m in found.chosen] == [BANK[2]]
    assert set(found.chosen[0].lexical.terms) == {"wolves", "circling"}


async def test_retrieval_may_rightly_return_nothing(db):
    adventure = await new_adventure(db)
    await add_bank(db, adventure)
    retriever = MemoryRetriever()
    assert (
        await retrieve(db, retriever, adventure, "> You sing a song about the weather.")
    ).chosen == []
    assert (await retrieve(db, retriever, adventure, "It was what it was.")).chosen == []


async def test_pinned_memories_always_come_and_count_toward_top_k(db):
    adventure = await new_adventure(db)
    await add_bank(db, adventure)
    pinned = await add_bank(db, adventure, ["The player is a lamplighter."], pinned=True)
    retriever = MemoryRetriever(top_k=1)
    found = await retrieve(db, retriever, adventure, "> You pay the ferryman copper coins.")
    assert [m.id for m in found.chosen] == pinned
    assert found.chosen[0].reason.startswith("pinned")
    wider = await retrieve(db, MemoryRetriever(top_k=2), adventure, "> copper ferryman coins")
    assert [m.text for m in wider.chosen] == ["The player is a lamplighter.", BANK[1]]


async def test_forgotten_memories_are_never_retrieved_and_a_stored_turn_counts_the_use(
    db, provider, fake_model
):
    adventure = await new_adventure(db)
    ids = await add_bank(db, adventure)
    retriever = MemoryRetriever()
    found = await retrieve(db, retriever, adventure, "> You pay the ferryman copper coins.")
    # Retrieval only reads: the chosen ids go with the context to the turn's commit.
    assert found.used_ids == (ids[1],)
    engine = TurnEngine(
        db, OperatorDefault(provider), context=ContextEngine(retrievers=[retriever])
    )
    fake_model.queue(Reply(fault="401"))
    events = await play(engine, adventure, ActionType.DO, "pay the ferryman copper coins")
    assert isinstance(events[-1], TurnFailed)
    async with db.session() as session:
        assert (await session.get(Memory, ids[1])).use_count == 0  # a turn not stored used none
    fake_model.queue("The ferryman bites a coin and nods.")
    await play(engine, adventure, ActionType.DO, "pay the ferryman copper coins")
    async with db.session() as session, session.begin():
        rows = await session.execute(select(col(Memory.id), col(Memory.use_count)))
        counts = dict(rows.tuples().all())
        # Each memory the stored turn's prompt held counts one use (the opening's words
        # bring in another besides the ferryman's), the others none.
        prompt = fake_model.requests[-1]["messages"][-1]["content"]
        assert counts == {i: int(text in prompt) for i, text in zip(ids, BANK, strict=True)}
        assert counts[ids[1]] == 1
        used = await session.get(Memory, ids[1])
        assert used.last_used_at is not None
        used.forgotten = True
    found = await retrieve(db, retriever, adventure, "> You pay the ferryman copper coins.")
    assert found.chosen == []


async def test_an_edited_memory_is_found_by_its_new_words(db):
    adventure = await new_adventure(db)
    ids = await add_bank(db, adventure)
    async with db.session() as session, session.begin():
        await session.execute(
            update(Memory).where(Memory.id == ids[4]).values(text="The granary burned to ashes.")
        )
    retriever = MemoryRetriever()
    burned = await retrieve(db, retriever, adventure, "> You search the burned granary.")
    assert [m.id for m in burned.chosen] == [ids[4]]
    bridge = await retrieve(db, retriever, adventure, "> You cross the collapsed bridge storm.")
    assert ids[4] not in [m.id for m in bridge.chosen]


async def test_a_search_finds_its_own_adventures_memories_as_the_index_keeps_them(db):
    """The full-text index knows each memory's adventure (on SQLite since migration 0037): a
    search reads only its adventure's, and the index follows a memory moved or deleted."""
    first, second = await new_adventure(db), await new_adventure(db)
    ids = await add_bank(db, first)
    await add_bank(db, second, ["The ferryman of the north took silver, not copper coins."])
    retriever = MemoryRetriever()
    query = "> You pay the ferryman his copper coins."
    assert [m.id for m in (await retrieve(db, retriever, first, query)).chosen] == [ids[1]]
    async with db.session() as session, session.begin():
        await session.execute(
            update(Memory).where(col(Memory.id) == ids[1]).values(adventure_id=second)
        )
    assert (await retrieve(db, retriever, first, query)).chosen == []
    moved = await retrieve(db, retriever, second, query)
    assert ids[1] in [m.id for m in moved.chosen]
    async with db.session() as session, session.begin():
        await session.delete(await session.get(Memory, ids[1]))
    after = await retrieve(db, retriever, second, query)
    assert ids[1] not in [m.id for m in after.chosen] and after.chosen
    if db.is_sqlite:
        async with db.session() as session:
            # FTS5's own check that the index holds exactly what the table does.
            await session.execute(
                text("INSERT INTO memories_fts(memories_fts) VALUES ('integrity-check')")
            )


# --- semantic ------------------------------------------------------------------------------------


def test_vectors_of_another_dimension_score_zero():
    vectors = [np.array([1.0, 0.0, 0.0]), np.array([1.0, 0.0]), None, np.array([0.0, 2.0, 0.0])]
    scores = SemanticIndex(vectors).scores(np.array([3.0, 0.0, 0.0]))
    assert scores.tolist() == pytest.approx([1.0, 0.0, 0.0, 0.0])
    assert SemanticIndex(vectors).top(np.array([0.0, 1.0, 0.0]), 2)[0] == (3, pytest.approx(1.0))


def test_floors_are_per_model_and_unknown_models_are_uncalibrated():
    assert calibrated_floor("nomic-embed-text:latest") == CALIBRATION["nomic-embed-text"]
    assert (
        calibrated_floor("openai/text-embedding-3-small") == CALIBRATION["text-embedding-3-small"]
    )
    assert calibrated_floor("fake-embed") is None
    assert calibrated_floor("fake-embed", 0.3) == 0.3


@pytest.fixture
async def embedder(fake_model):
    client = EmbeddingClient(fake_model.base_url, fake_model.embedding_model)
    try:
        yield client
    finally:
        await client.aclose()


async def test_a_calibrated_model_admits_by_cosine_what_shares_no_word(
    db, provider, embedder, fake_model
):
    adventure = await new_adventure(db)
    # Function words only: no lexical term at all. The fake embeds equal texts equally.
    ids = await add_bank(db, adventure, ["Over there, by it.", "Under it all."])
    assert (
        await MemoryWriter(db, OperatorDefault(provider, background=False), embedder).catch_up(
            adventure
        )
    ).embedded == 2
    retriever = MemoryRetriever(embedder, floor=0.9)
    found = await retrieve(db, retriever, adventure, "Over there, by it.")
    assert [m.id for m in found.chosen] == [ids[0]]
    assert found.chosen[0].cosine == pytest.approx(1.0, abs=1e-5)
    assert "cosine 1.00 ≥ floor" in found.chosen[0].reason
    assert found.semantic_note == ""


async def test_a_vector_from_another_model_or_size_scores_zero(db, provider, embedder, fake_model):
    adventure = await new_adventure(db)
    ids = await add_bank(db, adventure, ["Over there, by it.", "Over there, by it!"])
    await MemoryWriter(db, OperatorDefault(provider, background=False), embedder).catch_up(
        adventure
    )
    async with db.session() as session, session.begin():
        await session.execute(
            update(Memory)
            .where(Memory.id == ids[1])
            .values(embedding=np.ones(3, dtype="<f4").tobytes(), embedding_dim=3)
        )
    found = await retrieve(
        db, MemoryRetriever(embedder, floor=0.9), adventure, "Over there, by it!"
    )
    assert [m.id for m in found.chosen] == []  # the matching text's vector is the wrong size
    found = await retrieve(
        db, MemoryRetriever(embedder, floor=0.9), adventure, "Over there, by it."
    )
    assert [m.id for m in found.chosen] == [ids[0]]


async def test_an_uncalibrated_embedding_model_falls_back_to_lexical_and_insights_says_so(
    db, provider, embedder, fake_model
):
    adventure = await new_adventure(db)
    await add_bank(db, adventure)
    retriever = MemoryRetriever(embedder)  # "fake-embed" has no calibration
    engine = TurnEngine(
        db, OperatorDefault(provider), context=ContextEngine(retrievers=[retriever])
    )
    fake_model.queue("The ferryman bites a coin and nods.")
    await play(engine, adventure, ActionType.DO, "pay the ferryman three copper coins")
    prompt = fake_model.requests[-1]["messages"][-1]["content"]
    assert f"Memories:\n{BANK[1]}" in prompt
    assert not any(r.get("path", "").endswith("/embeddings") for r in fake_model.requests)
    assert all("input" not in r for r in fake_model.requests)  # no embedding was asked for

    async with db.session() as session:
        channel = (await session.get(Adventure, adventure)).channel_id
    insights = await Insights(db).for_turn(channel)
    [section] = [s for s in insights.report.sections if s.key == "memories"]
    assert "no calibration for embedding model fake-embed" in section.reason
    assert "lexical only" in section.reason
    [item] = [i for i in section.items if BANK[1].startswith(i.label.split(" ", 1)[1][:-1])]
    assert item.label.startswith("#") and "lexical" in item.reason and "ferryman" in item.reason
    assert item.included


async def test_insights_says_why_no_memory_came_in(db, provider, fake_model):
    adventure = await new_adventure(db)
    # Nothing here shares two words, or a name, with the opening or the new action.
    await add_bank(db, adventure, [BANK[0], BANK[1], BANK[4]])
    engine = TurnEngine(
        db, OperatorDefault(provider), context=ContextEngine(retrievers=[MemoryRetriever()])
    )
    fake_model.queue("Rain falls.")
    await play(engine, adventure, ActionType.DO, "sing about the weather")
    assert "Memories:" not in fake_model.requests[-1]["messages"][-1]["content"]
    async with db.session() as session:
        channel = (await session.get(Adventure, adventure)).channel_id
        assert (await session.scalar(select(Memory.use_count).limit(1))) == 0
    insights = await Insights(db).for_turn(channel)
    [section] = [s for s in insights.report.sections if s.key == "memories"]
    assert section.tokens == 0 and section.items == []
    assert section.reason.startswith("0 of 3 memories")
    assert "no embedding model configured" in section.reason


async def test_a_failing_or_slow_embedding_server_leaves_lexical_retrieval_working(
    db, provider, embedder, fake_model
):
    adventure = await new_adventure(db)
    await add_bank(db, adventure)
    await MemoryWriter(db, OperatorDefault(provider, background=False), embedder).catch_up(
        adventure
    )
    retriever = MemoryRetriever(embedder, floor=0.5, semantic_timeout=0.3)
    fake_model.queue_embedding_fault("500")
    found = await retrieve(db, retriever, adventure, "> You pay the ferryman copper coins.")
    assert [m.text for m in found.chosen] == [BANK[1]]
    assert found.semantic_note.startswith("semantic admission skipped this turn:")
    fake_model.queue_embedding_fault("timeout")
    found = await retrieve(db, retriever, adventure, "> You pay the ferryman copper coins.")
    assert [m.text for m in found.chosen] == [BANK[1]]
    assert "did not answer within 0.3 s" in found.semantic_note
