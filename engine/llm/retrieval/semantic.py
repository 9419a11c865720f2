"""Semantic scores: cosine similarity of one query vector against the memory bank, in numpy.

The bank's vectors are stacked into one float32 matrix of unit rows, so scoring every memory is
one matrix-vector product. A vector of another dimension than the query's (written by an older
embedding model) cannot be compared and scores 0 instead of failing the turn.

Admission needs a floor, and what counts as "similar" differs by model (one model's unrelated
texts sit near 0.1, another's near 0.5), so the floor is looked up per model in
``CALIBRATION``. A model missing from the table gets no semantic admission at all, unless the
operator calibrates it (``CAMPFIRE_EMBEDDING_FLOOR``): lexical retrieval carries on alone and
Insights says why.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

#: Cosine floors per embedding model (the name as the endpoint knows it, without a ``:tag``):
#: a memory scoring at or above it is admitted. Starting points placed between the typical
#: scores of unrelated and related sentence pairs for each model; an operator who measures
#: otherwise overrides with CAMPFIRE_EMBEDDING_FLOOR.
CALIBRATION: dict[str, float] = {
    "text-embedding-3-small": 0.40,
    "text-embedding-3-large": 0.40,
    "text-embedding-ada-002": 0.80,
    "nomic-embed-text": 0.60,
    "mxbai-embed-large": 0.60,
    "all-minilm": 0.45,
    "bge-m3": 0.55,
}


def calibrated_floor(model: str, override: float | None = None) -> float | None:
    """The admission floor for ``model``: the operator's, the table's, or None (uncalibrated)."""
    if override is not None:
        return override
    name = model.strip().lower()
    return CALIBRATION.get(name, CALIBRATION.get(name.split(":", 1)[0].rsplit("/", 1)[-1]))


def unit(vector: np.ndarray) -> np.ndarray:
    """``vector`` scaled to length 1, as float32 (a zero vector stays zero)."""
    vector = np.asarray(vector, dtype=np.float32).ravel()
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm > 0 else vector


def to_bytes(vector: np.ndarray) -> bytes:
    return unit(vector).astype("<f4").tobytes()


def vector_digest(data: bytes) -> int:
    """A stored vector's digest, as a signed 64-bit integer (a BIGINT column): written with the
    vector (``Memory.embedding_digest``) so that a process keeping vectors can tell, reading
    only ids and digests, which of its copies are still current. 64 bits: two different
    vectors of one row sharing a digest by chance is not a risk worth a wider column."""
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big", signed=True)


def from_bytes(data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype="<f4")


class SemanticIndex:
    """The bank's vectors as one matrix; rows of another dimension than the query score 0."""

    def __init__(self, vectors: Sequence[np.ndarray | None]) -> None:
        self.size = len(vectors)
        dims = [v.shape[0] if v is not None else 0 for v in vectors]
        self._by_dim: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        for dim in set(dims) - {0}:
            rows = np.fromiter((i for i, d in enumerate(dims) if d == dim), dtype=np.int64)
            # A checker sees each vector as possibly None; the rows taken all have a dimension.
            matrix = np.stack([unit(vectors[i]) for i in rows])  # type: ignore[arg-type]
            self._by_dim[dim] = (rows, matrix)

    @classmethod
    def from_matrix(cls, matrix: np.ndarray) -> SemanticIndex:
        """An index over rows that already share one dimension (normalised here once)."""
        index = cls([])
        index.size = matrix.shape[0]
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        index._by_dim[matrix.shape[1]] = (
            np.arange(matrix.shape[0]),
            (matrix / norms).astype(np.float32),
        )
        return index

    def scores(self, query: np.ndarray) -> np.ndarray:
        """Cosine of every row with ``query``, in the rows' order (0 where not comparable)."""
        query = unit(query)
        out = np.zeros(self.size, dtype=np.float32)
        found = self._by_dim.get(query.shape[0])
        if found is not None:
            rows, matrix = found
            out[rows] = matrix @ query
        return out

    def top(self, query: np.ndarray, k: int) -> list[tuple[int, float]]:
        """The ``k`` best rows as (row, cosine), best first."""
        scores = self.scores(query)
        k = min(k, scores.shape[0])
        if k <= 0:
            return []
        best = np.argpartition(-scores, k - 1)[:k]
        best = best[np.argsort(-scores[best], kind="stable")]
        return [(int(i), float(scores[i])) for i in best]
