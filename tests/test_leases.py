"""Turn leases and job leases on a real database (SQLite and PostgreSQL), and the in-process
action queue."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta, timezone

import pytest
from sqlalchemy import select

from engine.errors import CampfireError, NotFound
from engine.platform.coordination.jobs import JobLease, JobLeases
from engine.platform.coordination.leases import Lease, LeaseBusy, TurnLeases, as_utc
from engine.platform.queue import AdventureQueue, QueueFull
from engine.storage.coordination_models import JobLease as JobLeaseRow
from engine.storage.coordination_models import TurnLease
from engine.storage.database import Database
from tests.helpers import new_adventure

START = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


class Clock:
    """A clock the test moves by hand."""

    def __init__(self, now: datetime = START) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
def clock() -> Clock:
    return Clock()


def leases(db: Database, holder: str, clock: Clock, **kw) -> TurnLeases:
    return TurnLeases(db, holder=holder, ttl=30, clock=clock, **kw)


async def lease_row(db: Database, adventure_id: int) -> TurnLease | None:
    async with db.session() as session:
        return await session.scalar(select(TurnLease).where(TurnLease.adventure_id == adventure_id))


async def holds(db: Database, lease: Lease, by: TurnLeases) -> bool:
    async with db.session() as session, session.begin():
        return await by.still_holds(session, lease)


# --- claim, release, busy ----------------------------------------------------------------------


async def test_claim_and_release(db: Database, clock: Clock) -> None:
    adventure = await new_adventure(db)
    a, b = leases(db, "a", clock), leases(db, "b", clock)

    lease = await a.claim(adventure)
    assert lease == Lease(adventure, "a", 1)
    assert lease.reclaimed_from is None
    assert await holds(db, lease, a)

    await a.release(lease)
    assert not await holds(db, lease, a)
    # Free again, and the token keeps counting: a release is a change of hands too.
    again = await b.claim(adventure)
    assert (again.holder, again.token, again.reclaimed_from) == ("b", 2, None)

    # Each adventure has a lease of its own; a missing adventure has none to claim.
    other = await new_adventure(db, channel_id=2)
    assert await a.claim(other) == Lease(other, "a", 1)
    with pytest.raises(NotFound):
        await a.claim(987654)


async def test_second_claim_is_busy_even_for_the_same_holder(db: Database, clock: Clock) -> None:
    adventure = await new_adventure(db)
    a, b = leases(db, "a", clock), leases(db, "b", clock)
    lease = await a.claim(adventure)

    with pytest.raises(LeaseBusy) as busy:
        await b.claim(adventure)
    assert isinstance(busy.value, CampfireError) and busy.value.retryable
    assert "still writing" in busy.value.message
    assert busy.value.holder == "a"
    assert busy.value.expires_at == START + timedelta(seconds=30)

    with pytest.raises(LeaseBusy):  # one turn at a time, whoever asks
        await a.claim(adventure)
    assert await holds(db, lease, a)


# --- expiry, heartbeats, fencing ---------------------------------------------------------------


async def test_expired_lease_is_reclaimed_with_the_next_token(db: Database, clock: Clock) -> None:
    adventure = await new_adventure(db)
    a, b = leases(db, "a", clock), leases(db, "b", clock)
    old = await a.claim(adventure)

    clock.advance(29.9)
    with pytest.raises(LeaseBusy):
        await b.claim(adventure)

    clock.advance(0.1)  # exactly at expiry: expired
    new = await b.claim(adventure)
    assert (new.holder, new.token, new.reclaimed_from) == ("b", old.token + 1, "a")
    row = await lease_row(db, adventure)
    assert row is not None and row.holder == "b" and row.fencing_token == old.token + 1
    assert as_utc(row.expires_at) == clock.now + timedelta(seconds=30)


async def test_expiry_compares_instants_whatever_the_clocks_zone(db: Database) -> None:
    """SQLite stores these times as naive text: every clock must be turned into UTC first."""
    adventure = await new_adventure(db)
    utc_clock = Clock()
    east = timezone(timedelta(hours=5))
    naive_clock = lambda: utc_clock.now.replace(tzinfo=None)  # noqa: E731 - naive means UTC
    east_clock = lambda: utc_clock.now.astimezone(east)  # noqa: E731
    a = TurnLeases(db, holder="a", ttl=30, clock=utc_clock)
    b = TurnLeases(db, holder="b", ttl=30, clock=east_clock)
    c = TurnLeases(db, holder="c", ttl=30, clock=naive_clock)
    await a.claim(adventure)

    utc_clock.advance(20)  # 05:00 later on the wall clock, but not later in time
    for other in (b, c):
        with pytest.raises(LeaseBusy):
            await other.claim(adventure)

    utc_clock.advance(11)
    assert (await b.claim(adventure)).reclaimed_from == "a"
    utc_clock.advance(31)
    assert (await c.claim(adventure)).reclaimed_from == "b"


async def test_heartbeat_keeps_the_lease_past_its_first_expiry(db: Database, clock: Clock) -> None:
    adventure = await new_adventure(db)
    a, b = leases(db, "a", clock), leases(db, "b", clock)
    lease = await a.claim(adventure)

    clock.advance(20)
    assert await a.heartbeat(lease)
    clock.advance(20)  # 40 s after the claim, past the first 30 s
    with pytest.raises(LeaseBusy):
        await b.claim(adventure)
    assert await a.heartbeat(lease)

    clock.advance(31)  # no heartbeat for longer than the ttl
    taken = await b.claim(adventure)
    assert taken.reclaimed_from == "a"


async def test_a_stale_lease_cannot_touch_the_new_one(db: Database, clock: Clock) -> None:
    adventure = await new_adventure(db)
    a, b, c = leases(db, "a", clock), leases(db, "b", clock), leases(db, "c", clock)
    stale = await a.claim(adventure)
    clock.advance(31)
    current = await b.claim(adventure)

    assert not await a.heartbeat(stale)
    await a.release(stale)
    # Fencing: the stale holder's final transaction would be refused, the new one's accepted.
    assert not await holds(db, stale, a)
    assert await holds(db, current, b)
    async with db.session() as session, session.begin():  # as TurnEngine.play(fence=) runs it
        assert not await a.fence(stale)(session)
        assert await b.fence(current)(session)
    with pytest.raises(LeaseBusy):
        await c.claim(adventure)
    assert await b.heartbeat(current)

    # Same holder name, older token: still stale.
    clock.advance(31)
    mine = await a.claim(adventure)
    assert mine.token == current.token + 1
    assert not await holds(db, stale, a)
    assert await holds(db, mine, a)


async def test_still_holds_locks_out_a_takeover_until_the_turn_commits(
    db: Database, clock: Clock
) -> None:
    """The check and the turn's writes are one unit: a claim waits for the commit."""
    adventure = await new_adventure(db)
    a, b = leases(db, "a", clock), leases(db, "b", clock)
    lease = await a.claim(adventure)
    clock.advance(31)  # expired, but nobody took it over yet: still a's

    claimed = asyncio.Event()

    async def take_over() -> Lease:
        try:
            return await b.claim(adventure)
        finally:
            claimed.set()

    async with db.session() as session, session.begin():
        assert await a.still_holds(session, lease)
        contender = asyncio.create_task(take_over())
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(asyncio.shield(claimed.wait()), 0.2)
    taken = await asyncio.wait_for(contender, 5)
    assert taken.reclaimed_from == "a"


