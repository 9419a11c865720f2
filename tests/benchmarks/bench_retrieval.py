"""Semantic retrieval speed: top-5 over 10,000 memories of 768 dimensions.

Run by hand (it is not part of the normal test run)::

    python -m tests.benchmarks.bench_retrieval [--memories 10000] [--dim 768] [--reps 200]

The bank is random unit vectors (float32, a fixed seed); each repetition scores a fresh random
query against all of them and picks the best five, exactly as a turn does
(``SemanticIndex.top``: one matrix-vector product, then ``argpartition``). The same top five are
then found by a plain Python loop over the same vectors (lists of floats, ``sum`` of products),
timed over a few repetitions, and the ratio is printed.

Target: p50 within 5 ms. A missed target is reported; the exit status is non-zero only on an
error. BLAS threads: as the bot runs (``bot/__init__.py`` sets ``OPENBLAS_NUM_THREADS=1`` unless
the environment says otherwise); the figure printed names the setting used.
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import statistics
import time
from dataclasses import dataclass

import numpy as np

from engine.llm.retrieval.semantic import SemanticIndex

TARGET_P50_MS = 5.0
TOP_K = 5


@dataclass(frozen=True, slots=True)
class Figures:
    memories: int
    dim: int
    numpy_p50_ms: float
    numpy_p95_ms: float
    loop_p50_ms: float
    blas_threads: str = "default"

    @property
    def ratio(self) -> float:
        return self.loop_p50_ms / self.numpy_p50_ms if self.numpy_p50_ms else float("inf")

    def lines(self) -> list[str]:
        verdict = "met" if self.numpy_p50_ms <= TARGET_P50_MS else "MISSED"
        return [
            f"top-{TOP_K} over {self.memories:,} memories × {self.dim} dims "
            f"(BLAS threads: {self.blas_threads})",
            f"numpy matrix product: p50 {self.numpy_p50_ms:.2f} ms, p95 {self.numpy_p95_ms:.2f} ms "
            f"(target p50 ≤ {TARGET_P50_MS:g} ms: {verdict})",
            f"plain Python loop:    p50 {self.loop_p50_ms:.1f} ms",
            f"ratio loop / numpy:   {self.ratio:,.0f}×",
        ]


def _loop_top(vectors: list[list[float]], query: list[float], k: int) -> list[int]:
    norm_q = sum(q * q for q in query) ** 0.5
    scores = []
    for row in vectors:
        dot = sum(a * b for a, b in zip(row, query, strict=True))
        norm = sum(a * a for a in row) ** 0.5
        scores.append(dot / (norm * norm_q) if norm and norm_q else 0.0)
    return heapq.nlargest(k, range(len(scores)), key=scores.__getitem__)


def _ms(seconds: float) -> float:
    return seconds * 1000


def measure(memories: int = 10_000, dim: int = 768, reps: int = 200, loop_reps: int = 3) -> Figures:
    rng = np.random.default_rng(7)
    bank = rng.standard_normal((memories, dim)).astype(np.float32)
    index = SemanticIndex.from_matrix(bank)
    queries = rng.standard_normal((reps + 10, dim)).astype(np.float32)
    for query in queries[:10]:  # warm-up
        index.top(query, TOP_K)
    times = []
    for query in queries[10:]:
        started = time.perf_counter()
        index.top(query, TOP_K)
        times.append(time.perf_counter() - started)

    as_lists = bank.tolist()
    loop_times = []
    for query in queries[:loop_reps]:
        started = time.perf_counter()
        expected = _loop_top(as_lists, query.tolist(), TOP_K)
        loop_times.append(time.perf_counter() - started)
        got = [row for row, _ in index.top(query, TOP_K)]
        if got != expected:
            raise AssertionError(f"numpy and the loop disagree: {got} != {expected}")
    times.sort()
    return Figures(
        blas_threads=os.environ.get("OPENBLAS_NUM_THREADS", "default"),
        memories=memories,
        dim=dim,
        numpy_p50_ms=_ms(statistics.median(times)),
        numpy_p95_ms=_ms(times[int(len(times) * 0.95) - 1]),
        loop_p50_ms=_ms(statistics.median(loop_times)),
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--reps", type=int, default=200)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    figures = measure(args.memories, args.dim, args.reps)
    if args.json:
        print(json.dumps({k: getattr(figures, k) for k in Figures.__slots__}))
        return
    for line in figures.lines():
        print(line)


if __name__ == "__main__":
    main()
