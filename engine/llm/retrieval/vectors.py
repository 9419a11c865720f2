"""Stored vectors kept in the process between turns, so a turn reads only the new and changed.

A turn with an embedding model compares the query's vector with every live memory's. Reading
every vector every turn (200 memories of 1,536 dimensions: 1.2 MB) was most of a turn's reads;
instead each process keeps the vectors it has read, and a turn reads the ids and digests of the
adventure's vectors (``Memory.embedding_digest``, written and cleared with the vector: migration
0028) and then the vectors only of the rows it holds no current copy of.

Why this is safe with several processes on one database: the digest is of the vector's bytes,
read in the turn's own statement, so a vector another process wrote, changed or cleared since
is seen by the next turn here: a changed digest (or a reused id with another vector) is read
again, a row no longer listed (deleted, forgotten, its vector cleared by an edit) is dropped
from the copy. A vector is kept under the digest read in the same row, never under one read
earlier, so a write between the two statements is never kept under the older digest. A row
with no digest (written by code that sets none) is read every turn and never kept.

Memory: the copies (and each scope's stacked matrix, which doubles them) are bounded by
``max_bytes`` (64 MiB by default: some 5,000 vectors of 1,536 dimensions), whole scopes (one
adventure's memories for one model) evicted least recently used first; a scope larger than the
bound is used for its turn and not kept.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sqlalchemy import Select
from sqlalchemy.ext.asyncio import AsyncSession

from engine.llm.retrieval.semantic import SemanticIndex, from_bytes, unit

#: The default bound on the vectors a process keeps, in bytes.
MAX_BYTES = 64 * 1024 * 1024


@dataclass(slots=True)
class _Scope:
    #: Row id → (digest, unit float32 vector).
    vectors: dict[int, tuple[int, np.ndarray]] = field(default_factory=dict)
    nbytes: int = 0
    #: The stacked matrix of the last turn, for the ids (in order) it was stacked for: the
    #: same bank turn after turn costs no copy. Counted in the bound with the vectors.
    matrix: tuple[tuple[int, ...], np.ndarray] | None = None


class VectorCache:
    """One process's copies of stored vectors, by scope (what the caller names: an adventure's
    memories for one model), bounded in bytes. Used by one event loop: no locking."""

    def __init__(self, max_bytes: int = MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self._scopes: OrderedDict[Hashable, _Scope] = OrderedDict()
        self._bytes = 0

    @property
    def nbytes(self) -> int:
        return self._bytes

    def scope(self, key: Hashable) -> _Scope:
        found = self._scopes.get(key)
        if found is None:
            found = self._scopes[key] = _Scope()
        self._scopes.move_to_end(key)
        return found

    def keep(self, scope: _Scope, row_id: int, digest: int, vector: np.ndarray) -> None:
        self.drop(scope, [row_id])
        scope.vectors[row_id] = (digest, vector)
        scope.nbytes += vector.nbytes
        self._bytes += vector.nbytes

    def drop(self, scope: _Scope, row_ids: Sequence[int]) -> None:
        for row_id in row_ids:
            old = scope.vectors.pop(row_id, None)
            if old is not None:
                scope.nbytes -= old[1].nbytes
                self._bytes -= old[1].nbytes
                self.keep_matrix(scope, None)

    def keep_matrix(
        self, scope: _Scope, order: tuple[int, ...] | None, matrix: np.ndarray | None = None
    ) -> None:
        """The scope's stacked matrix for ``order`` (None: none); counted in the bound."""
        if scope.matrix is not None:
            scope.nbytes -= scope.matrix[1].nbytes
            self._bytes -= scope.matrix[1].nbytes
        scope.matrix = None if order is None or matrix is None else (order, matrix)
        if scope.matrix is not None:
            scope.nbytes += scope.matrix[1].nbytes
            self._bytes += scope.matrix[1].nbytes

    def trim(self, keep: Hashable) -> None:
        """Evict the least recently used scopes until within the bound; ``keep`` (the scope
        just used) goes last, and goes too if it alone is over the bound."""
        for key in list(self._scopes):
            if self._bytes <= self.max_bytes:
                return
            if key != keep:
                self._evict(key)
        if self._bytes > self.max_bytes:
            self._evict(keep)

    def _evict(self, key: Hashable) -> None:
        scope = self._scopes.pop(key, None)
        if scope is not None:
            self._bytes -= scope.nbytes


@dataclass(frozen=True, slots=True)
class Current:
    """A scope's current vectors for one turn."""

    #: The rows whose vectors are of the query's model, in the order of ``scores``.
    ids: list[int]
    #: The rows whose vectors are of another model: not compared (they score 0).
    others: list[int]
    _vectors: list[np.ndarray]
    _matrix: np.ndarray | None

    def scores(self, query: np.ndarray) -> np.ndarray:
        """The cosine of each of ``ids``' vectors with ``query`` (0 where the dimensions
        differ): one matrix-vector product over unit rows."""
        query = unit(query)
        if self._matrix is not None:
            if self._matrix.shape[1] != query.shape[0]:
                return np.zeros(len(self.ids), dtype=np.float32)
            return self._matrix @ query
        return SemanticIndex(self._vectors).scores(query)


async def current_vectors(
    session: AsyncSession,
    cache: VectorCache,
    key: Hashable,
    listing: Select[Any],
    reading: Callable[[list[int]], Select[Any]],
    params: dict[str, Any],
) -> Current:
    """The scope's current vectors, the rows with no current copy read.

    ``listing``: a statement whose rows are ``(id, digest, same)`` for every row in scope with
    a vector, ``same`` true when the vector is of the query's model (the others are not read).
    ``reading(ids)``: a statement whose rows are ``(id, embedding, digest)`` for those ids.
    Both run in ``session`` with ``params``.
    """
    # Plain tuples: a turn goes through every listed row several times.
    listed: list[tuple[int, int | None, bool]] = [
        tuple(row) for row in (await session.execute(listing, params)).all()
    ]
    scope = cache.scope(key)
    kept = scope.vectors
    alive = {row_id for row_id, _, _ in listed}
    cache.drop(scope, [row_id for row_id in kept if row_id not in alive])
    wanted = [row_id for row_id, _, same in listed if same]
    stale = [
        row_id
        for row_id, digest, same in listed
        if same and (digest is None or kept.get(row_id, (None,))[0] != digest)
    ]
    unkept: dict[int, np.ndarray] = {}
    if stale:
        for row in await session.execute(reading(stale), params):
            if row.embedding is None:
                continue  # cleared since it was listed: nothing to compare
            vector = unit(from_bytes(row.embedding))
            if row.digest is None:
                unkept[row.id] = vector
            else:
                # Kept under the digest read with these bytes, never the one listed before.
                cache.keep(scope, row.id, row.digest, vector)
    ids = [row_id for row_id in wanted if row_id in kept or row_id in unkept]
    order = tuple(ids)
    vectors: list[np.ndarray] = []
    matrix = None
    if ids and not unkept and scope.matrix is not None and scope.matrix[0] == order:
        matrix = scope.matrix[1]  # the same bank as the last turn's: its matrix as it is
    else:
        vectors = [unkept[i] if i in unkept else kept[i][1] for i in ids]
        if ids and len({v.shape[0] for v in vectors}) == 1:
            matrix = np.stack(vectors)
            if not unkept:
                cache.keep_matrix(scope, order, matrix)
    cache.trim(key)
    others = [row_id for row_id, _, same in listed if not same]
    return Current(ids, others, vectors, matrix)