# --- races -------------------------------------------------------------------------------------


def _one_winner(outcomes: list[object]) -> Lease:
    winners = [o for o in outcomes if isinstance(o, Lease)]
    losers = [o for o in outcomes if not isinstance(o, Lease)]
    assert len(winners) == 1, outcomes
    assert all(isinstance(o, LeaseBusy) for o in losers), outcomes
    return winners[0]


async def test_concurrent_claims_one_winner(db: Database, clock: Clock) -> None:
    adventure = await new_adventure(db)
    contenders = [leases(db, f"h{i}", clock) for i in range(4)]
    tokens = []
    for _ in range(3):
        outcomes = await asyncio.gather(
            *(c.claim(adventure) for c in contenders), return_exceptions=True
        )
        winner = _one_winner(outcomes)
        tokens.append(winner.token)
        await next(c for c in contenders if c.holder == winner.holder).release(winner)
    assert tokens == [1, 2, 3]


async def test_concurrent_claims_across_processes(db: Database, clock: Clock) -> None:
    """Separate engines and connection pools on the same database, as separate processes have."""
    adventure = await new_adventure(db)
    others = [Database(db.url) for _ in range(2)]
    try:
        contenders = [leases(d, f"p{i}", clock) for i, d in enumerate([db, *others])]
        _one_winner(
            await asyncio.gather(*(c.claim(adventure) for c in contenders), return_exceptions=True)
        )
        # Racing to take over the same expired lease: only one does, and the token moves once.
        clock.advance(31)
        winner = _one_winner(
            await asyncio.gather(*(c.claim(adventure) for c in contenders), return_exceptions=True)
        )
        assert winner.token == 2 and winner.reclaimed_from is not None
    finally:
        for other in others:
            await other.dispose()


