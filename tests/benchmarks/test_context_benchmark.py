"""Context assembly at 50, 200 and 2,000 turns: bytes read stay flat, time does not grow.

Run with ``scripts/test -m benchmark -s tests/benchmarks``; the full figures (50, 200, 500 and
2,000 turns) come from ``python -m tests.benchmarks.bench_context``.
"""

from __future__ import annotations

import statistics

import pytest

from engine.library.scenarios.shipped import seed_builtin_scenarios
from tests.benchmarks.bench_context import (
    BYTES_RATIO_TARGET,
    EMBEDDING_KB_TARGET,
    KB_TARGET,
    ROWS_TARGET,
    FakeEmbedder,
    ReadCounter,
    embedding_summary,
    measure,
    prefix_shares,
    prefix_summary,
    seed_adventure,
    summary,
)

pytestmark = pytest.mark.benchmark


async def test_context_assembly_does_not_grow_with_the_story(db, capsys):
    lengths = (50, 200, 2000)
    adventures = {
        turns: await seed_adventure(db, turns, channel_id=100 + n, seed=n)
        for n, turns in enumerate(lengths)
    }
    figures = await measure(db, ReadCounter(db), adventures, reps=30)
    with capsys.disabled():
        print(f"\n[context, {db.engine.dialect.name}]")
        for line in [f.line() for f in figures] + [summary(figures)]:
            print(f"  {line}")
    by_turns = {f.turns: f for f in figures}
    # What is read is set by the budget, not by the story: deterministic, so asserted.
    assert by_turns[2000].bytes <= BYTES_RATIO_TARGET * by_turns[200].bytes
    assert by_turns[2000].statements == by_turns[50].statements
    assert by_turns[2000].history_kept <= by_turns[200].history_kept + 2
    # Memories are read for the few chosen, not the whole bank (issue 16).
    assert by_turns[2000].rows <= ROWS_TARGET
    assert by_turns[2000].bytes <= KB_TARGET * 1000


async def test_each_prompt_repeats_most_of_the_last_one(db, capsys):
    """What a provider's prefix cache can serve (bench_context's prefix line). Counted in
    tokens, so asserted at the 80 % target; the layout that put memories, cards and the note
    inside or before the story repeated 14 %, and the one that sent always-on cards after the
    story with the triggered ones 79 %."""
    async with db.session() as session, session.begin():
        await seed_builtin_scenarios(session)
    shares = await prefix_shares(db)
    with capsys.disabled():
        print(f"\n  {prefix_summary(shares)}")
    assert len(shares) == 40
    assert statistics.median(shares) >= 0.80


async def test_with_embeddings_a_turn_reads_only_new_and_changed_vectors(db, capsys):
    adventures = {2000: await seed_adventure(db, 2000, channel_id=200, seed=0)}
    figures = await measure(db, ReadCounter(db), adventures, reps=10, embedder=FakeEmbedder())
    with capsys.disabled():
        print(f"\n[context with embeddings, {db.engine.dialect.name}]")
        print(f"  {figures[0].line()}\n  {embedding_summary(figures)}")
    # After the first turn the vectors are the process's copies: ids and digests are read.
    assert figures[0].bytes <= EMBEDDING_KB_TARGET * 1000
