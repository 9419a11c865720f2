"""The story tree and scripts together: undo, redo and retry put back what scripts changed.

A script's ``state`` and the story cards it writes are part of the adventure's state, so moving
the head must rewind them exactly as it rewinds the world state.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import select

from engine.llm.providers.resolver import OperatorDefault
from engine.storage.models import ActionType, Adventure, AdventureCard, AdventureScript
from engine.story.actions import PlayerAction
from engine.story.tree import StoryTree
from engine.turns.engine import TurnEngine
from engine.turns.events import TurnDone
from tests.helpers import add_users, new_adventure
from tests.test_story_tree import ALICE, CHANNEL, host

SCRIPTS = Path(__file__).parent / "scripts"


async def learned(db, adventure_id: int) -> tuple[dict[str, str], dict]:
    """The cards the script learned (name → entry) and the script's state."""
    async with db.session() as session:
        rows = await session.scalars(
            select(AdventureCard).where(
                AdventureCard.adventure_id == adventure_id,
                AdventureCard.description == "learned by lore_output.js",
            )
        )
        adventure = await session.get(Adventure, adventure_id)
        return {card.keys: card.entry for card in rows}, adventure.script_state


async def test_undo_redo_and_retry_rewind_the_scripts_state_and_cards(db, provider, fake_model):
    engine, tree = TurnEngine(db, OperatorDefault(provider)), StoryTree(db)
    adventure_id = await new_adventure(db)
    await host(db, adventure_id)
    async with db.session() as session, session.begin():
        session.add(
            AdventureScript(
                adventure_id=adventure_id,
                name="lore",
                on_output=(SCRIPTS / "lore_output.js").read_text(),
            )
        )
    fake_model.queue(
        "You reach the Crossing. Wind tugs at the Banner.",
        "You camp by the Crossing, which is quiet now. An owl calls from the Tower.",
        "You sleep under the Banner.",
    )

    async def turn(text: str) -> None:
        await add_users(db, ALICE.user_id)
        action = PlayerAction(ActionType.DO, text, ALICE.user_id)
        events = [event async for event in engine.play(adventure_id, action)]
        assert isinstance(events[-1], TurnDone), events[-1]

    await turn("walk")
    after_first = await learned(db, adventure_id)
    assert after_first == (
        {"Crossing": "You reach the Crossing.", "Banner": "Wind tugs at the Banner."},
        {"learned": 2},
    )
    await turn("camp")
    after_second = await learned(db, adventure_id)
    assert after_second[0]["Tower"] == "An owl calls from the Tower."
    assert after_second[1] == {"learned": 3}

    await tree.undo(ALICE, CHANNEL)
    assert await learned(db, adventure_id) == after_first
    await tree.redo(ALICE, CHANNEL)
    assert await learned(db, adventure_id) == after_second

    # A retry starts from what its turn first saw: the second turn's cards never happened.
    events = [event async for event in engine.retry(adventure_id)]
    assert isinstance(events[-1], TurnDone), events[-1]
    assert await learned(db, adventure_id) == (
        {"Crossing": "You reach the Crossing.", "Banner": "You sleep under the Banner."},
        {"learned": 2},
    )
    # Paging back to the first take makes it live again, with its cards and state.
    async with db.session() as session:
        adventure = await session.get(Adventure, adventure_id)
    await tree.choose_take(
        ALICE, CHANNEL, adventure.head_node_id, 1, seen_version=adventure.version
    )
    assert await learned(db, adventure_id) == after_second
