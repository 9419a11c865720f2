"""Knowledge retrieval over a 2,000-passage library: p50 within 10 ms.

Run with ``scripts/test -m benchmark -s tests/benchmarks``. The measurement runs in a process
of its own, as the other benchmarks' do.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.benchmarks.bench_knowledge import TARGET_P50_MS

pytestmark = pytest.mark.benchmark


def test_retrieval_over_two_thousand_passages_is_within_10_ms(capsys):
    run = subprocess.run(
        [sys.executable, "-m", "tests.benchmarks.bench_knowledge"],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    line = run.stdout.strip().splitlines()[-1]
    with capsys.disabled():
        print(f"\n[knowledge]\n  {line}")
    assert line.startswith("knowledge: retrieval p50 ")
    p50 = float(line.split("p50 ", 1)[1].split(" ms", 1)[0])
    assert p50 <= TARGET_P50_MS
