"""The memory bank: its cadence, the held-back newest action, cut-backs, killed jobs, races,
and capacity, on the real database with the fake model over HTTP."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import func, select, update

from engine.llm.providers.resolver import OperatorDefault
from engine.people.access.rules import Actor
from engine.people.accounts import touch_server, touch_user
from engine.people.limits import LimitRules, UsageLimits
from engine.platform.coordination.jobs import JobLeases
from engine.storage.database import Database
from engine.storage.memory_models import Memory, MemoryOrigin, SummaryVersion
from engine.storage.models import ActionType, Adventure, Server, StoryNode
from engine.story.line.positions import LinePositions, line_positions, story_cut_back
from engine.story.memory.bank import MemoryBank, enforce_capacity
from engine.story.memory.cadence import MEMORY_CADENCE, SUMMARY_CADENCE, Cadence
from engine.story.memory.prompts import MEMORY_MAX_CHARS, clean_memory, clean_summary
from engine.story.memory.writer import MemoryWriter
from engine.turns.engine import TurnEngine
from tests.fakes.openai_server import Reply
from tests.helpers import new_adventure, play

# --- the cadence, as arithmetic ------------------------------------------------------------------


def due_points(cadence: Cadence, upto: int) -> list[tuple[int, tuple[int, int]]]:
    """At which story lengths work is due, and for which stretch, when each write succeeds."""
    cursor, points = 0, []
    for actions in range(1, upto + 1):
        stretch = cadence.due(actions, cursor)
        if stretch:
            points.append((actions, stretch))
            cursor = stretch[1]
    return points


def test_a_memory_every_6_actions_from_the_12th_and_a_summary_every_15():
    assert due_points(MEMORY_CADENCE, 31) == [
        (12, (0, 11)),
        (18, (11, 17)),
        (24, (17, 23)),
        (30, (23, 29)),
    ]
    assert due_points(SUMMARY_CADENCE, 46) == [(15, (0, 14)), (30, (14, 29)), (45, (29, 44))]


def test_the_newest_action_is_never_in_a_stretch_and_a_failure_is_due_again():
    for actions in range(1, 100):
        for cursor in range(0, actions):
            stretch = MEMORY_CADENCE.due(actions, cursor)
            if stretch:
                assert stretch[1] <= actions - 1
    # The write at 12 failed (cursor still 0): the cadence asks again at 13, same stretch.
    assert MEMORY_CADENCE.due(13, 0) == (0, 11)


def test_positions_and_indexes_translate_one_way_and_back():
    # Opening at 0; /do turns take two indexes, the /continue at position 3 one.
    line = LinePositions(indexes=(2, 4, 5, 7), ids=(12, 14, 15, 17))
    assert line.count == 4
    assert [line.index_of(p) for p in range(5)] == [0, 2, 4, 5, 7]
    assert [line.position_of(i) for i in range(8)] == [0, 0, 1, 1, 2, 3, 3, 4]
    assert line.sources(0, 2) == (1, 4)  # the first action's node through the second reply
    assert line.sources(2, 4) == (5, 7)
    with pytest.raises(ValueError):
        line.index_of(5)


# --- the writer on real turns --------------------------------------------------------------------


def turn_text(n: int) -> str:
    return f"Narration {n}: the heron watched."


async def play_turns(engine: TurnEngine, fake_model, adventure_id: int, start: int, end: int):
    for n in range(start, end + 1):
        fake_model.queue(turn_text(n))
        events = await play(engine, adventure_id, ActionType.DO, f"step forward ({n})")
        assert type(events[-1]).__name__ == "TurnDone", events[-1]


async def memories(db, adventure_id: int, *, origin=MemoryOrigin.STORY) -> list[Memory]:
    async with db.session() as session:
        rows = await session.scalars(
            select(Memory)
            .where(Memory.adventure_id == adventure_id, Memory.origin == origin)
            .order_by(Memory.source_end)
        )
        return list(rows)


async def cursors(db, adventure_id: int) -> tuple[int, int]:
    async with db.session() as session:
        adventure = await session.get(Adventure, adventure_id)
        return adventure.memory_cursor, adventure.summary_cursor


async def positions_of(db, adventure_id: int) -> LinePositions:
    async with db.session() as session:
        adventure = await session.get(Adventure, adventure_id)
        return await line_positions(session, adventure.head_node_id)


def last_prompt(fake_model) -> str:
    return fake_model.requests[-1]["messages"][-1]["content"]


async def memory_call_made(fake_model) -> None:
    """Until the writer's call for a memory has reached the model (it is now in flight)."""
    async with asyncio.timeout(5):
        while "Passage:" not in last_prompt(fake_model):  # noqa: ASYNC110 - polling a thread
            await asyncio.sleep(0.01)


