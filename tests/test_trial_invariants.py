"""The fault trial's database check (``tests.trials.invariants``) finds what a half-written
turn or lost coordination would leave, and nothing in a whole database."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import delete, select, update
from sqlmodel import col

from engine.llm.providers.resolver import OperatorDefault
from engine.people.accounts import touch_user
from engine.platform.coordination.leases import TurnLeases
from engine.storage.coordination_models import RequestRecord
from engine.storage.models import ActionType, Adventure, Role, StoryNode, utcnow
from engine.story.actions import PlayerAction
from engine.turns.engine import TurnEngine
from tests.helpers import leave_dead_turn, new_adventure
from tests.trials.invariants import inconsistencies, stored_actions


@pytest.fixture
async def played(db, provider, fake_model) -> int:
    """An adventure with two turns, the second retried once (so it has takes)."""
    engine = TurnEngine(db, OperatorDefault(provider))
    adventure = await new_adventure(db)
    fake_model.queue("The gate creaks.", "A crow calls.", "A crow calls twice.")
    for text in ("open the gate", "listen"):
        async for _ in engine.play(adventure, PlayerAction(ActionType.DO, text)):
            pass
    async for _ in engine.retry(adventure):
        pass
    return adventure


async def head_of(session, adventure: int) -> int | None:
    return await session.scalar(
        select(col(Adventure.head_node_id)).where(col(Adventure.id) == adventure)
    )


async def test_a_whole_database_has_no_inconsistency(db, played):
    assert await inconsistencies(db, settled=True) == []
    stored = await stored_actions(db)
    assert stored["> You open the gate."] == 1 and stored["> You listen."] == 1


async def test_an_action_without_its_narration_is_found(db, played):
    async with db.session() as session, session.begin():
        head = await head_of(session, played)
        node = await session.get(StoryNode, head)
        assert node is not None and node.role == Role.NARRATOR
        await session.execute(update(Adventure).values(head_node_id=node.parent_id))
        await session.execute(delete(StoryNode).where(col(StoryNode.id) == head))
    found = await inconsistencies(db, settled=True)
    assert any("a player's action with no narration after it" in f for f in found)


async def test_a_head_elsewhere_and_a_broken_take_are_found(db, played):
    other = await new_adventure(db, channel_id=2)
    async with db.session() as session, session.begin():
        head = await head_of(session, played)
        elsewhere = await head_of(session, other)
        await session.execute(
            update(StoryNode).where(col(StoryNode.id) == head).values(text="not the live take")
        )
        await session.execute(
            update(Adventure).where(col(Adventure.id) == played).values(head_node_id=elsewhere)
        )
    found = await inconsistencies(db, settled=True)
    assert any(
        f"adventure {played}: its head {elsewhere} is not one of its nodes" in f for f in found
    )
    assert any("its text is not its live take's" in f for f in found)


async def test_a_lease_and_a_request_left_by_a_dead_turn_are_found_once_settled(db, played):
    async with db.session() as session, session.begin():
        await touch_user(session, 1, "ann")
    await leave_dead_turn(
        db,
        played,
        request_id=5,
        user_id=1,
        action={"type": "do", "text": "run"},
        clock=lambda: utcnow() - timedelta(seconds=5),
    )
    # Right after a crash that is expected, as long as the lease runs out by itself.
    assert await inconsistencies(db, settled=False) == []
    found = await inconsistencies(db, settled=True)
    assert any("turn lease held by dead-process" in f for f in found)
    assert any("request 5: still running" in f for f in found)
    # A finished request whose narration is missing.
    async with db.session() as session, session.begin():
        await session.execute(
            update(RequestRecord).values(status="done", result={"node": 9999, "version": 1})
        )
    await TurnLeases(db, holder="dead-process").reap_expired()
    found = await inconsistencies(db, settled=True)
    assert any("request 5: done, but its narration is not stored" in f for f in found)
