"""The write gate: a process's SQLite write transactions take turns, urgent ones first, and a
waiter that gives up leaves nothing behind. On a real database for what the database does."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import func, select

from engine.people.accounts import touch_user
from engine.storage import database as database_module
from engine.storage.coordination_models import RequestRecord
from engine.storage.database import Database
from engine.storage.dialect import WriteGateTimeout, is_busy
from engine.storage.models import User
from engine.storage.write_gate import WriteGate
from tests.discord_env import answered


async def test_waiters_are_served_in_arrival_order_urgent_ones_first():
    gate = WriteGate()
    await gate.acquire()
    served: list[str] = []

    async def writer(name: str, urgent: bool) -> None:
        await gate.acquire(urgent=urgent)
        served.append(name)
        gate.release()

    tasks = []
    for name, urgent in [("a", False), ("b", False), ("store 1", True), ("c", False)]:
        tasks.append(asyncio.create_task(writer(name, urgent)))
        await asyncio.sleep(0)  # each one waiting before the next arrives
    tasks.append(asyncio.create_task(writer("store 2", True)))
    await asyncio.sleep(0)
    gate.release()
    await asyncio.gather(*tasks)
    assert served == ["store 1", "store 2", "a", "b", "c"]
    # Open again: the next one passes at once.
    await asyncio.wait_for(gate.acquire(), 1)


async def test_a_waiter_that_gives_up_leaves_no_trace():
    gate = WriteGate()
    await gate.acquire()
    impatient = asyncio.create_task(gate.acquire())
    patient = asyncio.create_task(gate.acquire())
    await asyncio.sleep(0)
    impatient.cancel()
    await asyncio.sleep(0)
    gate.release()
    await asyncio.wait_for(patient, 1)  # the cancelled one was skipped
    assert impatient.cancelled()
    gate.release()
    await asyncio.wait_for(gate.acquire(), 1)


async def test_a_waiter_cancelled_as_the_gate_reaches_it_hands_it_on():
    gate = WriteGate()
    await gate.acquire()
    first = asyncio.create_task(gate.acquire())
    second = asyncio.create_task(gate.acquire())
    await asyncio.sleep(0)
    gate.release()  # handed to ``first``, which has not run yet...
    first.cancel()  # ...and is cancelled before it does
    await asyncio.wait_for(second, 1)
    assert first.cancelled()
    gate.release()
    await asyncio.wait_for(gate.acquire(), 1)


@pytest.fixture
async def sqlite_db(db: Database) -> Database:
    if not db.is_sqlite:
        pytest.skip("the gate is SQLite's (PostgreSQL locks rows)")
    return db


async def test_many_writers_at_once_all_commit_one_at_a_time(sqlite_db: Database):
    inside = 0
    most = 0

    async def write(user_id: int) -> None:
        nonlocal inside, most
        async with sqlite_db.transaction() as session:
            inside += 1
            most = max(most, inside)
            await touch_user(session, user_id, f"player {user_id}")
            await asyncio.sleep(0.001)  # the transaction held across awaits, as a turn's is
            await touch_user(session, user_id)
            inside -= 1

    await asyncio.gather(*(write(n) for n in range(1, 201)))
    assert most == 1
    async with sqlite_db.session() as session:
        assert await session.scalar(select(func.count()).select_from(User)) == 200


async def test_a_transaction_opened_inside_another_does_not_wait_for_itself(sqlite_db: Database):
    async def nested() -> None:
        async with sqlite_db.transaction() as outer:
            await touch_user(outer, 1, "outer")
            async with sqlite_db.transaction() as inner:
                await inner.scalar(select(func.count()).select_from(User))

    await asyncio.wait_for(nested(), 20)


async def test_a_writer_that_waits_too_long_is_a_busy_database(
    sqlite_db: Database, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(database_module, "WRITE_GATE_WAIT_S", 0.05)
    holding = asyncio.Event()
    done = asyncio.Event()

    async def hold() -> None:
        async with sqlite_db.transaction() as session:
            await touch_user(session, 1)
            holding.set()
            await done.wait()

    holder = asyncio.create_task(hold())
    await holding.wait()
    with pytest.raises(WriteGateTimeout) as waited:
        async with sqlite_db.transaction():
            pass
    assert is_busy(waited.value)
    done.set()
    await holder
    async with sqlite_db.transaction() as session:  # the gate is free again
        await touch_user(session, 2)


async def test_an_action_the_database_could_not_take_in_time_is_told_to_be_sent_again(
    env, monkeypatch: pytest.MonkeyPatch
):
    db = env.bot.services.db
    if not db.is_sqlite:
        pytest.skip("the gate is SQLite's (PostgreSQL locks rows)")
    thread = await env.start_thread()
    monkeypatch.setattr(database_module, "WRITE_GATE_WAIT_S", 0.2)
    async with db.transaction() as session:  # another writer, holding on
        await touch_user(session, 1)
        record = await env.fake.slash(env.bob, thread, "do", action="wave")
        await asyncio.sleep(0.5)
    await env.done()
    assert record.failed is None  # acknowledged at once, before the database was asked
    answer = await answered(env, record)
    assert "busy for too long" in answer.content and "Send it again" in answer.content
    assert answer.buttons == []  # no Retry: nothing was recorded to retry
    async with db.session() as session:
        recorded = await session.scalar(
            select(func.count())
            .select_from(RequestRecord)
            .where(RequestRecord.interaction_id == record.id)
        )
    assert recorded == 0
