"""The script pool's fair share: one adventure cannot hold every worker, the least-charged
owner goes first, and a full queue refuses at once instead of waiting without end."""

from __future__ import annotations

import asyncio
import time

import pytest

from engine.library.scripting import workers
from engine.library.scripting.fair_share import FairShare, ScriptsBusy
from engine.library.scripting.sandbox import Limits

#: What a hook is given (the text alone matters here).
PAYLOAD = {"text": "a", "state": {}, "history": [], "memory": "", "info": {}, "storyCards": []}


async def _hold(share: FairShare, owner: str, seconds: float, order: list[str]) -> None:
    async with share.slot(owner):
        order.append(owner)
        await asyncio.sleep(seconds)


async def test_one_owner_never_holds_every_worker():
    share = FairShare(2)
    order: list[str] = []
    greedy = [asyncio.create_task(_hold(share, "greedy", 0.2, order)) for _ in range(2)]
    await asyncio.sleep(0.01)
    # The greedy owner's second run waits although a worker is free; another's runs at once.
    assert order == ["greedy"]
    started = time.perf_counter()
    await _hold(share, "honest", 0, order)
    assert time.perf_counter() - started < 0.1
    await asyncio.gather(*greedy)
    assert order == ["greedy", "honest", "greedy"]


async def test_the_least_charged_owner_gets_the_next_worker():
    share = FairShare(1)
    order: list[str] = []
    await _hold(share, "busy", 0.1, order)  # charged 0.1 s
    first = asyncio.create_task(_hold(share, "first", 0.05, order))
    await asyncio.sleep(0.01)
    # Both wait behind "first": the busy one came before, the quiet one is charged less.
    busy = asyncio.create_task(_hold(share, "busy", 0, order))
    await asyncio.sleep(0.01)
    quiet = asyncio.create_task(_hold(share, "quiet", 0, order))
    await asyncio.gather(first, busy, quiet)
    assert order == ["busy", "first", "quiet", "busy"]
    assert share.charged("busy") == pytest.approx(0.1, abs=0.05)


async def test_a_full_queue_refuses_at_once():
    share = FairShare(1, queue_limit=2, owner_waiting=1)
    order: list[str] = []
    holder = asyncio.create_task(_hold(share, "a", 0.3, order))
    waiting = [asyncio.create_task(_hold(share, name, 0, order)) for name in ("b", "c")]
    await asyncio.sleep(0.01)
    started = time.perf_counter()
    with pytest.raises(ScriptsBusy, match="2 runs are already waiting"):
        await _hold(share, "d", 0, order)
    assert time.perf_counter() - started < 0.1
    await asyncio.gather(holder, *waiting)
    assert order == ["a", "b", "c"]


async def test_a_second_waiting_run_of_one_owner_is_refused():
    share = FairShare(1, owner_waiting=1)
    order: list[str] = []
    holder = asyncio.create_task(_hold(share, "a", 0.2, order))
    await asyncio.sleep(0.01)
    queued = asyncio.create_task(_hold(share, "b", 0, order))
    await asyncio.sleep(0.01)
    with pytest.raises(ScriptsBusy, match="already has runs waiting"):
        await _hold(share, "b", 0, order)
    await asyncio.gather(holder, queued)
    assert order == ["a", "b"]


async def test_a_wait_past_its_bound_is_refused_and_leaves_nothing_held():
    share = FairShare(1, wait_seconds=0.1)
    order: list[str] = []
    holder = asyncio.create_task(_hold(share, "a", 0.4, order))
    await asyncio.sleep(0.01)
    with pytest.raises(ScriptsBusy, match="no worker came free within 0.1 s"):
        await _hold(share, "b", 0, order)
    await holder
    # Nothing of the refused run is left waiting or holding: the next run goes at once.
    started = time.perf_counter()
    await _hold(share, "c", 0, order)
    assert time.perf_counter() - started < 0.05
    assert order == ["a", "c"]


async def test_a_cancelled_wait_gives_its_place_back():
    share = FairShare(1)
    order: list[str] = []
    holder = asyncio.create_task(_hold(share, "a", 0.1, order))
    await asyncio.sleep(0.01)
    cancelled = asyncio.create_task(_hold(share, "b", 0, order))
    await asyncio.sleep(0.01)
    cancelled.cancel()
    await holder
    await _hold(share, "c", 0, order)
    assert order == ["a", "c"]


async def test_a_looping_adventure_leaves_a_worker_to_the_others():
    """Through the real pool: while one adventure's scripts loop to their time limit on every
    worker it can get, another adventure's run waits for no more than it takes to run."""
    pool = workers.ScriptWorkers()
    try:
        # Warm both workers (a start is seconds on a loaded machine; not what is measured).
        warm = (pool.run("'x'", PAYLOAD, Limits(), owner=f"warm {n}") for n in range(2))
        await asyncio.gather(*warm)
        alone = time.perf_counter()
        assert (await pool.run("'ok'", PAYLOAD, Limits(), owner="honest")).text == "ok"
        alone = time.perf_counter() - alone
        loops = [
            asyncio.create_task(
                pool.run("while (true) {}", PAYLOAD, Limits(time_seconds=1.5), owner="looping")
            )
            for _ in range(2)
        ]
        await asyncio.sleep(0.2)
        beside = time.perf_counter()
        honest = await pool.run("'ok'", PAYLOAD, Limits(), owner="honest")
        beside = time.perf_counter() - beside
        assert honest.text == "ok" and honest.queued_ms < 100
        print(
            f"\nhonest run alone {alone * 1000:.0f} ms, beside a looping one {beside * 1000:.0f} ms"
        )
        results = await asyncio.gather(*loops)
        assert all(not result.ok for result in results)
        # The looping adventure's second run waited for its first: one worker at a time.
        assert max(result.queued_ms for result in results) >= 1000
    finally:
        pool.close()
