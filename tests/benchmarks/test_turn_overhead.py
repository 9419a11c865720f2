"""What the engine adds to a turn beyond the model itself, and whether it grows with the story.

Run with ``scripts/test -m benchmark -s tests/benchmarks``. Both figures are measured in one
run against the same fake model server, so the ratio holds on a noisy machine.
"""

from __future__ import annotations

import statistics
import time

import pytest

from engine.llm.providers.base import ChatMessage, GenerationParams
from engine.llm.providers.resolver import OperatorDefault
from engine.storage.models import ActionType
from engine.turns.engine import TurnEngine
from tests.helpers import new_adventure, play

pytestmark = pytest.mark.benchmark

REPLY = "The lantern flares, and the reeds fall silent as something wades closer. " * 3


async def _raw_stream(provider) -> float:
    started = time.perf_counter()
    messages = [ChatMessage("user", "Recent Story:\n> You light the lantern.")]
    async for _ in provider.stream(messages, GenerationParams()):
        pass
    return time.perf_counter() - started


async def _turn(engine: TurnEngine, adventure_id: int) -> float:
    started = time.perf_counter()
    events = await play(engine, adventure_id, ActionType.DO, "light the lantern")
    assert events[-1].__class__.__name__ == "TurnDone"
    return time.perf_counter() - started


async def test_engine_overhead_per_turn(db, provider, fake_model, capsys):
    fake_model.default_text = REPLY
    engine = TurnEngine(db, OperatorDefault(provider))
    adventure_id = await new_adventure(db)
    for _ in range(3):  # warm up connections and caches
        await _raw_stream(provider)
        await _turn(engine, adventure_id)

    raw, early, late = [], [], []
    for _ in range(20):
        raw.append(await _raw_stream(provider))
        early.append(await _turn(engine, adventure_id))
    # Grow the story to a few hundred entries, then measure again.
    for _ in range(150):
        await _turn(engine, adventure_id)
    for _ in range(20):
        late.append(await _turn(engine, adventure_id))

    raw_ms = statistics.median(raw) * 1000
    early_ms = statistics.median(early) * 1000
    late_ms = statistics.median(late) * 1000
    with capsys.disabled():
        print(
            f"\n[turn overhead, {db.engine.dialect.name}] model stream alone {raw_ms:.1f} ms; "
            f"whole turn at ~50 entries {early_ms:.1f} ms (+{early_ms - raw_ms:.1f} ms), "
            f"at ~400 entries {late_ms:.1f} ms (+{late_ms - raw_ms:.1f} ms); "
            f"late/early {late_ms / early_ms:.2f}"
        )
