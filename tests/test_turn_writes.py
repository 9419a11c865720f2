"""A turn's cost in the database, counted as the bot plays it on the stand-in: three write
transactions (the request recorded with its lease claimed; the turn stored with its request's
outcome, the memories' use and the lease given up; the messages that show it), however it is
asked for. ``python -m tests.benchmarks.bench_turn`` prints the same count with the engine's
overhead per turn."""

from __future__ import annotations

import asyncio

from sqlalchemy import select
from sqlmodel import col

from engine.storage.memory_models import Memory
from tests.discord_env import DiscordEnv
from tests.fakes.openai_server import Reply
from tests.test_steering_commands import adventure_here
from tests.write_recorder import WriteTransactions

#: The most write transactions one turn may commit (issue 16): claim with its request status;
#: the store; the finish (the messages that show it) with the lease's release folded into the
#: store.
TURN_WRITES = 3


async def settled(env: DiscordEnv) -> None:
    """Until the bot is done, memory work a turn asked for included."""
    for _ in range(1000):
        await env.done()
        jobs = [j.id for j in env.bot.scheduler.get_jobs()]
        if not any(j.startswith("memory-") and j != "memory-sweep" for j in jobs) and not (
            env.bot.background._running
        ):
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the bot stayed busy")


def story_button(env: DiscordEnv, channel: int, label: str) -> int:
    for message in reversed(env.fake.messages(channel)):
        if any(b[0] == label and not b[2] for b in message.buttons):
            return message.id
    raise LookupError(label)


async def test_each_way_of_playing_a_turn_commits_three_write_transactions(env: DiscordEnv):
    thread = await env.start_thread()
    # Each person's first interaction in a place records their contact (once an hour): not a
    # turn's cost, so it is paid before counting.
    await env.fake.slash(env.alice, thread, "do", action="light the lantern")
    await settled(env)

    counter = WriteTransactions(env.bot.services.db.engine)
    ways = {
        "/do": lambda: env.fake.slash(env.alice, thread, "do", action="open the door"),
        "/say": lambda: env.fake.slash(env.alice, thread, "say", words="Who goes there?"),
        "Continue": lambda: env.fake.press(
            env.alice, story_button(env, thread, "Continue"), label="Continue"
        ),
        "Retry": lambda: env.fake.press(
            env.alice, story_button(env, thread, "Retry"), label="Retry"
        ),
        "/continue": lambda: env.fake.slash(env.alice, thread, "continue"),
    }
    costs = {}
    with counter.counting():
        for name, play in ways.items():
            mark = len(counter.committed)
            record = await play()
            await settled(env)
            assert record.failed is None, record.failed
            costs[name] = counter.since(mark)
    assert {name: len(writes) for name, writes in costs.items()} == dict.fromkeys(
        ways, TURN_WRITES
    ), "\n".join(f"{k}: {v}" for k, v in costs.items())


async def test_a_queued_turn_still_commits_three_write_transactions(env: DiscordEnv, fake_model):
    """An action that arrives while a turn is written waits in the queue; its lease is claimed
    when its turn comes, with its request's status, so it costs no more than one that did not
    wait."""
    thread = await env.start_thread()
    await env.fake.slash(env.alice, thread, "do", action="light the lantern")
    await env.fake.slash(env.bob, thread, "do", action="wave")
    await settled(env)

    # The first turn is still being written when the second comes, however loaded the machine:
    # the model holds its answer for a second (well within the bot's 3 s model timeout here).
    fake_model.queue(Reply(text="The door creaks open.", status_delay=1.0))
    counter = WriteTransactions(env.bot.services.db.engine)
    with counter.counting():
        first = await env.fake.slash(env.alice, thread, "do", action="open the door")
        second = await env.fake.slash(env.bob, thread, "do", action="follow her")
        await settled(env)
    assert first.failed is None and second.failed is None
    # discord.py handles each interaction in a task of its own, so on a loaded machine the
    # second may reach the engine first: then the first waits. One of them did.
    answers = [env.fake.message(r.original_message_id) for r in (first, second)]
    waited = [any("Queued" in text for _, text in m.edits) for m in answers]
    assert sum(waited) == 1, "neither action waited for the other's turn"
    assert len(counter.committed) == 2 * TURN_WRITES, counter.committed


async def test_the_memories_a_turn_used_are_counted_in_its_store(env: DiscordEnv):
    """With memories in the bank the context chooses some; their use is written by the
    transaction that stores the turn, not by one of its own."""
    thread = await env.start_thread()
    await env.fake.slash(env.alice, thread, "do", action="light the lantern")
    await settled(env)
    adventure_id = (await adventure_here(env, thread)).id
    assert adventure_id is not None
    db = env.bot.services.db
    texts = [
        "The ferryman demanded three copper coins for the crossing.",
        "Wolves circled the abandoned mill at night.",
    ]
    async with db.session() as session, session.begin():
        session.add_all(Memory(adventure_id=adventure_id, text=t) for t in texts)

    counter = WriteTransactions(db.engine)
    with counter.counting():
        record = await env.fake.slash(
            env.alice, thread, "do", action="pay the ferryman his copper coins"
        )
        await settled(env)
    assert record.failed is None, record.failed
    assert len(counter.writes) == TURN_WRITES, counter.writes
    [store] = [t for t in counter.writes if any("INSERT INTO story_nodes" in w for w in t)]
    assert any(w.startswith("UPDATE memories SET use_count") for w in store), store
    async with db.session() as session:
        counts = await session.execute(
            select(col(Memory.text), col(Memory.use_count)).where(
                col(Memory.adventure_id) == adventure_id
            )
        )
        assert dict(counts.tuples().all()) == {texts[0]: 1, texts[1]: 0}
