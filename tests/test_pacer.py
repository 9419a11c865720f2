"""The rate pacer that keeps streamed edits inside Discord's windows, on a fake clock."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cogs.streaming import RatePacer


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        await asyncio.sleep(0)


def fake_pacer(clock: FakeClock, **kwargs: Any) -> RatePacer:
    kwargs.setdefault("margin", 0.0)
    return RatePacer(clock=clock, sleep=clock.sleep, **kwargs)


async def test_pacer_lets_a_burst_through_then_holds_the_window() -> None:
    clock = FakeClock()
    pacer = fake_pacer(clock)
    for _ in range(5):
        assert pacer.would_wait(1) == 0
        await pacer.acquire(1)
    assert clock.sleeps == []
    assert pacer.would_wait(1) == pytest.approx(5.0)
    await pacer.acquire(1)
    assert clock.sleeps == [pytest.approx(5.0)]
    assert clock.now == pytest.approx(5.0)


async def test_pacer_window_slides() -> None:
    clock = FakeClock()
    pacer = fake_pacer(clock)
    for t in range(5):
        clock.now = float(t)
        await pacer.acquire(1)
    clock.now = 4.5
    assert pacer.would_wait(1) == pytest.approx(0.5)
    await pacer.acquire(1)
    assert clock.now == pytest.approx(5.0)
    assert pacer.would_wait(1) == pytest.approx(1.0)  # the hit at t=1 leaves at t=6


async def test_pacer_channels_are_separate_but_share_the_global_budget() -> None:
    clock = FakeClock()
    pacer = fake_pacer(clock, global_per_second=40)
    # Routine edits may use three quarters of the global budget...
    for channel in range(6):
        for _ in range(5):
            await pacer.acquire(channel)
    assert clock.sleeps == []
    assert pacer.would_wait(99) == pytest.approx(1.0)
    # ...the rest is kept for final edits, which go out at once...
    for channel in range(10):
        assert pacer.would_wait(100 + channel, urgent=True) == 0
        await pacer.acquire(100 + channel, urgent=True)
    assert clock.sleeps == []
    # ...until the whole budget is spent.
    assert pacer.would_wait(200, urgent=True) == pytest.approx(1.0)
    await pacer.acquire(99)
    assert clock.now == pytest.approx(1.0)


async def test_pacer_margin_widens_the_channel_window() -> None:
    clock = FakeClock()
    pacer = fake_pacer(clock, margin=0.1)
    for _ in range(5):
        await pacer.acquire(1)
    assert pacer.would_wait(1) == pytest.approx(5.1)


async def test_pacer_cancelled_waiter_takes_no_slot() -> None:
    clock = FakeClock()
    forever = asyncio.get_running_loop().create_future()

    async def stuck_sleep(seconds: float) -> None:
        await forever

    pacer = RatePacer(per_channel=1, clock=clock, sleep=stuck_sleep, margin=0)
    await pacer.acquire(1)
    waiter = asyncio.create_task(pacer.acquire(1))
    await asyncio.sleep(0.01)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    clock.now = 5.0
    assert pacer.would_wait(1) == 0  # only the first hit was ever recorded


async def test_pacer_serves_waiters_in_arrival_order() -> None:
    pacer = RatePacer(per_channel=1, per_seconds=0.02)
    served: list[int] = []

    async def take(n: int) -> None:
        await pacer.acquire(5)
        served.append(n)

    tasks = []
    for n in range(6):
        tasks.append(asyncio.create_task(take(n)))
        await asyncio.sleep(0)
    await asyncio.gather(*tasks)
    assert served == list(range(6))


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 2), st.floats(0, 1.5, allow_nan=False)), min_size=1, max_size=60
    ),
    st.integers(1, 5),
    st.integers(2, 8),
)
def test_pacer_never_exceeds_either_window(
    requests: list[tuple[int, float]], per_channel: int, global_per_second: int
) -> None:
    async def run() -> list[tuple[int, float]]:
        clock = FakeClock()
        pacer = fake_pacer(
            clock, per_channel=per_channel, per_seconds=2.0, global_per_second=global_per_second
        )
        hits = []
        for channel, gap in requests:
            clock.now += gap
            expected = pacer.would_wait(channel)
            before = clock.now
            await pacer.acquire(channel)
            assert clock.now - before == pytest.approx(expected)  # waited only as needed
            hits.append((channel, clock.now))
        return hits

    hits = asyncio.run(run())
    eps = 1e-9
    for channel in range(3):
        times = [t for c, t in hits if c == channel]
        for i in range(per_channel, len(times)):
            assert times[i] - times[i - per_channel] >= 2.0 - eps
    times = [t for _, t in hits]
    for i in range(global_per_second, len(times)):
        assert times[i] - times[i - global_per_second] >= 1.0 - eps