@pytest.fixture
def engine(db, provider) -> TurnEngine:
    return TurnEngine(db, OperatorDefault(provider))


@pytest.fixture
def writer(db, provider) -> MemoryWriter:
    return MemoryWriter(db, OperatorDefault(provider))


async def test_first_memory_at_12_then_every_6_and_the_summary_at_15(
    db, engine, writer, fake_model
):
    adventure = await new_adventure(db)
    await play_turns(engine, fake_model, adventure, 1, 11)
    assert (await writer.catch_up(adventure)).memories == 0
    assert "Passage:" not in last_prompt(fake_model)  # no model call for a memory yet

    await play_turns(engine, fake_model, adventure, 12, 12)
    fake_model.queue("Mira followed the heron along the river for eleven days.")
    report = await writer.catch_up(adventure)
    assert report.memories == 1 and report.summaries == 0
    passage = last_prompt(fake_model)
    # Actions 1 to 11 are in the memory's passage; the newest (12) is held back.
    assert turn_text(1) in passage and turn_text(11) in passage
    assert turn_text(12) not in passage and "(12)" not in passage
    [first] = await memories(db, adventure)
    line = await positions_of(db, adventure)
    assert (first.source_start, first.source_end) == (1, line.index_of(11))
    assert await cursors(db, adventure) == (11, 0)

    await play_turns(engine, fake_model, adventure, 13, 14)
    assert (await writer.catch_up(adventure)).memories == 0
    await play_turns(engine, fake_model, adventure, 15, 15)
    fake_model.queue("Mira followed a heron along the river for many days.")
    report = await writer.catch_up(adventure)
    assert (report.memories, report.summaries) == (0, 1)
    assert "Mira followed the heron" in last_prompt(fake_model)  # the memory folded in
    async with db.session() as session:
        summary = (await session.get(Adventure, adventure)).story_summary
        versions = await session.scalar(select(func.count()).select_from(SummaryVersion))
    assert summary == "Mira followed a heron along the river for many days."
    assert versions == 1
    assert await cursors(db, adventure) == (11, 14)

    await play_turns(engine, fake_model, adventure, 16, 17)
    assert (await writer.catch_up(adventure)).memories == 0
    await play_turns(engine, fake_model, adventure, 18, 18)
    fake_model.queue("The heron led Mira to a drowned bell.")
    assert (await writer.catch_up(adventure)).memories == 1
    second = (await memories(db, adventure))[-1]
    line = await positions_of(db, adventure)
    assert (second.source_start, second.source_end) == (line.index_of(11) + 1, line.index_of(17))
    assert turn_text(12) in last_prompt(fake_model) and turn_text(18) not in last_prompt(fake_model)


async def test_a_failed_model_call_moves_no_cursor_and_the_cadence_retries(
    db, engine, writer, fake_model
):
    adventure = await new_adventure(db)
    await play_turns(engine, fake_model, adventure, 1, 12)
    fake_model.queue(Reply(fault="500"))
    assert (await writer.catch_up(adventure)).memories == 0
    assert await memories(db, adventure) == []
    assert await cursors(db, adventure) == (0, 0)
    await play_turns(engine, fake_model, adventure, 13, 13)
    fake_model.queue("Mira crossed the ford.")
    assert (await writer.catch_up(adventure)).memories == 1
    [memory] = await memories(db, adventure)
    # The same stretch as at 12: the newest (13) is held back, 12 is now settled.
    assert memory.source_end == (await positions_of(db, adventure)).index_of(11)


async def cut_back_to(db, adventure_id: int, position: int) -> None:
    """What undo does: move the head back to the reply ending ``position``, and cut back."""
    line = await positions_of(db, adventure_id)
    async with db.session() as session, session.begin():
        node_id = line.id_at(position)
        await session.execute(
            update(Adventure)
            .where(Adventure.id == adventure_id)
            .values(head_node_id=node_id, version=Adventure.version + 1)
        )
        await story_cut_back(session, adventure_id, line.index_of(position))


