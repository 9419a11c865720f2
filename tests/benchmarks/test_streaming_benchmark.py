"""N narrations streaming at once through Campfire on the Discord stand-in (N = 1 and 10).

Run with ``scripts/test -m benchmark -s tests/benchmarks``; the full figures (N = 1, 10, 50) come
from ``python -m tests.benchmarks.bench_streaming``.
"""

from __future__ import annotations

import pytest

from tests.benchmarks.bench_streaming import run_once

pytestmark = pytest.mark.benchmark


@pytest.mark.parametrize("n", [1, 10])
async def test_concurrent_narrations_are_exact_and_never_rate_limited(n, tmp_path, capsys):
    result = await run_once(n, 120, tmp_path / "data")
    with capsys.disabled():
        print(f"\n[streaming] {result.line()}")
    assert result.wrong == []
    assert result.correct
    assert result.rate_limited == 0
    assert result.fallbacks == []
    assert result.ack_failures == []
