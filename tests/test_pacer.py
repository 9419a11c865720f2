"""The rate pacer that keeps streamed edits inside Discord's windows, on a fake clock."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cogs.ui.pacing import Priority, RatePacer, interaction_window, process_budget


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


# -- priorities, fairness, reservations ---------------------------------------------------------


async def _queued(pacer: RatePacer, served: list[str], name: str, channel: int, **kwargs) -> None:
    await pacer.acquire(channel, **kwargs)
    served.append(name)


async def test_pacer_serves_finals_then_routine_then_streaming_requests() -> None:
    clock = FakeClock()
    pacer = fake_pacer(clock, per_channel=1, per_seconds=1.0)
    await pacer.acquire(1)  # the channel's window is full for a second
    served: list[str] = []
    tasks = [
        asyncio.create_task(_queued(pacer, served, "stream", 1, priority=Priority.STREAM)),
        asyncio.create_task(_queued(pacer, served, "routine", 1)),
        asyncio.create_task(_queued(pacer, served, "final", 1, urgent=True)),
    ]
    await asyncio.gather(*tasks)
    assert served == ["final", "routine", "stream"]
    assert clock.now == pytest.approx(3.0)  # one a second, as the window allows


async def test_pacer_a_full_channel_does_not_hold_back_other_channels() -> None:
    clock = FakeClock()
    pacer = fake_pacer(clock, per_channel=1, per_seconds=10.0)
    await pacer.acquire(1)
    served: list[str] = []
    blocked = asyncio.create_task(_queued(pacer, served, "channel 1", 1, urgent=True))
    await asyncio.sleep(0)
    await _queued(pacer, served, "channel 2", 2)
    assert served == ["channel 2"]
    assert clock.now == 0
    await blocked
    assert served == ["channel 2", "channel 1"]
    assert clock.now == pytest.approx(10.0)


async def test_pacer_shares_a_saturated_budget_round_robin_across_channels() -> None:
    clock = FakeClock()
    pacer = fake_pacer(clock, global_per_second=4)  # three a second for routine requests
    served: list[int] = []

    async def stream(channel: int) -> None:
        for _ in range(4):
            await pacer.acquire(channel)
            served.append(channel)
            await asyncio.sleep(0)  # the request itself

    await asyncio.gather(*(stream(channel) for channel in (1, 2, 3)))
    # Each channel waits its turn behind the others instead of one taking every slot.
    assert served == [1, 2, 3] * 4


async def test_pacer_holds_streaming_back_while_reservations_fill_the_horizon() -> None:
    clock = FakeClock()
    pacer = fake_pacer(clock, global_per_second=10, final_horizon=1.0)
    assert pacer.would_wait(1) == 0
    pacer.reserve(10)  # the whole budget of the next second
    served: list[str] = []
    stream = asyncio.create_task(_queued(pacer, served, "stream", 1, priority=Priority.STREAM))
    await asyncio.sleep(0)
    assert served == []
    pacer.reserve(1)
    await _queued(pacer, served, "routine", 2)  # reservations never hold back the rest
    clock.now = 60.0
    await asyncio.sleep(0)
    assert served == ["routine"]  # no amount of time frees the room reserved
    pacer.release(2)
    await stream
    assert served == ["routine", "stream"]
    assert pacer.reserved == 9


async def test_pacer_streaming_requests_wait_for_recent_requests_to_leave_room() -> None:
    clock = FakeClock()
    pacer = fake_pacer(clock, global_per_second=10, final_horizon=1.0)
    pacer.reserve(6)
    for channel in range(3):
        await pacer.acquire(channel)  # three in the last second: 3 + 6 + 1 = 10, still fits
    await pacer.acquire(9, priority=Priority.STREAM)
    assert clock.now == 0
    clock.now = 0.5
    await pacer.acquire(8, priority=Priority.STREAM)  # 4 + 6 + 1 > 10: waits for the first
    assert clock.now == pytest.approx(1.0)


async def test_pacer_a_waiter_cancelled_after_its_grant_gives_the_slot_back() -> None:
    clock = FakeClock()
    pacer = fake_pacer(clock, per_channel=1, per_seconds=1.0)
    await pacer.acquire(1)
    waiter = asyncio.create_task(pacer.acquire(1))
    await asyncio.sleep(0)
    clock.now = 1.0
    pacer.release(0)  # anything that wakes the pacer: it grants the waiter now
    await asyncio.sleep(0)
    waiter.cancel()  # ...but the waiter is cancelled before it could use its slot
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert pacer.would_wait(1) == 0


def test_each_process_paces_its_share_of_the_bots_global_budget():
    # One process running every shard: four fifths of Discord's 50 a second, the rest left
    # for requests it does not pace.
    assert process_budget(50) == 40
    # Processes splitting 8 shards 3 + 3 + 2 never spend more than the bot's budget together.
    shares = [process_budget(50, here, 8) for here in (3, 3, 2)]
    assert shares == [15, 15, 10] and sum(shares) <= 40
    # A bot Discord gave a larger budget; a process with a tiny share still sends.
    assert process_budget(500, 1, 4) == 100
    assert process_budget(1, 1, 16) == 1


async def test_a_request_without_a_channel_spends_only_the_global_budget():
    """Opening threads: a burst waits its turn under the global budget (routine requests may
    use three quarters of it: 3 a second of 4), and leaves every channel's window alone."""
    clock = FakeClock()
    pacer = fake_pacer(clock, global_per_second=4)
    for _ in range(8):
        await pacer.acquire(None)
    assert clock.now == pytest.approx(2.0)  # 3 at 0 s, 3 at 1 s, 2 at 2 s
    assert pacer._channels == {}
    await pacer.acquire(7)  # the third routine request of this second: no wait
    assert clock.now == pytest.approx(2.0)


async def test_an_interaction_tokens_requests_spend_no_global_budget() -> None:
    # "Interaction endpoints are not bound to the bot's Global Rate Limit" (discord-api-docs,
    # Rate Limits): a full global budget holds back no request through a token, and those
    # requests leave the global budget as they found it; the token's own window still holds.
    clock = FakeClock()
    pacer = fake_pacer(clock, global_per_second=2)
    await pacer.acquire(1, urgent=True)
    await pacer.acquire(2, urgent=True)
    assert pacer.would_wait(3, urgent=True) == pytest.approx(1.0)
    token = interaction_window(77)
    for _ in range(5):
        await pacer.acquire(token, priority=Priority.STREAM, global_budget=False)
    assert clock.sleeps == []
    assert (pacer.global_requests, pacer.interaction_requests) == (2, 5)
    await pacer.acquire(token, urgent=True, global_budget=False)
    assert clock.sleeps == [pytest.approx(5.0)]  # the token's window of 5 per 5 s
    # Saturated reservations hold back streaming on the global budget, not through a token.
    pacer.reserve(100)
    assert pacer.saturated
    await pacer.acquire(interaction_window(78), priority=Priority.STREAM, global_budget=False)
    assert pacer.interaction_requests == 7


async def test_idle_windows_are_forgotten() -> None:
    clock = FakeClock()
    pacer = fake_pacer(clock)
    for interaction in range(50):
        await pacer.acquire(interaction_window(interaction), global_budget=False)
    clock.now += 10.0
    await pacer.acquire(interaction_window(1000), global_budget=False)
    assert list(pacer._channels) == [interaction_window(1000)]
