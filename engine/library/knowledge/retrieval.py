"""Retrieving knowledge for a turn: the knowledge section's retriever (engine.llm.retrieval's seam).

The memory bank's retrieval is the base, reused, not copied: the same lexical search
(engine.llm.retrieval.lexical, one statement), the same semantic admission against the embedding
model's calibrated floor, the same relevance (engine.llm.retrieval.ranking). In order:

1. Candidates: the passages of the adventure's libraries (its server's or its host's own, and
   its own) that share a meaningful term with the recent story; with a calibrated embedding
   model, every passage with a vector too.
2. Admission on the raw signals, each against an absolute rule (two shared terms or one rare
   one; a cosine at or above the floor), never against the best candidate: a scene unrelated
   to the library admits nothing.
3. Ranking of the admitted on their relevance (both signals squashed to 0..1), multiplied by
   their class's weight: Canon outranks Reference only among admitted passages.
4. Canon marked "always include" goes first, every turn, whether it matched or not; then the
   ranked ones, at most ``top_k``. The budget is the section's (engine.library.knowledge.prompt).

Reads only. What was chosen, from which source and heading, with its scores and why, goes to
Insights through the context report; the labels and the prompt kept with the turn carry the
text, so a source deleted later leaves nothing dangling.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from typing import Any

from sqlalchemy import Integer, Select, bindparam, inspect, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm.attributes import instance_dict
from sqlalchemy.orm.util import identity_key
from sqlmodel import col

from engine.errors import CampfireError
from engine.library.knowledge.classes import RULES, KnowledgeClass
from engine.library.knowledge.prompt import framed_passage, passage_label
from engine.llm.retrieval.lexical import LexicalScore, search
from engine.llm.retrieval.ranking import RankingRetriever, cosines_of, relevance
from engine.storage.dialect import FullTextTable
from engine.storage.knowledge_models import KnowledgeChunk, KnowledgeSource
from engine.storage.models import Adventure

DEFAULT_TOP_K = 6
#: How many of the newest story entries (with the new action) make the query.
QUERY_ENTRIES = 4
#: The most query terms looked up, the newest text's first (the action, then the newest
#: narration): knowledge is about the scene at hand, and each term is a lookup over the whole
#: library (the memory bank, recalling a longer past, takes 32). Measured over 2,000 passages
#: (tests/benchmarks/bench_knowledge.py), 12 terms take about 8 ms a turn where 16 take 10.
QUERY_TERMS = 12

#: The passages' text as the lexical search reads it (the structures are migration 0020's,
#: SQLite's index scoped by library since 0038).
KNOWLEDGE_TEXT = FullTextTable(
    table="knowledge_chunks",
    id_column="id",
    fts_table="knowledge_chunks_fts",
    tsvector_column="search_vector",
    # Always-included passages are read with the chosen ones (``_passages``), not through the
    # search: there they would take places from the best.
    weight_column="weight",
    fts_scope_column="library",
    fts_text_columns=("heading", "text"),
)


def server_library(server_id: int) -> str:
    return f"server:{server_id}"


def own_library(user_id: int) -> str:
    return f"user:{user_id}"


def adventure_library(adventure_id: int) -> str:
    return f"adventure:{adventure_id}"


def libraries_of(adventure_id: int, server_id: int | None, owner_id: int | None) -> tuple[str, ...]:
    """The libraries an adventure reads: its own, and its server's (or, in DMs, its player's)."""
    shared = (
        server_library(server_id)
        if server_id is not None
        else own_library(owner_id)
        if owner_id is not None
        else None
    )
    return (adventure_library(adventure_id),) + ((shared,) if shared else ())


@dataclass(frozen=True, slots=True)
class ChosenPassage:
    id: int
    kind: KnowledgeClass
    title: str
    heading: str
    narrator_only: bool
    always: bool
    lexical: LexicalScore | None = None
    cosine: float | None = None
    semantic_admitted: bool = False
    passage: str = ""

    @property
    def rank(self) -> float:
        """Relevance times the class's weight: a multiplier, so what was not admitted (and
        so never ranked) gains nothing from its class."""
        return relevance(self.lexical, self.cosine, self.semantic_admitted) * (
            RULES[self.kind].weight
        )

    @property
    def label(self) -> str:
        # Insights shows players the label: a narrator-only passage's headings stay out.
        if self.narrator_only:
            return passage_label(self.kind, f"{self.title} (narrator only)", "")
        return passage_label(self.kind, self.title, self.heading)

    @property
    def text(self) -> str:
        return framed_passage(
            self.kind, self.title, self.heading, self.passage, narrator_only=self.narrator_only
        )

    @property
    def reason(self) -> str:
        parts = [f"always include ({RULES[self.kind].name})"] if self.always else []
        if self.lexical is not None:
            terms = ", ".join(self.lexical.terms[:4])
            parts.append(f"lexical {self.lexical.score:.2f} ({terms})")
            if not self.always and self.lexical.admitted:
                parts.append(
                    f"rare term {self.lexical.rare[0]}"
                    if self.lexical.rare
                    else f"{len(self.lexical.terms)} shared terms"
                )
        if self.cosine is not None:
            parts.append(
                f"cosine {self.cosine:.2f}" + (" ≥ floor" if self.semantic_admitted else "")
            )
        if not self.always:
            parts.append(f"×{RULES[self.kind].weight:g} {RULES[self.kind].name} = {self.rank:.2f}")
        return " · ".join(parts)


@dataclass(frozen=True, slots=True)
class KnowledgeFound:
    chosen: list[ChosenPassage] = field(default_factory=list)
    #: Passages in the adventure's libraries.
    considered: int = 0
    #: Admitted passages past ``top_k``, left out before the budget.
    past_top: int = 0
    semantic_note: str = ""

    @property
    def summary(self) -> str:
        """What Insights says of the section; "" when the adventure has no library at all,
        so that the section does not appear."""
        if not self.considered:
            return ""
        text = f"{len(self.chosen)} of {self.considered} passages"
        always = sum(p.always for p in self.chosen)
        if always:
            text += f" ({always} always included)"
        if self.past_top:
            text += f"; {self.past_top} more admitted, past the top"
        if self.semantic_note:
            text += f"; {self.semantic_note}"
        return text


class KnowledgeRetriever(RankingRetriever):
    """The retriever of the knowledge section (engine.llm.retrieval.retriever's ``Retriever``)."""

    section = "knowledge"

    default_top_k = DEFAULT_TOP_K

    async def retrieve(
        self, session: AsyncSession, adventure_id: int, recent: Sequence[str]
    ) -> KnowledgeFound:
        place = _loaded_place(session, adventure_id)
        if place is None:
            place = (await session.execute(_place_query(), {"adventure_id": adventure_id})).first()
            if place is None:
                return KnowledgeFound()
        if not place.knowledge_present:
            # Nothing in any of its libraries (most adventures): no search to send.
            return KnowledgeFound()
        libraries = libraries_of(adventure_id, place.server_id, place.owner_id)
        texts = [t for t in recent if t and t.strip()][:QUERY_ENTRIES]
        note = self.semantic_off_reason()
        # Lexical admission alone ranks by the squashed score times the class's weight, as
        # the database can too, so it sends back only what could make the top; the blend with
        # cosines needs every lexical score. The always-included are read with the chosen
        # (an always-included passage that also ranks among the best takes a place there).
        lexical = await search(
            session,
            KNOWLEDGE_TEXT,
            texts,
            {"library": libraries},
            best=self.top_k if note else None,
            max_terms=QUERY_TERMS,
        )
        if not lexical.bank_size:
            return KnowledgeFound()
        cosines: dict[int, float] = {}
        if not note:
            try:
                cosines = await self._cosines(session, libraries, texts)
            except CampfireError as error:
                note = f"semantic admission skipped this turn: {error.message}"
            except TimeoutError:
                note = (
                    f"semantic admission skipped this turn: the embedding server did not "
                    f"answer within {self.semantic_timeout:g} s"
                )
        admitted: dict[int, tuple[LexicalScore | None, float | None, bool]] = {}
        for chunk_id in lexical.scores.keys() | cosines.keys():
            score = lexical.scores.get(chunk_id)
            cosine = cosines.get(chunk_id)
            semantic = cosine is not None and self.floor is not None and cosine >= self.floor
            if (score is not None and score.admitted) or semantic:
                admitted[chunk_id] = (score, cosine, semantic)
        # Few enough to read their texts at once (the database left out the rest); with
        # cosines, every admitted passage comes, and only the chosen ones' texts are read.
        few = len(admitted) <= 2 * self.top_k
        passages = await _passages(session, libraries, admitted, with_text=few)
        always = sorted((p for p in passages if p.always), key=lambda p: p.id)
        ranked = sorted(
            (p for p in passages if not p.always and p.id in admitted),
            key=lambda p: (-p.rank, -p.id),
        )
        chosen = always + ranked[: self.top_k]
        if not few:
            texts_of = await _texts(session, [p.id for p in chosen])
            chosen = [replace(p, passage=texts_of[p.id]) for p in chosen if p.id in texts_of]
        return KnowledgeFound(chosen, lexical.bank_size, max(0, len(ranked) - self.top_k), note)

    async def _cosines(
        self, session: AsyncSession, libraries: tuple[str, ...], texts: Sequence[str]
    ) -> dict[int, float]:
        assert self.embedder is not None
        found = (
            await session.execute(
                select(
                    col(KnowledgeChunk.id),
                    col(KnowledgeChunk.embedding),
                    col(KnowledgeChunk.embedding_model),
                ).where(
                    col(KnowledgeChunk.library).in_(libraries),
                    col(KnowledgeChunk.embedding).is_not(None),
                )
            )
        ).all()
        return await cosines_of(found, self.embedder, texts, self.semantic_timeout)


# The statements a turn sends, built once (each turn only binds its values).


@dataclass(frozen=True, slots=True)
class _Place:
    server_id: int | None
    owner_id: int | None
    knowledge_present: bool


def _loaded_place(session: AsyncSession, adventure_id: int) -> _Place | None:
    """Where the adventure is and whether its libraries hold anything, from its row as this
    session loaded it (the turn's own load, with ``Adventure.knowledge_present``: see
    engine.storage.knowledge_models); None when the session holds no loaded row, or one whose
    values are expired: then they are read. Read from the instance's loaded values, so nothing
    here ever loads."""
    adventure = session.identity_map.get(identity_key(Adventure, adventure_id))
    if adventure is None:
        return None
    loaded = instance_dict(adventure)
    if not {"server_id", "owner_id", "knowledge_present"} <= loaded.keys():
        return None
    return _Place(loaded["server_id"], loaded["owner_id"], bool(loaded["knowledge_present"]))


@cache
def _place_query() -> Select[Any]:
    return select(
        col(Adventure.server_id),
        col(Adventure.owner_id),
        inspect(Adventure).attrs["knowledge_present"].expression.label("knowledge_present"),
    ).where(col(Adventure.id) == bindparam("adventure_id", type_=Integer))


@cache
def _passages_query(with_text: bool) -> Select[Any]:
    """The passages named by ``ids`` and the always-included ones of ``libraries``."""
    columns: list[Any] = [
        col(KnowledgeChunk.id),
        col(KnowledgeChunk.heading),
        col(KnowledgeChunk.always),
        col(KnowledgeSource.kind),
        col(KnowledgeSource.title),
        col(KnowledgeSource.narrator_only),
    ]
    if with_text:
        columns.append(col(KnowledgeChunk.text))
    return (
        select(*columns)
        .join(KnowledgeSource, col(KnowledgeSource.id) == col(KnowledgeChunk.source_id))
        .where(
            col(KnowledgeChunk.id).in_(bindparam("ids", expanding=True))
            | (
                col(KnowledgeChunk.library).in_(bindparam("libraries", expanding=True))
                & col(KnowledgeChunk.always)
            )
        )
    )


async def _passages(
    session: AsyncSession,
    libraries: tuple[str, ...],
    admitted: dict[int, tuple[LexicalScore | None, float | None, bool]],
    *,
    with_text: bool,
) -> list[ChosenPassage]:
    """The admitted passages and the always-included ones, with their source's class, title
    and flags, and their text when ``with_text``: one statement."""
    rows = await session.execute(
        _passages_query(with_text),
        {"ids": list(admitted), "libraries": list(libraries)},
    )
    passages = []
    for row in rows:
        score, cosine, semantic = admitted.get(row.id, (None, None, False))
        passages.append(
            ChosenPassage(
                row.id,
                KnowledgeClass(row.kind),
                row.title,
                row.heading,
                row.narrator_only,
                row.always,
                score,
                cosine,
                semantic,
                row.text if with_text else "",
            )
        )
    return passages


async def _texts(session: AsyncSession, ids: Sequence[int]) -> dict[int, str]:
    if not ids:
        return {}
    rows = await session.execute(
        select(col(KnowledgeChunk.id), col(KnowledgeChunk.text)).where(
            col(KnowledgeChunk.id).in_(ids)
        )
    )
    return {row.id: row.text for row in rows}
