"""Which memories retrieval chooses, in which order and with which scores, on fixed banks.

The expectations were read off the retriever as it stood before retrieval moved its scoring
into the database (issue 16), and are written here as literals: any later way of computing the
same rule must choose the same memories. The banks: a young one (under 20 rows, where only a
name can be rare), the same with pinned memories, a grown one of 24 rows (where a common word
matched by one row is rare), the context benchmark's bank of 200 generated memories (many ties,
broken by the newer memory first), and one with embeddings for semantic admission.

A memory is named by its text (by its "Memory N" prefix in the benchmark's bank); a score is
the sum of its shared terms' BM25 idf, checked to six decimals.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from sqlalchemy import func, select
from sqlmodel import col

from engine.llm.providers.embeddings import EmbeddingClient
from engine.llm.retrieval.semantic import to_bytes
from engine.storage.memory_models import Memory
from engine.story.memory.retrieval import MemoryRetriever, Retrieval
from tests.benchmarks.bench_context import ACTION, narration, seed_adventure
from tests.fakes.openai_server import fake_embedding
from tests.helpers import new_adventure
from tests.test_memory_retrieval import BANK

#: The retrieval tests' own young bank (six rows: only names can be rare).
YOUNG = BANK
PINNED = ["The player is a lamplighter.", "Mira fears the ferryman."]
#: With the young bank's six, 24 rows: a term one row matches is rare (24 x 5% rounds to 1).
GROWN = YOUNG + [
    "Brindle the smith forged a new hinge for the chapel door.",
    "The chapel bell has not rung since the flood.",
    "A stranger in a grey cloak asked about the silver key.",
    "The mill wheel turns again after Brindle repaired it.",
    "Tamsin's lantern oil smells of pine resin.",
    "The river rose at night and flooded the lower market.",
    "Wolves were seen near the crossing at dawn.",
    "The ferryman keeps a ledger of every crossing.",
    "Mira's brother drowned in the river years ago.",
    "The old bridge toll was three copper coins.",
    "Night watchmen carry lanterns along the river road.",
    "The market sells salt, dried fish and rope.",
    "A storm is coming from the north, the fishermen say.",
    "The altar stone is older than the chapel itself.",
    "Brindle owes the ferryman a debt.",
    "The crossroads inn serves cider and barley soup.",
    "Children dare each other to touch the mill wheel.",
    "The abandoned mill was once owned by Tamsin's family.",
]
SEMANTIC = [*YOUNG, "Over there, by it.", "Under it all."]


def name(text: str) -> str:
    return text.split(":", 1)[0] if text.startswith("Memory ") else text


def picked(found: Retrieval) -> list[tuple]:
    """Each chosen memory: its text, pinned, and its lexical admission, score and terms (None
    when it shares no term) or its cosine and semantic admission."""
    rows = []
    for memory in found.chosen:
        lexical = memory.lexical
        row: tuple = (name(memory.text), memory.pinned)
        if lexical is not None:
            row += (lexical.admitted, pytest.approx(lexical.score, abs=5e-7), lexical.terms)
        else:
            row += (None,)
        if memory.cosine is not None:
            row += (pytest.approx(memory.cosine, abs=5e-6), memory.semantic_admitted)
        rows.append(row)
    return rows


async def add(db, adventure_id: int, texts, **fields) -> None:
    async with db.session() as session, session.begin():
        session.add_all(Memory(adventure_id=adventure_id, text=t, **fields) for t in texts)


async def retrieve(db, retriever: MemoryRetriever, adventure_id: int, *recent: str):
    async with db.session() as session:
        return await retriever.retrieve(session, adventure_id, list(recent))


async def add_embedded(db, adventure_id: int) -> None:
    """The semantic bank with the fake model's vectors (as the memory writer stores them), and
    a pinned memory without one."""
    async with db.session() as session, session.begin():
        session.add_all(
            Memory(
                adventure_id=adventure_id,
                text=t,
                embedding=to_bytes(np.array(fake_embedding(t, 8))),
                embedding_model="fake-embed",
                embedding_dim=8,
            )
            for t in SEMANTIC
        )
        lamplighter = "The lamplighter owes Mira a favour."
        session.add(Memory(adventure_id=adventure_id, text=lamplighter, pinned=True))


NO_MODEL = "semantic admission off: no embedding model configured (lexical only)"
FERRY = "The ferryman demanded three copper coins for the crossing."


async def test_a_young_bank_admits_two_shared_terms_or_a_rare_name(db):
    adventure = await new_adventure(db)
    await add(db, adventure, YOUNG)
    retriever = MemoryRetriever()
    expected = {
        ("> You pay the ferryman his copper coins.",): [
            (FERRY, False, True, 4.110509, ("copper", "coins", "ferryman")),
        ],
        ("> You ask Mira about the key.",): [
            (YOUNG[0], False, True, 2.570064, ("key", "mira")),
        ],
        # Names mid-sentence ("Old", "Tamsin") matched by one row are rare even here.
        ("> You greet Old Tamsin at the market.",): [
            (YOUNG[3], False, True, 4.621335, ("old", "tamsin", "market")),
        ],
        # One shared common word admits nothing in a bank under 20 rows.
        ("> You cross the bridge.",): [],
        ("> You kneel at the altar.",): [],
        ("> You sing a song about the weather.",): [],
        (
            "> You look around.",
            "Mira waits by the chapel, silver key in hand.",
            "The ferryman counts his coins.",
        ): [
            (YOUNG[0], False, True, 5.650955, ("chapel", "silver", "key", "mira")),
            (FERRY, False, True, 2.570064, ("coins", "ferryman")),
            (YOUNG[5], False, True, 2.059239, ("mira", "ferryman")),
        ],
    }
    for recent, chosen in expected.items():
        found = await retrieve(db, retriever, adventure, *recent)
        assert picked(found) == chosen, recent
        assert found.summary == f"{len(chosen)} of 6 memories; {NO_MODEL}"
    found = await retrieve(db, retriever, adventure, "> You pay the ferryman his copper coins.")
    assert [m.reason for m in found.chosen] == ["lexical 4.11 (copper, coins, ferryman)"]


async def test_pinned_memories_come_first_and_fill_top_k(db):
    adventure = await new_adventure(db)
    await add(db, adventure, YOUNG)
    await add(db, adventure, PINNED, pinned=True)
    query = "> You pay the ferryman copper coins, Mira."
    pinned = [
        ("The player is a lamplighter.", True, None),
        ("Mira fears the ferryman.", True, True, 1.888923, ("ferryman", "mira")),
    ]
    ferry = (FERRY, False, True, 4.527981, ("copper", "coins", "ferryman"))
    promise = (YOUNG[5], False, True, 1.888923, ("ferryman", "mira"))
    for top_k, chosen in {1: pinned, 3: [*pinned, ferry], 5: [*pinned, ferry, promise]}.items():
        found = await retrieve(db, MemoryRetriever(top_k=top_k), adventure, query)
        assert picked(found) == chosen, top_k
        assert found.summary == f"{len(chosen)} of 8 memories (2 pinned); {NO_MODEL}"
    assert [m.reason for m in found.chosen] == [
        "pinned",
        "pinned · lexical 1.89 (ferryman, mira)",
        "lexical 4.53 (copper, coins, ferryman)",
        "lexical 1.89 (ferryman, mira)",
    ]


async def test_a_grown_bank_admits_a_common_word_one_row_matches(db):
    adventure = await new_adventure(db)
    await add(db, adventure, GROWN)
    retriever = MemoryRetriever()
    stranger = (GROWN[8], False, True, 2.813411, ("ask",))
    expected = {
        # Two rows mention the altar: not rare, one term, nothing.
        ("> You kneel at the altar.",): [],
        # "ask" finds "asked" through the stemmer: one row, rare in 24.
        ("> You ask about the hinge.",): [
            stranger,
            (GROWN[6], False, True, 2.813411, ("hinge",)),
        ],
        ("> You ask Brindle about the mill wheel.",): [
            (GROWN[9], False, True, 5.983496, ("wheel", "brindle", "mill")),
            (GROWN[22], False, True, 4.017384, ("wheel", "mill")),
            stranger,
        ],
        ("> You buy cider at the inn.",): [
            (GROWN[21], False, True, 5.626821, ("cider", "inn")),
        ],
        ("> You cross the bridge.",): [],
        (
            "> You wait for the ferryman.",
            "The river runs high tonight; wolves howl near the mill.",
            "Tamsin trims her lantern at the market.",
        ): [
            (YOUNG[3], False, True, 5.898339, ("tamsin", "lantern", "market")),
            (YOUNG[2], False, True, 4.017384, ("wolves", "mill")),
            # Equal scores: the newer memory first.
            (GROWN[16], False, True, 3.932226, ("river", "lantern")),
            (GROWN[11], False, True, 3.932226, ("river", "market")),
            (GROWN[10], False, True, 3.932226, ("tamsin", "lantern")),
        ],
    }
    for recent, chosen in expected.items():
        found = await retrieve(db, retriever, adventure, *recent)
        assert picked(found) == chosen, recent
        assert found.summary == f"{len(chosen)} of 24 memories; {NO_MODEL}"
    query = "> You ask the ferryman about the river crossing and the mill."
    crossing = [
        (GROWN[13], False, True, 3.680911, ("crossing", "ferryman")),
        (FERRY, False, True, 3.680911, ("crossing", "ferryman")),
        stranger,
    ]
    for top_k in (3, 8):
        found = await retrieve(db, MemoryRetriever(top_k=top_k), adventure, query)
        assert picked(found) == crossing, top_k


async def test_the_context_benchmarks_bank_of_two_hundred(db):
    adventure = await seed_adventure(db, 3, channel_id=4, heavy=False, seed=0)
    async with db.session() as session:
        live = await session.scalar(
            select(func.count()).where(col(Memory.adventure_id) == adventure)
        )
    assert live == 200
    retriever = MemoryRetriever()
    rng = random.Random(7)
    story = [narration(rng) for _ in range(3)]
    found = await retrieve(db, retriever, adventure, ACTION, *story)
    assert picked(found) == [
        (
            "Memory 174",
            False,
            True,
            13.229603,
            ("carries", "opens", "lean", "narrow", "tune", "lantern", "wet", "cold", "smoke")
            + ("somewhere", "stone", "stop", "across", "door", "hear", "air", "voice"),
        ),
        (
            "Memory 101",
            False,
            True,
            12.686539,
            ("carries", "opens", "gutters", "mutters", "narrow", "footsteps", "shadows", "tune")
            + ("lantern", "cold", "stone", "across", "hear", "know", "river", "salt"),
        ),
        (
            "Memory 59",
            False,
            True,
            12.497765,
            ("carries", "opens", "hums", "mutters", "footsteps", "shadows", "tune", "lantern")
            + ("cold", "smoke", "somewhere", "know", "river", "salt", "air", "voice"),
        ),
        (
            "Memory 127",
            False,
            True,
            12.424106,
            ("carries", "opens", "mutters", "lean", "shadows", "lantern", "wet", "cold", "hall")
            + ("stone", "across", "hear", "know", "river", "salt", "voice"),
        ),
        (
            "Memory 13",
            False,
            True,
            12.362727,
            ("gutters", "hums", "mutters", "narrow", "footsteps", "shadows", "lantern", "cold")
            + ("smoke", "somewhere", "stone", "stop", "across", "river", "salt", "air"),
        ),
    ]
    assert found.summary == f"5 of 200 memories; {NO_MODEL}"
    assert found.chosen[0].reason == "lexical 13.23 (carries, opens, lean, narrow)"

    # Many memories tie on two common words: the newest win.
    smoke = ("smoke", "river")
    found = await retrieve(db, retriever, adventure, "> You follow the smoke toward the river.")
    assert picked(found) == [
        (f"Memory {n}", False, True, 1.480113, smoke) for n in (199, 196, 185, 183, 180)
    ]
    wider = MemoryRetriever(top_k=12)
    found = await retrieve(db, wider, adventure, "> You follow the smoke toward the river.")
    assert picked(found) == [
        (f"Memory {n}", False, True, 1.480113, smoke)
        for n in (199, 196, 185, 183, 180, 171, 164, 163, 161, 155, 150, 149)
    ]
    found = await retrieve(db, retriever, adventure, "> The smoke hums.")
    assert picked(found) == [
        (f"Memory {n}", False, True, 1.641754, ("hums", "smoke")) for n in (199, 198, 197, 188, 185)
    ]
    found = await retrieve(db, retriever, adventure, "> You ask Mira about the lantern.")
    assert found.chosen == [] and found.considered == 200


async def test_semantic_admission_blends_with_lexical(db, fake_model):
    adventure = await new_adventure(db)
    await add_embedded(db, adventure)
    embedder = EmbeddingClient(fake_model.base_url, fake_model.embedding_model)
    pinned = ("The lamplighter owes Mira a favour.", True, None)
    pinned_mira = ("The lamplighter owes Mira a favour.", True, False, 1.049822, ("mira",))
    ferry = (FERRY, False, True, 5.180534, ("copper", "coins", "ferryman"), -0.14843, False)
    expected = {
        0.3: {
            "> You pay the ferryman his copper coins.": [
                pinned,
                ferry,
                (YOUNG[3], False, None, 0.63744, True),
            ],
            "Over there, by it.": [
                pinned,
                ("Over there, by it.", False, None, 1.0, True),
                (YOUNG[5], False, None, 0.6825, True),
                (FERRY, False, None, 0.40929, True),
                ("Under it all.", False, None, 0.35827, True),
            ],
            "> Mira waits at the mill.": [
                pinned_mira,
                ("Under it all.", False, None, 0.6013, True),
                (YOUNG[2], False, False, 1.89712, ("mill",), 0.43189, True),
                ("Over there, by it.", False, None, 0.40969, True),
                (YOUNG[5], False, False, 1.049822, ("mira",), 0.37338, True),
            ],
        },
        0.9: {
            "> You pay the ferryman his copper coins.": [pinned, ferry],
            "Over there, by it.": [pinned, ("Over there, by it.", False, None, 1.0, True)],
            "> Mira waits at the mill.": [pinned_mira],
        },
    }
    try:
        for floor, queries in expected.items():
            retriever = MemoryRetriever(embedder, floor=floor)
            for query, chosen in queries.items():
                found = await retrieve(db, retriever, adventure, query)
                assert picked(found) == chosen, (floor, query)
                assert found.summary == f"{len(chosen)} of 9 memories (1 pinned)"
        retriever = MemoryRetriever(embedder, floor=0.3)
        found = await retrieve(db, retriever, adventure, "> Mira waits at the mill.")
        assert [m.reason for m in found.chosen] == [
            "pinned · lexical 1.05 (mira)",
            "cosine 0.60 ≥ floor",
            "lexical 1.90 (mill) · cosine 0.43 ≥ floor",
            "cosine 0.41 ≥ floor",
            "lexical 1.05 (mira) · cosine 0.37 ≥ floor",
        ]
    finally:
        await embedder.aclose()
