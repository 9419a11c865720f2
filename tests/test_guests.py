"""Guest cleanup, server removal and /profile's engine (engine.people.guests,
engine.people.profiles): exactly the eligible rows go, in one statement, and nothing else."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from sqlalchemy import event, func, select

from engine.errors import NotFound
from engine.library.scenarios.start import start_adventure
from engine.people import profiles as profiles_module
from engine.people.access.rules import Actor
from engine.people.accounts import touch_server, touch_user
from engine.people.guests import remove_departed_servers, remove_idle_guests
from engine.people.profiles import CONTACT_INTERVAL_S, Profiles
from engine.storage.memory_models import Memory, SummaryVersion
from engine.storage.models import (
    Adventure,
    AdventureCard,
    Role,
    Scenario,
    Server,
    StoryNode,
    User,
    utcnow,
)
from engine.storage.party_models import PartySeat

RETENTION = timedelta(days=30)
TABLES = (User, Server, Scenario, Adventure, AdventureCard, StoryNode, Memory, SummaryVersion)

IDLE_GUEST, FRESH_GUEST, KEEPER, CREATOR, IDLE_HOST = 11, 12, 13, 14, 15
SERVER = 900


def profiles(db) -> Profiles:
    return Profiles(db, retention_days=30)


async def counts(db) -> dict[str, int]:
    async with db.session() as session:
        return {
            model.__name__: await session.scalar(select(func.count()).select_from(model))
            for model in TABLES
        }


async def seed_people(db) -> dict[str, int]:
    """Five people and what they own; returns the ids of the things made."""
    long_ago = utcnow() - RETENTION - timedelta(days=1)
    made: dict[str, int] = {}
    async with db.session() as session, session.begin():
        for user_id in (IDLE_GUEST, FRESH_GUEST, KEEPER, CREATOR, IDLE_HOST):
            await touch_user(session, user_id, f"user{user_id}")
        await touch_server(session, SERVER, "Hearth")
        for user_id in (IDLE_GUEST, KEEPER, CREATOR, IDLE_HOST):
            (await session.get(User, user_id)).last_seen_at = long_ago
        (await session.get(User, KEEPER)).keep_data = True
        starter = await session.scalar(select(Scenario.id).where(Scenario.builtin_key.is_not(None)))
        session.add(Scenario(title="Creator's own", owner_id=CREATOR))
        # A DM adventure each for the idle guest and the fresh one, with story and memory.
        for user_id in (IDLE_GUEST, FRESH_GUEST):
            adventure = await start_adventure(
                session, starter, channel_id=user_id * 10, host_id=user_id
            )
            session.add(Memory(adventure_id=adventure.id, text=f"memory of {user_id}"))
            session.add(SummaryVersion(adventure_id=adventure.id, text="so far", through=1))
            session.add(
                StoryNode(
                    adventure_id=adventure.id,
                    parent_id=adventure.head_node_id,
                    index=1,
                    role=Role.PLAYER,
                    action="do",
                    author_id=user_id,
                    text="> You wave.",
                )
            )
            made[f"adventure_{user_id}"] = adventure.id
        # A server adventure hosted by an idle guest: the server's, not theirs.
        hosted = await start_adventure(
            session, starter, channel_id=5000, server_id=SERVER, host_id=IDLE_HOST
        )
        made["server_adventure"] = hosted.id
    return made


async def test_guest_cleanup_removes_exactly_the_idle_guests_in_one_statement(db):
    made = await seed_people(db)
    before = await counts(db)
    statements: list[str] = []

    def listener(*args) -> None:
        statements.append(args[2])

    event.listen(db.engine.sync_engine, "before_cursor_execute", listener)
    try:
        removed = await remove_idle_guests(db, RETENTION)
    finally:
        event.remove(db.engine.sync_engine, "before_cursor_execute", listener)
    after = await counts(db)

    assert removed == 2  # the idle guest and the idle host; not the keeper, creator or fresh one
    assert [s for s in statements if s.lstrip().upper().startswith("DELETE")] == statements
    assert len(statements) == 1
    async with db.session() as session:
        users = set(await session.scalars(select(User.id)))
        adventures = set(await session.scalars(select(Adventure.id)))
        hosted = await session.get(Adventure, made["server_adventure"])
    assert users == {FRESH_GUEST, KEEPER, CREATOR}
    assert made[f"adventure_{IDLE_GUEST}"] not in adventures
    assert made[f"adventure_{FRESH_GUEST}"] in adventures
    assert hosted is not None and hosted.host_id is None  # the server's adventure stays
    # Exactly the idle guest's DM adventure and its rows went (the opening, the action node,
    # a memory, a summary version); the server adventure and everything else stayed.
    assert {k: before[k] - after[k] for k in before} == {
        "User": 2,
        "Server": 0,
        "Scenario": 0,
        "Adventure": 1,
        "AdventureCard": before["AdventureCard"] // 3,
        "StoryNode": 2,
        "Memory": 1,
        "SummaryVersion": 1,
    }
    assert await remove_idle_guests(db, RETENTION) == 0


async def test_a_server_left_goes_after_the_grace_period_unless_the_bot_rejoins(db):
    made = await seed_people(db)
    await profiles(db).server_left(SERVER, now=utcnow() - timedelta(days=8))
    await profiles(db).server_joined(SERVER, "Hearth")  # invited back: the removal is cancelled
    assert await remove_departed_servers(db, timedelta(days=7)) == 0
    await profiles(db).server_left(SERVER, now=utcnow() - timedelta(days=6))
    assert await remove_departed_servers(db, timedelta(days=7)) == 0  # still in its grace
    await profiles(db).server_left(SERVER, now=utcnow() - timedelta(days=8))
    assert await remove_departed_servers(db, timedelta(days=7)) == 1
    async with db.session() as session:
        assert await session.get(Adventure, made["server_adventure"]) is None
        assert await session.get(Adventure, made[f"adventure_{FRESH_GUEST}"]) is not None


async def test_every_contact_makes_a_user_row_and_a_profile_shows_it(db):
    await profiles(db).record_contact(Actor(77, "Wren", SERVER, "Hearth"))
    profile = await profiles(db).show(Actor(77), seen=False)
    assert profile.name == "Wren" and profile.guest
    assert profile.removal_after == profile.last_seen_at + timedelta(days=30)
    await profiles(db).keep(Actor(77), True)
    kept = await profiles(db).show(Actor(77), seen=False)
    assert not kept.guest and kept.removal_after is None


async def test_a_creator_is_no_guest_and_delete_takes_everything_now(db):
    await seed_people(db)
    profile = await profiles(db).show(Actor(CREATOR), seen=False)
    assert profile.scenarios == 1 and not profile.guest
    guest = await profiles(db).show(Actor(IDLE_GUEST), seen=False)
    assert (guest.own_adventures, guest.story_entries) == (1, 2)  # the opening and an action
    async with db.session() as session, session.begin():
        # They left someone else's party once: that choice is theirs too.
        theirs = await session.scalar(select(Adventure.id).where(Adventure.host_id == FRESH_GUEST))
        session.add(PartySeat(adventure_id=theirs, user_id=IDLE_GUEST, seated=False))
    await profiles(db).delete(Actor(IDLE_GUEST))
    async with db.session() as session:
        left = await session.scalar(select(PartySeat).where(PartySeat.user_id == IDLE_GUEST))
    assert left is None
    with pytest.raises(NotFound, match="stores nothing about you"):
        await profiles(db).show(Actor(IDLE_GUEST), seen=False)
    with pytest.raises(NotFound):
        await profiles(db).delete(Actor(IDLE_GUEST))


async def test_a_contact_record_still_being_written_cannot_bring_a_deleted_person_back(
    db, monkeypatch
):
    """An earlier interaction's contact record may still be on its way to the database when the
    person deletes their data: the deletion waits for it, or it would make their row again."""
    hours = [0.0]
    profiles = Profiles(db, retention_days=30, clock=lambda: hours[0] * CONTACT_INTERVAL_S)
    bob = Actor(user_id=2, user_name="Bob")
    await profiles.record_contact(bob)
    hours[0] = 1  # the next contact is due again
    slow, started = asyncio.Event(), asyncio.Event()
    write_row = profiles_module.touch_user

    async def delayed(*args, **kwargs):  # the database is busy: the record lands late
        started.set()
        await slow.wait()
        await write_row(*args, **kwargs)

    monkeypatch.setattr(profiles_module, "touch_user", delayed)
    late = asyncio.ensure_future(profiles.record_contact(bob))
    await started.wait()
    deleting = asyncio.ensure_future(profiles.delete(bob))
    await asyncio.sleep(0.05)
    slow.set()
    await asyncio.gather(late, deleting)
    async with db.session() as session:
        assert await session.get(User, bob.user_id) is None


async def test_a_contact_is_written_once_an_hour_and_the_rest_cost_no_query(db):
    """Contacts come with every interaction; only the first of each hour (for a person, in a
    place) is written, and the others are decided in memory, without a query."""
    now = [1000.0]
    profiles = Profiles(db, retention_days=30, clock=lambda: now[0])
    wren = Actor(77, "Wren", SERVER, "Hearth")
    statements: list[str] = []

    def seen(_conn, _cursor, statement, *_args) -> None:
        statements.append(statement)

    event.listen(db.engine.sync_engine, "before_cursor_execute", seen)
    try:
        assert await profiles.record_contact(wren)
        assert statements, "the first contact is written"
        statements.clear()
        now[0] += CONTACT_INTERVAL_S - 1
        assert not await profiles.record_contact(wren)
        assert not await profiles.record_contact(Actor(77, "Wren", SERVER, "Hearth"))
        assert statements == []
        assert await profiles.record_contact(Actor(77, "Wren"))  # in DMs: another place
        statements.clear()
        now[0] += 1
        assert await profiles.record_contact(wren)  # an hour on
        assert statements
    finally:
        event.remove(db.engine.sync_engine, "before_cursor_execute", seen)

    # Deleted, they are recorded again at their next contact, however soon.
    await profiles.delete(wren)
    assert await profiles.record_contact(wren)
    assert (await profiles.show(wren, seen=False)).name == "Wren"


async def test_a_contact_record_waits_for_its_interactions_answer_and_a_deletion_for_it(db):
    """The record is written after ``after`` (the interaction's answer, which no write may
    delay); a deletion asked for meanwhile waits for it rather than being undone by it."""
    hours = [0.0]
    profiles = Profiles(db, retention_days=30, clock=lambda: hours[0] * CONTACT_INTERVAL_S)
    bob = Actor(user_id=2, user_name="Bob")
    await profiles.record_contact(bob)
    hours[0] = 1
    answered = asyncio.Event()

    async def after() -> None:
        await answered.wait()

    recording = asyncio.ensure_future(profiles.record_contact(bob, after=after))
    deleting = asyncio.ensure_future(profiles.delete(bob))
    await asyncio.sleep(0.05)
    assert not recording.done() and not deleting.done()
    answered.set()
    assert await recording
    await deleting
    async with db.session() as session:
        assert await session.get(User, bob.user_id) is None