async def test_a_cut_back_removes_memories_of_discarded_text_and_brings_the_cursors_back(
    db, engine, writer, fake_model
):
    adventure = await new_adventure(db)
    await play_turns(engine, fake_model, adventure, 1, 15)
    fake_model.queue("Mira lost her lantern in the reeds.", "Mira searched the reeds.")
    report = await writer.catch_up(adventure)
    assert (report.memories, report.summaries) == (1, 1)

    await cut_back_to(db, adventure, 9)  # undo back to action 9: the memory covered 1–11
    assert await memories(db, adventure) == []
    assert await cursors(db, adventure) == (0, 0)
    async with db.session() as session:
        assert (await session.get(Adventure, adventure)).story_summary == ""

    # Played again differently: the memory written now describes the new text only.
    for n in range(10, 13):
        fake_model.queue(f"Another way {n}: the ferryman sang.")
        await play(engine, adventure, ActionType.DO, f"go another way ({n})")
    fake_model.queue("Mira heard the ferryman sing.")
    assert (await writer.catch_up(adventure)).memories == 1
    passage = last_prompt(fake_model)
    assert "Another way 10" in passage and "Another way 11" in passage
    assert turn_text(10) not in passage and turn_text(11) not in passage
    [memory] = await memories(db, adventure)
    assert memory.text == "Mira heard the ferryman sing."


async def test_a_cut_back_keeps_earlier_memories_players_own_and_the_older_summary(
    db, engine, writer, fake_model
):
    adventure = await new_adventure(db)
    await play_turns(engine, fake_model, adventure, 1, 15)
    fake_model.queue("Fact 1.", "Summary 1.")
    report = await writer.catch_up(adventure)
    assert (report.memories, report.summaries) == (1, 1)  # memory through 11, summary 14
    await play_turns(engine, fake_model, adventure, 16, 30)
    fake_model.queue("Fact 2.", "Fact 3.", "Fact 4.", "Summary 2.")
    report = await writer.catch_up(adventure)
    assert (report.memories, report.summaries) == (3, 1)  # through 17, 23, 29; summary 29
    async with db.session() as session, session.begin():
        session.add(Memory(adventure_id=adventure, text="The bell is cursed.", origin="player"))
    await cut_back_to(db, adventure, 20)
    kept = await memories(db, adventure)
    line = await positions_of(db, adventure)
    assert [line.position_of(m.source_end) for m in kept] == [11, 17]
    assert len(await memories(db, adventure, origin=MemoryOrigin.PLAYER)) == 1
    # The memory cursor comes back to the newest memory kept; the summary to the one through 14.
    assert await cursors(db, adventure) == (17, 14)
    async with db.session() as session:
        versions = (await session.scalars(select(SummaryVersion.through))).all()
        summary = (await session.get(Adventure, adventure)).story_summary
    assert versions == [14]
    assert summary == "Summary 1."


async def test_a_retry_while_the_memory_is_being_written_stores_nothing_stale(
    db, engine, writer, fake_model
):
    adventure = await new_adventure(db)
    await play_turns(engine, fake_model, adventure, 1, 12)
    fake_model.queue(Reply(text="Mira kept the lantern lit.", delay=0.05))
    job = asyncio.create_task(writer.catch_up(adventure))
    await memory_call_made(fake_model)
    await cut_back_to(db, adventure, 10)  # the story loses turns 11 and 12 meanwhile
    report = await job
    assert report.memories == 0
    assert await memories(db, adventure) == []
    assert await cursors(db, adventure) == (0, 0)


async def test_a_job_killed_midway_is_caught_up_by_the_sweep_once(db, engine, writer, fake_model):
    adventure = await new_adventure(db)
    await play_turns(engine, fake_model, adventure, 1, 12)
    fake_model.queue(Reply(text="This memory is never stored.", delay=0.2))
    job = asyncio.create_task(writer.catch_up(adventure))
    await memory_call_made(fake_model)
    job.cancel()
    with pytest.raises(asyncio.CancelledError):
        await job
    assert await memories(db, adventure) == []

    restarted = MemoryWriter(db, writer.providers)  # a new process: only the database is left
    assert await restarted.lagging() == [adventure]
    fake_model.queue("Mira reached the drowned bell.")
    reports = await restarted.sweep()
    assert [r.memories for r in reports] == [1]
    assert await restarted.sweep() == []
    assert [m.text for m in await memories(db, adventure)] == ["Mira reached the drowned bell."]


