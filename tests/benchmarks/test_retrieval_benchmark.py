"""Top-5 semantic retrieval over 10,000 × 768: p50 within 5 ms, beside a plain Python loop.

Run with ``scripts/test -m benchmark -s tests/benchmarks``.
"""

from __future__ import annotations

import pytest

from tests.benchmarks.bench_retrieval import TARGET_P50_MS, measure

pytestmark = pytest.mark.benchmark


def test_top5_over_ten_thousand_memories_is_within_5_ms(capsys):
    figures = measure(memories=10_000, dim=768, reps=200)
    with capsys.disabled():
        print("\n[retrieval]")
        for line in figures.lines():
            print(f"  {line}")
    # The loop found the same five (checked inside measure); numpy must be far quicker.
    assert figures.numpy_p50_ms <= TARGET_P50_MS
    assert figures.ratio > 10
