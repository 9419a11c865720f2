"""What every retriever shares once the candidates are found: why semantic admission is off,
the cosines of the stored vectors with the query's, and the relevance admitted items are
ranked by (memories, knowledge).

Admission is decided on the raw signals, each against an absolute rule (shared terms and their
rarity, engine.llm.retrieval.lexical; the embedding model's calibrated floor,
engine.llm.retrieval.semantic), never against the best candidate: a story unrelated to the bank
admits nothing. Only the admitted are ranked, on the signals squashed to 0..1.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import numpy as np

from engine.llm.providers.embeddings import EmbeddingClient
from engine.llm.retrieval.lexical import SQUASH, LexicalScore
from engine.llm.retrieval.semantic import SemanticIndex, calibrated_floor, from_bytes
from engine.llm.retrieval.vectors import VectorCache

#: The longest a turn waits for the query's embedding before going on with lexical only: a
#: slow or dead embedding server must not hold up the story.
SEMANTIC_TIMEOUT_S = 5.0


class RankingRetriever:
    """What the memory bank's and the knowledge library's retrievers hold alike: the embedding
    client (None: lexical only), how many items they choose, the calibrated cosine floor of
    that client's model (None when it has none: then semantic admission is off, and says so)
    and how long a turn waits for the query's embedding."""

    #: How many items a retriever of this kind chooses unless told otherwise.
    default_top_k = 5

    def __init__(
        self,
        embedder: EmbeddingClient | None = None,
        *,
        top_k: int | None = None,
        floor: float | None = None,
        semantic_timeout: float = SEMANTIC_TIMEOUT_S,
        vectors: VectorCache | None = None,
    ) -> None:
        self.embedder = embedder
        #: The stored vectors this process keeps between turns (engine.llm.retrieval.vectors):
        #: one retriever per process, so one copy per process.
        self.vectors = vectors if vectors is not None else VectorCache()
        self.top_k = self.default_top_k if top_k is None else top_k
        self.semantic_timeout = semantic_timeout
        self.floor = calibrated_floor(embedder.model, floor) if embedder else None

    def semantic_off_reason(self) -> str:
        return semantic_off_reason(self.embedder, self.floor)


def semantic_off_reason(embedder: EmbeddingClient | None, floor: float | None) -> str:
    """Why semantic admission takes no part, as Insights says it; "" when it does."""
    if embedder is None:
        return "semantic admission off: no embedding model configured (lexical only)"
    if floor is None:
        return (
            f"semantic admission off: no calibration for embedding model "
            f"{embedder.model} (lexical only; set CAMPFIRE_EMBEDDING_FLOOR)"
        )
    return ""


def relevance(lexical: LexicalScore | None, cosine: float | None, semantic_admitted: bool) -> float:
    """An admitted item's relevance in 0..1: half its lexical score (an idf sum, which grows
    without bound, squashed), half its cosine when that admitted it."""
    score = lexical.score if lexical is not None and lexical.admitted else 0.0
    similarity = max(cosine or 0.0, 0.0) if semantic_admitted else 0.0
    return 0.5 * score / (score + SQUASH) + 0.5 * similarity


async def cosines_of(
    rows: Sequence[Any], embedder: EmbeddingClient, texts: Sequence[str], wait_s: float
) -> dict[int, float]:
    """The cosine of each row's stored vector (``row.id``, ``row.embedding``,
    ``row.embedding_model``) with the embedding of ``texts`` (the newest first). A vector of
    another model lives in another space: it is not compared (scores 0). Only the call to the
    embedding server is timed (``TimeoutError`` past ``wait_s``)."""
    if not rows or not texts:
        return {}
    async with asyncio.timeout(wait_s):
        query = (await embedder.embed(["\n".join(reversed(texts))]))[0]
    vectors = [
        from_bytes(row.embedding) if row.embedding_model == embedder.model else None for row in rows
    ]
    scores = SemanticIndex(vectors).scores(np.asarray(query))
    return {row.id: float(score) for row, score in zip(rows, scores, strict=True)}
