"""Rounds in the engine (engine.story.rounds through the play service): a round closes once however
many close it, in one process or two; a round whose narration fails waits again, and its
Retry closes it with the same actions."""

from __future__ import annotations

import asyncio

from sqlalchemy import select
from sqlmodel import col

from engine.errors import StoryMovedOn
from engine.llm.providers.resolver import OperatorDefault
from engine.people.access.rules import Actor
from engine.people.profiles import Profiles
from engine.platform.coordination.leases import TurnLeases
from engine.platform.queue import AdventureQueue
from engine.play.service import PlayService
from engine.storage.models import ActionType, Adventure, Role, StoryNode, TurnMode
from engine.storage.party_models import RoundAction
from engine.story.actions import PlayerAction
from engine.turns.engine import TurnEngine
from engine.turns.events import RoundSubmitted, TurnDone, TurnFailed
from tests.fakes.openai_server import Reply

GUILD = 500
PLACE = 10
ALICE = Actor(user_id=1, user_name="Alice", server_id=GUILD, server_name="Hearth")
BOB = Actor(user_id=2, user_name="Bob", server_id=GUILD, server_name="Hearth")


def service(db, provider, *, holder: str) -> PlayService:
    turns = TurnEngine(db, OperatorDefault(provider))
    return PlayService(db, turns, TurnLeases(db, holder=holder), AdventureQueue(cap=5))


async def collect(stream) -> list:
    return [event async for event in stream]


async def round_of_two(db, play: PlayService) -> int:
    """Alice's adventure in host mode, with her action and Bob's waiting: its id."""
    started = await play.start(ALICE, channel_id=PLACE, query=None)
    async with db.transaction() as session:
        adventure = await session.get(Adventure, started.adventure_id)
        adventure.turn_mode = TurnMode.HOST
    for request, (actor, text) in enumerate(((ALICE, "listen"), (BOB, "wait")), start=1):
        action = PlayerAction(ActionType.DO, text, actor.user_id)
        events = await collect(play.act(actor, PLACE, action, request_id=request))
        # Host mode: the round waits for the host's Close, whoever has acted.
        assert [type(event) for event in events] == [RoundSubmitted]
    return started.adventure_id


async def stored(db, adventure_id: int) -> tuple[list[tuple[Role, str]], int]:
    async with db.session() as session:
        nodes = await session.scalars(
            select(StoryNode)
            .where(
                col(StoryNode.adventure_id) == adventure_id, col(StoryNode.parent_id).is_not(None)
            )
            .order_by(col(StoryNode.id))
        )
        line = [(node.role, node.text) for node in nodes]
        waiting = len((await session.scalars(select(RoundAction))).all())
    return line, waiting


async def test_a_round_closes_once_however_many_close_it(db, provider, fake_model):
    here, there = service(db, provider, holder="p1"), service(db, provider, holder="p2")
    adventure_id = await round_of_two(db, here)
    fake_model.queue("Both are answered.", "A second narration nobody should see.")
    # Two closers at once, in two processes: one takes the round, the other takes nothing.
    outcomes = await asyncio.gather(
        collect(here.close_round(ALICE, PLACE, request_id=11)),
        collect(there.close_round(ALICE, PLACE, request_id=12)),
    )
    done = [events for events in outcomes if isinstance(events[-1], TurnDone)]
    refused = [events for events in outcomes if isinstance(events[-1], TurnFailed)]
    assert len(done) == 1 and len(refused) == 1
    assert isinstance(refused[0][-1].error, StoryMovedOn)
    assert len(fake_model.requests) == 1
    line, waiting = await stored(db, adventure_id)
    assert line == [
        (Role.PLAYER, "> Alice listens."),
        (Role.PLAYER, "> Bob waits."),
        (Role.NARRATOR, "Both are answered."),
    ]
    assert waiting == 0
    # Nothing is left to close.
    again = await collect(here.close_round(ALICE, PLACE, request_id=13))
    assert isinstance(again[-1], TurnFailed) and "Nobody has acted" in again[-1].error.message


async def test_a_round_whose_narration_fails_waits_and_its_retry_closes_it(
    db, provider, fake_model
):
    play = service(db, provider, holder="p1")
    adventure_id = await round_of_two(db, play)
    fake_model.queue(Reply(fault="500"), "Answered at last.")
    failed = await collect(play.close_round(ALICE, PLACE, request_id=21))
    assert isinstance(failed[-1], TurnFailed)
    line, waiting = await stored(db, adventure_id)
    assert line == [] and waiting == 2
    # The failure's Retry closes the round again, with the same actions in the same order.
    retried = await collect(play.retry_request(ALICE, PLACE, 21, new_request_id=22))
    assert isinstance(retried[-1], TurnDone)
    line, waiting = await stored(db, adventure_id)
    assert line == [
        (Role.PLAYER, "> Alice listens."),
        (Role.PLAYER, "> Bob waits."),
        (Role.NARRATOR, "Answered at last."),
    ]
    assert waiting == 0


async def test_a_player_who_deletes_their_data_leaves_the_round(db, provider, fake_model):
    play = service(db, provider, holder="p1")
    adventure_id = await round_of_two(db, play)
    await Profiles(db, retention_days=30).delete(BOB)
    fake_model.queue("Alice alone is answered.")
    closed = await collect(play.close_round(ALICE, PLACE, request_id=31))
    assert isinstance(closed[-1], TurnDone)
    line, _ = await stored(db, adventure_id)
    assert line == [(Role.PLAYER, "> Alice listens."), (Role.NARRATOR, "Alice alone is answered.")]
