"""The play service: actions queued in order, one turn at a time, interrupted turns retried."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from sqlalchemy import func, select

from engine.errors import PlayerDeleted
from engine.llm.providers.resolver import OperatorDefault
from engine.people.access.rules import Actor
from engine.people.profiles import Profiles
from engine.platform.coordination.leases import TurnLeases
from engine.platform.queue import AdventureQueue
from engine.play.service import PlayService
from engine.storage.coordination_models import RequestRecord
from engine.storage.models import ActionType, StoryNode, User, utcnow
from engine.story.actions import PlayerAction
from engine.turns import engine as turns_engine
from engine.turns.engine import TurnEngine
from engine.turns.events import ActionAccepted, Queued, TurnDone, TurnFailed, TurnInterrupted
from tests.fakes.openai_server import Reply
from tests.helpers import leave_dead_turn

GUILD = 500
ALICE = Actor(user_id=1, user_name="Alice", server_id=GUILD, server_name="Hearth")
BOB = Actor(user_id=2, user_name="Bob", server_id=GUILD, server_name="Hearth")


def service(db, provider, *, holder: str = "p1", clock=utcnow, cap: int = 5) -> PlayService:
    turns = TurnEngine(db, OperatorDefault(provider))
    return PlayService(
        db, turns, TurnLeases(db, holder=holder, clock=clock), AdventureQueue(cap=cap)
    )


async def collect(stream) -> list:
    return [event async for event in stream]


async def test_start_uses_the_starter_and_finds_scenarios_by_part_of_a_title(db, provider):
    play = service(db, provider)
    started = await play.start(ALICE, channel_id=10, query=None)
    assert started.title == "The Lantern Road"
    assert started.opening.startswith("Dusk settles")
    assert (await play.start(ALICE, channel_id=11, query="lantern")).title == "The Lantern Road"
    choices = await play.scenario_choices(ALICE, "LANT")
    assert choices and choices[0][1].isdigit()
    assert (await play.start(ALICE, 12, choices[0][1])).title == "The Lantern Road"
    with pytest.raises(Exception, match="No scenario matches “dragons”"):
        await play.start(ALICE, 13, "dragons")
    # Starting again in the same place ends the first adventure and begins a new one.
    again = await play.start(ALICE, channel_id=10, query=None)
    assert again.adventure_id != started.adventure_id
    assert (await play.adventure_in(10)).adventure_id == again.adventure_id


async def test_two_players_at_once_are_played_in_order(db, provider, fake_model):
    play = service(db, provider)
    await play.start(ALICE, channel_id=20, query=None)
    fake_model.queue(Reply(text="Alice's lantern flares.", delay=0.03), "Bob's shout echoes back.")
    first = play.act(ALICE, 20, PlayerAction(ActionType.DO, "raise the lantern", 1), request_id=101)
    assert isinstance(await anext(first), ActionAccepted)
    second = play.act(BOB, 20, PlayerAction(ActionType.SAY, "Hello?", 2), request_id=102)
    queued = await anext(second)
    assert queued == Queued(position=1)
    rest_first, rest_second = await asyncio.gather(collect(first), collect(second))
    assert isinstance(rest_first[-1], TurnDone)
    assert isinstance(rest_second[-1], TurnDone)
    assert rest_second[-1].result.version == rest_first[-1].result.version + 1
    # The second turn was written after the first and saw it.
    prompt = fake_model.requests[-1]["messages"][-1]["content"]
    assert prompt.index("Alice's lantern flares.") < prompt.index('> Bob says "Hello?"')


async def test_a_full_queue_says_so(db, provider, fake_model):
    play = service(db, provider, cap=1)
    await play.start(ALICE, channel_id=30, query=None)
    fake_model.queue(Reply(text="Slowly the fog lifts over the reeds.", delay=0.05))
    running = play.act(ALICE, 30, PlayerAction(ActionType.DO, "wait", 1), request_id=201)
    await anext(running)
    waiting = play.act(BOB, 30, PlayerAction(ActionType.DO, "wait too", 2), request_id=202)
    assert await anext(waiting) == Queued(position=1)
    refused = await collect(
        play.act(BOB, 30, PlayerAction(ActionType.DO, "push", 2), request_id=203)
    )
    assert isinstance(refused[-1], TurnFailed)
    assert "already waiting" in refused[-1].error.message
    await collect(running)
    await collect(waiting)


async def test_no_adventure_here_is_explained(db, provider):
    play = service(db, provider)
    events = await collect(play.act(ALICE, 99, PlayerAction(ActionType.DO, "look"), request_id=1))
    assert isinstance(events[-1], TurnFailed)
    assert "Start one with /start" in events[-1].error.message


async def test_a_turn_cut_off_by_a_dead_process_is_reported_and_retried(db, provider, fake_model):
    now = [utcnow()]
    started = await service(db, provider).start(ALICE, channel_id=40, query=None)
    await leave_dead_turn(
        db,
        started.adventure_id,
        request_id=301,
        user_id=ALICE.user_id,
        action={"type": "do", "text": "cross the bridge"},
        clock=lambda: now[0],
    )

    # While the lease is fresh, another process waits its turn rather than barging in.
    alive = service(db, provider, holder="new-process", clock=lambda: now[0])
    busy = await collect(alive.act(BOB, 40, PlayerAction(ActionType.DO, "wait", 2), request_id=300))
    assert isinstance(busy[-1], TurnFailed) and "still writing" in busy[-1].error.message

    # Once it has expired, the next action reclaims it and reports the cut-off turn.
    now[0] = utcnow() + timedelta(minutes=5)
    fake_model.queue("The bridge holds.")
    events = await collect(
        alive.act(BOB, 40, PlayerAction(ActionType.DO, "wait", 2), request_id=302)
    )
    interrupted = next(e for e in events if isinstance(e, TurnInterrupted))
    assert interrupted.request_id == 301
    assert interrupted.action_text == "cross the bridge"  # the words typed
    assert isinstance(events[-1], TurnDone)

    fake_model.queue("You cross at last.")
    retried = await collect(alive.retry_request(ALICE, 40, 301, new_request_id=303))
    assert isinstance(retried[-1], TurnDone)
    assert retried[-1].result.action_text == "> Alice crosses the bridge."
    async with db.session() as session:
        rows = await session.execute(select(RequestRecord.interaction_id, RequestRecord.status))
        statuses = dict(rows.all())
    assert statuses == {300: "failed", 301: "retried", 302: "done", 303: "done"}
    # Its Retry button plays it once.
    again = await collect(alive.retry_request(ALICE, 40, 301, new_request_id=304))
    assert isinstance(again[-1], TurnFailed) and "played again already" in again[-1].error.message


async def test_the_sweep_finds_turns_cut_off_while_nobody_played(db, provider):
    now = [utcnow()]
    play = service(db, provider, holder="sweeper", clock=lambda: now[0])
    started = await play.start(ALICE, channel_id=50, query=None)
    await leave_dead_turn(
        db,
        started.adventure_id,
        request_id=401,
        user_id=ALICE.user_id,
        action={"type": "say", "text": "Anyone?"},
        clock=lambda: now[0],
    )
    assert await play.reap_interrupted() == []
    now[0] = utcnow() + timedelta(minutes=5)
    found = await play.reap_interrupted()
    assert found == [(50, TurnInterrupted(401, "Anyone?"))]
    assert await play.reap_interrupted() == []


async def test_a_process_dying_right_after_storing_a_turn_leaves_it_done_not_interrupted(
    db, provider, fake_model, monkeypatch
):
    """The turn and its request's "done" commit together: a process killed between storing the
    turn and recording its result must not leave the request "running", which a restart would
    announce as interrupted, with a Retry that plays the action a second time."""
    dying = service(db, provider, holder="dying")
    await dying.start(ALICE, channel_id=70, query=None)
    stored, resume = asyncio.Event(), asyncio.Event()
    store_turn = turns_engine.commit

    async def then_the_kill(*args, **kwargs):
        result = await store_turn(*args, **kwargs)
        # The turn's transaction has committed; the process "dies" here, before anything else.
        stored.set()
        await resume.wait()
        return result

    monkeypatch.setattr(turns_engine, "commit", then_the_kill)
    fake_model.queue("The bridge holds.")
    turn = asyncio.ensure_future(
        collect(dying.act(ALICE, 70, PlayerAction(ActionType.DO, "cross", 1), request_id=701))
    )
    await asyncio.wait_for(stored.wait(), 10)

    # Another process, once the dead one's lease has run out, finds nothing cut off.
    later = service(db, provider, holder="after", clock=lambda: utcnow() + timedelta(minutes=5))
    assert await later.reap_interrupted() == []
    async with db.session() as session:
        request = await session.get(RequestRecord, 701)
        node = await session.scalar(
            select(StoryNode.id).where(StoryNode.text == "The bridge holds.")
        )
        assert (request.status, request.result) == ("done", {"version": 1, "node": node})
        written = await session.scalar(
            select(func.count()).where(StoryNode.text == "> Alice crosses.")
        )
        assert written == 1

    resume.set()
    assert isinstance((await turn)[-1], TurnDone)


async def test_a_player_who_deletes_their_data_gets_nothing_stored_by_any_process(
    db, provider, fake_model
):
    play = service(db, provider)  # the process writing the turns
    await play.start(ALICE, channel_id=60, query=None)
    fake_model.queue(
        Reply(text="The bridge sways under Bob, plank by plank, and holds.", delay=0.05),
        "Alice looks on.",
    )
    running = play.act(BOB, 60, PlayerAction(ActionType.DO, "cross the bridge", 2), request_id=601)
    assert isinstance(await anext(running), ActionAccepted)
    queued = play.act(BOB, 60, PlayerAction(ActionType.DO, "jump", 2), request_id=602)
    assert await anext(queued) == Queued(position=1)

    # Bob deletes his data through another process, which cannot reach this one's queue: the
    # database alone keeps his turns from storing anything.
    await Profiles(db, retention_days=30).delete(BOB)
    ran, dropped = await asyncio.gather(collect(running), collect(queued))
    assert isinstance(ran[-1], TurnFailed) and isinstance(ran[-1].error, PlayerDeleted)
    assert isinstance(dropped[-1], TurnFailed) and isinstance(dropped[-1].error, PlayerDeleted)
    assert len(fake_model.requests) == 1  # the queued action never asked the model

    after = await collect(
        play.act(ALICE, 60, PlayerAction(ActionType.DO, "look on", 1), request_id=603)
    )
    assert isinstance(after[-1], TurnDone)
    async with db.session() as session:
        assert await session.get(User, BOB.user_id) is None
        by_bob = select(func.count()).where(StoryNode.author_id == BOB.user_id)
        assert await session.scalar(by_bob) == 0