async def test_two_writers_at_once_write_one_memory(db, engine, provider, fake_model):
    adventure = await new_adventure(db)
    await play_turns(engine, fake_model, adventure, 1, 12)
    fake_model.queue(
        Reply(text="First process's memory.", delay=0.05),
        Reply(text="Second process's memory.", delay=0.05),
    )
    providers = OperatorDefault(provider)
    # As two processes: engines and connection pools of their own, their own lease holders.
    other = Database(db.url)
    try:
        one = MemoryWriter(db, providers, jobs=JobLeases(db, holder="one"))
        two = MemoryWriter(other, providers, jobs=JobLeases(other, holder="two"))
        reports = await asyncio.gather(one.catch_up(adventure), two.catch_up(adventure))
    finally:
        await other.dispose()
    assert sorted(r.memories for r in reports) == [0, 1]
    assert len(await memories(db, adventure)) == 1
    # And one model call spent on it: the second found the job leased, not the work done.
    memory_calls = [r for r in fake_model.requests if "Passage:" in r["messages"][-1]["content"]]
    assert len(memory_calls) == 1


async def test_in_one_process_a_second_call_waits_for_the_running_one(
    db, engine, writer, fake_model
):
    adventure = await new_adventure(db)
    await play_turns(engine, fake_model, adventure, 1, 12)
    fake_model.queue(Reply(text="Mira rang the bell.", delay=0.05))
    first = asyncio.create_task(writer.catch_up(adventure))
    await asyncio.sleep(0.01)
    second = await writer.catch_up(adventure)
    assert second.skipped == "already running"
    assert (await first).memories == 1
    chat_calls = [r for r in fake_model.requests if "Passage:" in r["messages"][-1]["content"]]
    assert len(chat_calls) == 1


async def test_without_background_model_use_no_model_call_is_made(db, engine, provider, fake_model):
    adventure = await new_adventure(db)
    await play_turns(engine, fake_model, adventure, 1, 12)
    calls = len(fake_model.requests)
    report = await MemoryWriter(db, OperatorDefault(provider, background=False)).catch_up(adventure)
    assert report.memories == 0
    assert report.skipped == "the operator does not allow background use of the model"
    assert len(fake_model.requests) == calls


# --- capacity ------------------------------------------------------------------------------------


async def test_over_capacity_the_least_used_unpinned_are_forgotten_not_deleted(db):
    adventure = await new_adventure(db)
    async with db.session() as session, session.begin():
        session.add_all(
            [
                Memory(adventure_id=adventure, text="never used, pinned", pinned=True),
                Memory(adventure_id=adventure, text="never used"),
                Memory(adventure_id=adventure, text="used once", use_count=1),
                Memory(adventure_id=adventure, text="used twice", use_count=2),
            ]
        )
    async with db.session() as session, session.begin():
        assert await enforce_capacity(session, adventure, 2) == 2
    async with db.session() as session:
        rows = (await session.execute(select(Memory.text, Memory.forgotten))).all()
    assert dict(rows) == {
        "never used, pinned": False,
        "never used": True,
        "used once": True,
        "used twice": False,
    }


async def test_the_memory_job_enforces_capacity(db, engine, provider, fake_model):
    adventure = await new_adventure(db)
    async with db.session() as session, session.begin():
        session.add(Memory(adventure_id=adventure, text="An old fact nobody used."))
    await play_turns(engine, fake_model, adventure, 1, 12)
    fake_model.queue("A new fact.")
    assert (
        await MemoryWriter(db, OperatorDefault(provider), capacity=1).catch_up(adventure)
    ).memories == 1
    async with db.session() as session:
        rows = dict((await session.execute(select(Memory.text, Memory.forgotten))).all())
    assert rows == {"An old fact nobody used.": True, "A new fact.": False}


async def test_head_index_translation_counts_continues_as_one_entry(db, engine, writer, fake_model):
    adventure = await new_adventure(db)
    for n in range(1, 13):
        fake_model.queue(turn_text(n))
        kind = ActionType.CONTINUE if n % 3 == 0 else ActionType.DO
        await play(engine, adventure, kind, "" if kind == ActionType.CONTINUE else f"act {n}")
    line = await positions_of(db, adventure)
    assert line.count == 12
    async with db.session() as session:
        head = await session.get(StoryNode, line.ids[-1])
    assert head.index == 12 + 8  # eight /do turns took two entries each
    fake_model.queue("Mira walked on.")
    assert (await writer.catch_up(adventure)).memories == 1
    [memory] = await memories(db, adventure)
    assert memory.source_end == line.index_of(11)