# --- hold --------------------------------------------------------------------------------------


async def test_hold_releases_on_exception_and_cancellation(db: Database, clock: Clock) -> None:
    adventure = await new_adventure(db)
    a, b = leases(db, "a", clock), leases(db, "b", clock)
    with pytest.raises(RuntimeError):
        async with a.hold(adventure) as lease:
            assert lease.holder == "a"
            with pytest.raises(LeaseBusy):
                await b.claim(adventure)
            raise RuntimeError("model fell over")
    after = await b.claim(adventure)
    assert after.reclaimed_from is None and after.token == lease.token + 1
    await b.release(after)

    inside = asyncio.Event()

    async def turn() -> None:
        async with a.hold(adventure):
            inside.set()
            await asyncio.sleep(60)

    task = asyncio.create_task(turn())
    await asyncio.wait_for(inside.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    last = await b.claim(adventure)
    assert last.reclaimed_from is None and last.token == after.token + 2


async def test_hold_heartbeats_in_the_background(db: Database, clock: Clock) -> None:
    adventure = await new_adventure(db)
    a = leases(db, "a", clock, heartbeat_every=0.01)
    b = leases(db, "b", clock)

    async def expiry() -> datetime:
        row = await lease_row(db, adventure)
        assert row is not None
        return as_utc(row.expires_at)

    async def heartbeat_seen(at: datetime) -> None:
        for _ in range(500):
            if await expiry() == at + timedelta(seconds=30):
                return
            await asyncio.sleep(0.01)
        raise AssertionError("no heartbeat")

    async with a.hold(adventure) as lease:
        for _ in range(2):  # 20 s, then 40 s after the claim: alive thanks to the heartbeats
            clock.advance(20)
            await heartbeat_seen(clock.now)
            with pytest.raises(LeaseBusy):
                await b.claim(adventure)
        assert await holds(db, lease, a)
    assert not await holds(db, lease, a)


async def test_hold_survives_losing_the_lease(db: Database, clock: Clock) -> None:
    """A lost lease stops the heartbeats; the fence refuses the store; the exit is quiet."""
    adventure = await new_adventure(db)
    a = leases(db, "a", clock, heartbeat_every=0.01)
    b = leases(db, "b", clock)
    async with a.hold(adventure) as lease:
        clock.advance(31)
        taken = await b.claim(adventure)
        await asyncio.sleep(0.05)
        assert not await holds(db, lease, a)
    assert await holds(db, taken, b)  # a's release did not free b's lease


# --- reaping -----------------------------------------------------------------------------------


async def test_reap_expired(db: Database, clock: Clock) -> None:
    expired, live, released = [await new_adventure(db, channel_id=c) for c in (1, 2, 3)]
    a, b, scheduler = leases(db, "a", clock), leases(db, "b", clock), leases(db, "s", clock)
    crashed = await a.claim(expired)
    await a.release(await a.claim(released))
    clock.advance(20)
    await b.claim(live)
    clock.advance(15)

    assert await scheduler.reap_expired() == [expired]
    assert await scheduler.reap_expired() == []  # each interruption is announced once
    assert not await holds(db, crashed, a)
    assert not await a.heartbeat(crashed)
    # Already announced by the reaper, so the next claim does not report it again.
    after = await b.claim(expired)
    assert after.reclaimed_from is None and after.token == crashed.token + 1

    clock.advance(30)
    assert await scheduler.reap_expired() == sorted([expired, live])


# --- job leases: one process at a time runs each background job -------------------------------


def jobs(db: Database, holder: str, clock: Clock, **kw) -> JobLeases:
    return JobLeases(db, holder=holder, ttl=60, clock=clock, **kw)


async def job_row(db: Database, name: str) -> JobLeaseRow | None:
    async with db.session() as session:
        return await session.get(JobLeaseRow, name)


async def test_a_job_is_claimed_by_one_holder_at_a_time(db: Database, clock: Clock) -> None:
    a, b = jobs(db, "a", clock), jobs(db, "b", clock)
    lease = await a.claim("cleanup")
    assert lease == JobLease("cleanup", "a", 1)
    assert await b.claim("cleanup") is None
    assert await a.claim("cleanup") is None  # one run at a time, whoever asks
    assert await a.claim("memory:1") == JobLease("memory:1", "a", 1)  # a job of its own
    assert await b.running(["cleanup", "memory:1", "memory:2"]) == {"cleanup", "memory:1"}

    await a.release(lease)
    assert await b.running(["cleanup"]) == set()
    again = await b.claim("cleanup")
    assert (again.holder, again.token, again.taken_over_from) == ("b", 2, None)


async def test_racing_holders_one_runs_the_job(db: Database, clock: Clock) -> None:
    """Separate engines and connection pools as well, as separate processes have."""
    others = [Database(db.url) for _ in range(2)]
    try:
        contenders = [jobs(d, f"p{i}", clock) for i, d in enumerate([db, db, *others])]
        ran: list[str] = []
        gave_up: list[str] = []

        async def job(holder: str) -> str:
            ran.append(holder)
            # Still running until every other contender has tried (a fixed sleep let a late
            # claim on a busy machine find the lease released and run the job again), bounded.
            for _ in range(500):
                if len(gave_up) >= len(contenders) - 1:
                    break
                await asyncio.sleep(0.01)
            return holder

        async def contend(contender) -> str | None:
            result = await contender.run_alone("memory-sweep", lambda: job(contender.holder))
            if result is None:
                gave_up.append(contender.holder)
            return result

        results = await asyncio.gather(*(contend(c) for c in contenders))
        assert len(ran) == 1 and [r for r in results if r is not None] == ran

        # Racing to take over the same expired lease: one does, and the token moves once.
        held = await contenders[0].claim("cleanup")
        clock.advance(61)
        claims = await asyncio.gather(*(c.claim("cleanup") for c in contenders[1:]))
        [winner] = [c for c in claims if c is not None]
        assert winner.token == held.token + 1 and winner.taken_over_from == "p0"
    finally:
        for other in others:
            await other.dispose()


async def test_an_expired_holder_is_taken_over_and_cannot_touch_the_new_lease(
    db: Database, clock: Clock
) -> None:
    dead, alive = jobs(db, "dead", clock), jobs(db, "alive", clock)
    old = await dead.claim("memory:7")
    clock.advance(59.9)
    assert await alive.claim("memory:7") is None
    clock.advance(0.1)  # exactly at expiry: expired
    new = await alive.claim("memory:7")
    assert (new.holder, new.token, new.taken_over_from) == ("alive", 2, "dead")

    # The stale holder comes back: it can neither renew nor release the new lease.
    assert not await dead.heartbeat(old)
    await dead.release(old)
    assert await dead.release_unless_wanted(old)  # nothing of its own left to do
    row = await job_row(db, "memory:7")
    assert (row.holder, row.fencing_token) == ("alive", 2)
    assert await alive.heartbeat(new)


async def test_a_job_asked_for_while_it_runs_runs_once_more(db: Database, clock: Clock) -> None:
    a, b = jobs(db, "a", clock), jobs(db, "b", clock)
    lease = await a.claim("memory:3")
    assert await a.release_unless_wanted(lease)  # nobody asked: released
    lease = await a.claim("memory:3")
    assert await b.claim("memory:3") is None  # busy, and not asked again
    assert await b.claim("memory:3", ask_again=True) is None
    assert await b.claim("memory:3", ask_again=True) is None  # asking twice is once
    assert not await a.release_unless_wanted(lease)  # asked: keep it and look again
    assert await b.running(["memory:3"]) == {"memory:3"}
    assert await a.release_unless_wanted(lease)
    assert await b.running(["memory:3"]) == set()
    # A new holder starts without the old request.
    fresh = await b.claim("memory:3")
    assert await b.release_unless_wanted(fresh)


async def test_hold_heartbeats_and_releases_on_error_and_cancellation(
    db: Database, clock: Clock
) -> None:
    a = jobs(db, "a", clock, heartbeat_every=0.01)
    b = jobs(db, "b", clock)
    async with a.hold("cleanup") as lease:
        assert lease is not None
        for _ in range(3):  # 40 s apart, alive thanks to the heartbeats
            clock.advance(40)
            renewed = clock.now + timedelta(seconds=60)
            async with asyncio.timeout(5):
                while as_utc((await job_row(db, "cleanup")).expires_at) != renewed:  # noqa: ASYNC110 - the heartbeat is a background task
                    await asyncio.sleep(0.01)
            async with b.hold("cleanup") as busy:
                assert busy is None
    assert await b.running(["cleanup"]) == set()

    with pytest.raises(RuntimeError):
        async with a.hold("cleanup"):
            raise RuntimeError("the job fell over")
    assert await b.running(["cleanup"]) == set()

    inside = asyncio.Event()

    async def job() -> None:
        async with a.hold("cleanup"):
            inside.set()
            await asyncio.sleep(60)

    task = asyncio.create_task(job())
    await asyncio.wait_for(inside.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    after = await b.claim("cleanup")
    assert after is not None and after.taken_over_from is None


# --- the action queue --------------------------------------------------------------------------


async def test_queue_keeps_order_and_reports_positions() -> None:
    queue = AdventureQueue()
    ran: list[int] = []
    running = 0
    most = 0

    def job(n: int):
        async def run() -> int:
            nonlocal running, most
            running += 1
            most = max(most, running)
            await asyncio.sleep(0.005)
            ran.append(n)
            running -= 1
            return n * 10

        return run

    tickets = await asyncio.gather(*(queue.submit(1, job(n)) for n in range(4)))
    assert [t.position for t in tickets] == [0, 1, 2, 3]
    assert queue.waiting(1) == 3 and queue.running(1)
    assert [await t.result() for t in tickets] == [0, 10, 20, 30]
    assert ran == [0, 1, 2, 3]
    assert most == 1
    assert queue.waiting(1) == 0 and not queue.running(1)
    # An idle adventure starts again at position 0.
    assert (await queue.submit(1, job(9))).position == 0


async def test_queue_started_and_ahead() -> None:
    queue = AdventureQueue()
    gate = asyncio.Event()

    async def blocked() -> str:
        await gate.wait()
        return "first"

    first = await queue.submit(7, blocked)
    second = await queue.submit(7, lambda: asyncio.sleep(0, "second"))
    assert await asyncio.wait_for(first.wait_started(), 1)
    assert not second.started.is_set() and second.ahead == 1
    gate.set()
    assert await asyncio.wait_for(second.wait_started(), 1)
    assert await first.result() == "first" and await second.result() == "second"


async def test_queue_cap_refuses_politely() -> None:
    queue = AdventureQueue(cap=2)
    gate = asyncio.Event()
    tickets = [await queue.submit(1, gate.wait) for _ in range(3)]  # 1 running, 2 waiting
    assert [t.position for t in tickets] == [0, 1, 2]
    with pytest.raises(QueueFull) as full:
        await queue.submit(1, gate.wait)
    assert isinstance(full.value, CampfireError)
    assert "2 actions are already waiting" in full.value.message
    assert queue.waiting(1) == 2
    assert (await queue.submit(2, gate.wait)).position == 0  # other adventures are unaffected
    gate.set()
    for ticket in tickets:
        await ticket.result()
    assert (await queue.submit(1, gate.wait)).position == 0


async def test_queue_failing_job_does_not_block_the_next() -> None:
    queue = AdventureQueue()

    async def fails() -> None:
        raise RuntimeError("boom")

    async def works() -> str:
        return "ok"

    bad, good = await queue.submit(1, fails), await queue.submit(1, works)
    with pytest.raises(RuntimeError, match="boom"):
        await bad.result()
    assert await asyncio.wait_for(good.result(), 1) == "ok"


async def test_queue_cancelling_a_waiting_ticket_removes_it() -> None:
    queue = AdventureQueue()
    gate = asyncio.Event()
    ran: list[str] = []

    def job(name: str):
        async def run() -> None:
            await gate.wait()
            ran.append(name)

        return run

    first, second, third = [await queue.submit(1, job(n)) for n in ("1", "2", "3")]
    assert third.ahead == 2
    assert second.cancel()
    assert queue.waiting(1) == 1 and third.ahead == 1
    gate.set()
    await third.result()
    assert ran == ["1", "3"]
    with pytest.raises(asyncio.CancelledError):
        await second.result()
    assert not await second.wait_started()
    assert not second.cancel()  # already done


async def test_queue_cancelling_the_running_ticket_moves_on() -> None:
    queue = AdventureQueue()
    forever, after = (
        await queue.submit(1, asyncio.Event().wait),
        await queue.submit(1, lambda: asyncio.sleep(0, "next")),
    )
    await asyncio.wait_for(forever.wait_started(), 1)
    assert forever.cancel()
    with pytest.raises(asyncio.CancelledError):
        await forever.result()
    assert await asyncio.wait_for(after.result(), 1) == "next"


async def test_queue_runs_adventures_concurrently() -> None:
    """Each job waits for the other adventure's job to start: only overlap lets both finish."""
    queue = AdventureQueue()
    started = {1: asyncio.Event(), 2: asyncio.Event()}

    def job(mine: int, other: int):
        async def run() -> int:
            started[mine].set()
            await started[other].wait()
            return mine

        return run

    one, two = await queue.submit(1, job(1, 2)), await queue.submit(2, job(2, 1))
    assert await asyncio.wait_for(asyncio.gather(one.result(), two.result()), 2) == [1, 2]


async def test_queue_close_cancels_everything() -> None:
    queue = AdventureQueue()
    tickets = [await queue.submit(1, asyncio.Event().wait) for _ in range(3)]
    await asyncio.sleep(0)
    await asyncio.wait_for(queue.close(), 1)
    assert all(t.cancelled() for t in tickets)
    assert queue.waiting(1) == 0 and not queue.running(1)
