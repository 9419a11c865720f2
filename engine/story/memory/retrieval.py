"""Retrieving memories for a turn: pinned ones, then the relevant ones, at most ``top_k``.

1. Pinned memories always go in, and count toward ``top_k``.
2. Every other live memory is *admitted* or not, before any ranking: lexically (shared
   meaningful words, engine.llm.retrieval.lexical) always; semantically (cosine of the recent
   story's
   embedding, engine.llm.retrieval.semantic) when an embedding model is configured and calibrated.
   Retrieval may rightly return nothing: an unrelated bank stays out of the context.
3. The admitted are ranked by a blend of both scores and the best fill the free slots.

The database does the lexical part in one statement (engine.llm.retrieval.lexical), and with
lexical admission alone it sends back only the pinned memories and the best-scored admitted ones
that could fill the free slots; the texts are read for the chosen memories only. The chosen ids
go with the context to the turn's commit, which counts their use in the turn's own transaction
(``engine.story.memory.bank.count_use``).

What was chosen, with its scores, goes to Insights through the context report; why semantic
admission is off (no model, no calibration, the endpoint failing) goes with it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from typing import Any

import numpy as np
from sqlalchemy import Integer, Select, String, bindparam, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from engine.errors import CampfireError
from engine.llm.retrieval.lexical import LexicalScore, search
from engine.llm.retrieval.ranking import RankingRetriever, relevance
from engine.llm.retrieval.vectors import current_vectors
from engine.storage.dialect import FullTextTable
from engine.storage.memory_models import Memory

DEFAULT_TOP_K = 5
#: How many of the newest story entries (with the new action) make the query.
QUERY_ENTRIES = 4

#: The memories' text as the lexical search reads it (the structures are migration 0006's,
#: SQLite's index scoped by adventure since 0037); a search is scoped to one adventure and
#: never finds a forgotten memory.
MEMORY_TEXT = FullTextTable(
    table="memories",
    id_column="id",
    fts_table="memories_fts",
    tsvector_column="search_vector",
    hidden_when=("forgotten",),
    always_when="pinned",
    fts_scope_column="adventure_id",
)


@dataclass(frozen=True, slots=True)
class ChosenMemory:
    id: int
    text: str
    pinned: bool
    lexical: LexicalScore | None = None
    cosine: float | None = None
    semantic_admitted: bool = False

    @property
    def label(self) -> str:
        words = self.text.split()
        return f"#{self.id} " + " ".join(words[:6]) + ("…" if len(words) > 6 else "")

    @property
    def reason(self) -> str:
        """The scores as Insights shows them."""
        parts = ["pinned"] if self.pinned else []
        if self.lexical is not None:
            terms = ", ".join(self.lexical.terms[:4])
            parts.append(f"lexical {self.lexical.score:.2f} ({terms})")
        if self.cosine is not None:
            mark = " ≥ floor" if self.semantic_admitted else ""
            parts.append(f"cosine {self.cosine:.2f}{mark}")
        return " · ".join(parts) or "pinned"

    @property
    def ranking(self) -> tuple[float, int]:
        """Best first: by rank, then the newer memory."""
        return (-self.rank, -self.id)

    @property
    def rank(self) -> float:
        return relevance(self.lexical, self.cosine, self.semantic_admitted)


@dataclass(frozen=True, slots=True)
class Retrieval:
    chosen: list[ChosenMemory] = field(default_factory=list)
    #: Live memories considered (pinned included).
    considered: int = 0
    #: Why semantic admission did not take part, "" when it did.
    semantic_note: str = ""

    @property
    def summary(self) -> str:
        pinned = sum(m.pinned for m in self.chosen)
        text = f"{len(self.chosen)} of {self.considered} memories"
        if pinned:
            text += f" ({pinned} pinned)"
        if self.semantic_note:
            text += f"; {self.semantic_note}"
        return text

    @property
    def used_ids(self) -> tuple[int, ...]:
        """The chosen memories, whose use the turn's commit counts."""
        return tuple(m.id for m in self.chosen)