async def test_a_server_that_refuses_background_model_use_gets_no_model_call(
    db, engine, writer, fake_model
):
    adventure = await new_adventure(db)
    async with db.session() as session, session.begin():
        await touch_server(session, 42, "Quiet")
        (await session.get(Server, 42)).allow_background_model_use = False
        (await session.get(Adventure, adventure)).server_id = 42
    await play_turns(engine, fake_model, adventure, 1, 12)
    calls = len(fake_model.requests)
    report = await writer.catch_up(adventure)
    assert report.skipped == "the server does not allow background use of the model"
    assert len(fake_model.requests) == calls and await memories(db, adventure) == []


async def test_the_sweep_leaves_alone_what_has_nothing_due(db, engine, writer, fake_model):
    quiet, busy = await new_adventure(db, channel_id=1), await new_adventure(db, channel_id=2)
    await play_turns(engine, fake_model, quiet, 1, 11)  # one short of the first memory
    await play_turns(engine, fake_model, busy, 1, 12)
    assert await writer.lagging() == [busy]
    fake_model.queue("Busy things happened.")
    assert [(r.adventure_id, r.memories) for r in await writer.sweep()] == [(busy, 1)]
    assert await writer.lagging() == []


async def test_a_players_memory_over_capacity_stays_and_an_older_one_is_forgotten(db):
    adventure = await new_adventure(db, channel_id=77)
    async with db.session() as session, session.begin():
        await touch_user(session, 1, "Wren")
        (await session.get(Adventure, adventure)).host_id = 1  # the DM's player
        session.add(Memory(adventure_id=adventure, text="Older, never used."))
    view = await MemoryBank(db, capacity=1).add(77, Actor(user_id=1), "The ford is cursed.")
    async with db.session() as session:
        rows = dict((await session.execute(select(Memory.text, Memory.forgotten))).all())
    assert rows == {"Older, never used.": True, "The ford is cursed.": False}
    assert view.origin == "player" and view.actions is None


def test_a_rambling_reply_becomes_a_memory_of_two_sentences():
    reply = '  Memory: "Mira found the key.  She hid it in the chapel. Then she   slept. More."\n'
    assert clean_memory(reply) == "Mira found the key. She hid it in the chapel."
    long = "Mira walked " + "very " * 200 + "far."
    assert len(clean_memory(long)) <= MEMORY_MAX_CHARS + 1
    assert clean_memory("   ") == ""
    assert clean_summary("New summary:\nMira left.  \n") == "Mira left."


async def test_a_cut_back_nobody_reported_is_healed_by_the_next_job(db, engine, writer, fake_model):
    adventure = await new_adventure(db)
    await play_turns(engine, fake_model, adventure, 1, 12)
    fake_model.queue("Mira reached the mill.")
    assert (await writer.catch_up(adventure)).memories == 1
    line = await positions_of(db, adventure)
    async with db.session() as session, session.begin():  # an undo that forgot story_cut_back
        await session.execute(
            update(Adventure).where(Adventure.id == adventure).values(head_node_id=line.id_at(9))
        )
    await writer.catch_up(adventure)
    assert await memories(db, adventure) == []
    assert await cursors(db, adventure) == (0, 0)


async def test_memory_work_on_the_operators_model_is_counted_and_waits_for_the_budget(
    db, engine, provider, fake_model
):
    """Work the players did not ask for spends the operator's model too: each call counted
    against the host's day (engine.story.background_spend); once the day's tokens are used,
    it waits for the next day."""
    adventure = await new_adventure(db)
    async with db.transaction() as session:
        await touch_user(session, 7, "host")
        row = await session.get(Adventure, adventure)
        row.host_id = 7
    await play_turns(engine, fake_model, adventure, 1, 12)
    limits = UsageLimits(db, LimitRules(user_tokens_per_day=1_000_000))
    fake_model.queue(Reply(text="Mira walked on.", prompt_tokens=700, completion_tokens=40))
    report = await MemoryWriter(db, OperatorDefault(provider), limits=limits).catch_up(adventure)
    assert report.memories == 1
    assert (await limits.usage(Actor(user_id=7, user_name="host"))).user_tokens == 740

    spent = UsageLimits(db, LimitRules(user_tokens_per_day=700))
    await play_turns(engine, fake_model, adventure, 13, 18)
    calls = len(fake_model.requests)
    report = await MemoryWriter(db, OperatorDefault(provider), limits=spent).catch_up(adventure)
    assert report.skipped == "the day's tokens on the operator's model are used"
    assert len(fake_model.requests) == calls