class MemoryRetriever(RankingRetriever):
    """The retriever of the memories section (engine.llm.retrieval.retriever's ``Retriever``)."""

    section = "memories"

    default_top_k = DEFAULT_TOP_K

    async def retrieve(
        self, session: AsyncSession, adventure_id: int, recent: Sequence[str]
    ) -> Retrieval:
        """The memories for a context; ``recent`` is the newest text first (the new action,
        then the latest entries). Reads only; the use is counted by the turn's commit."""
        note = self.semantic_off_reason()
        texts = [t for t in recent if t and t.strip()][:QUERY_ENTRIES]
        # Lexical admission alone ranks by the lexical score, so the database can leave out
        # what could not make the top; the blend with cosines needs every lexical score.
        lexical = await search(
            session,
            MEMORY_TEXT,
            texts,
            {"adventure_id": adventure_id},
            best=self.top_k if note else None,
        )
        if not lexical.bank_size:
            return Retrieval(semantic_note=note)

        cosines: dict[int, float] = {}
        if not note:
            try:
                cosines = await self._cosines(session, adventure_id, texts)
            except CampfireError as error:
                note = f"semantic admission skipped this turn: {error.message}"
            except TimeoutError:
                note = (
                    f"semantic admission skipped this turn: the embedding server did not "
                    f"answer within {self.semantic_timeout:g} s"
                )

        pinned = [
            ChosenMemory(memory_id, "", True, lexical.scores.get(memory_id))
            for memory_id in lexical.always
        ]
        candidates = []
        for memory_id in lexical.scores.keys() | cosines.keys():
            if memory_id in lexical.always:
                continue
            score = lexical.scores.get(memory_id)
            cosine = cosines.get(memory_id)
            semantic = cosine is not None and self.floor is not None and cosine >= self.floor
            if (score is not None and score.admitted) or semantic:
                candidates.append(ChosenMemory(memory_id, "", False, score, cosine, semantic))
        candidates.sort(key=lambda m: m.ranking)
        chosen = pinned + candidates[: max(0, self.top_k - len(pinned))]
        texts_of = await _texts(session, adventure_id, [m.id for m in chosen])
        return Retrieval(
            [replace(m, text=texts_of[m.id]) for m in chosen if m.id in texts_of],
            lexical.bank_size,
            note,
        )

    async def _cosines(
        self, session: AsyncSession, adventure_id: int, texts: Sequence[str]
    ) -> dict[int, float]:
        """The cosine of each live memory's vector with the query's. The vectors come from the
        process's copies, current by their digests; only new and changed ones are read
        (engine.llm.retrieval.vectors). A vector of another model is not compared (0)."""
        assert self.embedder is not None
        if not texts:
            return {}
        model = self.embedder.model
        current = await current_vectors(
            session,
            self.vectors,
            ("memories", adventure_id, model),
            _vector_listing(),
            _vector_reading,
            {"adventure_id": adventure_id, "model": model},
        )
        if not current.ids and not current.others:
            return {}
        # Only the call to the server is timed: a database read is never cut off midway.
        async with asyncio.timeout(self.semantic_timeout):
            query = (await self.embedder.embed(["\n".join(reversed(texts))]))[0]
        cosines = dict.fromkeys(current.others, 0.0)
        if current.ids:
            scores = current.scores(np.asarray(query))
            cosines.update(zip(current.ids, map(float, scores), strict=True))
        return cosines


# The statements a turn sends for the vectors, built once (each turn only binds its values).


@cache
def _vector_listing() -> Select[Any]:
    """Every live memory of the adventure with a vector: its id, digest, and whether the
    vector is of the query's model. Never the vector."""
    return select(
        col(Memory.id),
        col(Memory.embedding_digest).label("digest"),
        (col(Memory.embedding_model) == bindparam("model", type_=String)).label("same"),
    ).where(
        col(Memory.adventure_id) == bindparam("adventure_id", type_=Integer),
        col(Memory.forgotten).is_(False),
        col(Memory.embedding).is_not(None),
    )


def _vector_reading(ids: list[int]) -> Select[Any]:
    """The vectors of ``ids``, each with the digest written with it."""
    return select(
        col(Memory.id), col(Memory.embedding), col(Memory.embedding_digest).label("digest")
    ).where(
        col(Memory.id).in_(ids),
        col(Memory.adventure_id) == bindparam("adventure_id", type_=Integer),
    )


@cache
def _texts_query() -> Select[Any]:
    """``_texts``' statement, built once (building it cost ten times running it)."""
    return select(col(Memory.id), col(Memory.text)).where(
        col(Memory.id).in_(bindparam("ids", expanding=True)),
        col(Memory.adventure_id) == bindparam("adventure_id", type_=Integer),
    )


async def _texts(session: AsyncSession, adventure_id: int, ids: Sequence[int]) -> dict[int, str]:
    """The texts of the chosen memories, and of no other: only the adventure's, whatever an
    index said (a memory of another adventure is never sent, even if chosen by mistake)."""
    if not ids:
        return {}
    rows = await session.execute(_texts_query(), {"ids": list(ids), "adventure_id": adventure_id})
    return {row.id: row.text for row in rows}
