"""Editing an earlier entry, in the engine: the story after it and its state stay, the memory
bank forgets what it wrote from the old words, an edit is undone only while it is live, and
the reach of an edit is bounded. The Discord side is ``tests/test_edit_entries.py``."""

from __future__ import annotations

import pytest
from sqlalchemy import select, update
from sqlmodel import col

from engine.errors import InvalidInput, NotAllowed, StoryMovedOn
from engine.llm.providers.resolver import OperatorDefault
from engine.storage.memory_models import Memory
from engine.storage.models import Adventure, StoryNode
from engine.story.tree import StoryTree, edits
from engine.turns.engine import TurnEngine
from tests.helpers import new_adventure
from tests.test_story_tree import ALICE, BOB, CHANNEL, adventure_of, host, turn


@pytest.fixture
def engine(db, provider) -> TurnEngine:
    return TurnEngine(db, OperatorDefault(provider))


@pytest.fixture
def tree(db) -> StoryTree:
    return StoryTree(db)


async def _line(db, adventure_id: int) -> list[StoryNode]:
    async with db.session() as session:
        adventure = await session.get(Adventure, adventure_id)
        assert adventure is not None
        nodes = {n.id: n for n in await session.scalars(select(StoryNode))}
    line, at = [], adventure.head_node_id
    while at is not None:
        line.append(nodes[at])
        at = nodes[at].parent_id
    return line[::-1]


async def test_an_edit_keeps_the_story_after_it_and_cuts_the_memories_of_the_old_words(
    db, engine, tree, fake_model
):
    adventure_id = await new_adventure(db)
    await host(db, adventure_id)
    fake_model.queue("One.", "Two.", "Three.")
    for text in ("one", "two", "three"):
        await turn(engine, adventure_id, text)
    line = await _line(db, adventure_id)
    assert [n.index for n in line] == [0, 1, 2, 3, 4, 5, 6]
    # The bank has summed up each turn (its action and narration, by node index).
    async with db.session() as session, session.begin():
        for start, text in ((1, "One."), (3, "Two."), (5, "Three.")):
            session.add(
                Memory(
                    adventure_id=adventure_id, text=text, source_start=start, source_end=start + 1
                )
            )
        await session.execute(
            update(Adventure).where(col(Adventure.id) == adventure_id).values(memory_cursor=3)
        )
    before = await adventure_of(db, adventure_id)

    form = await tree.turn_to_edit(ALICE, CHANNEL, 3)
    assert (form.index, form.is_action, form.is_head) == (3, True, False)
    edited = await tree.edit(
        ALICE, CHANNEL, "> You whisper two.", node_id=form.node_id, seen_version=form.version
    )
    assert (edited.index, edited.take, edited.previous_take, edited.take_count) == (3, 2, 1, 2)
    assert edited.shown_text == "> You whisper two." and edited.shown_node_ids == (form.node_id,)
    # The head, the turns after the entry and the state stay; only the version moves on.
    after = await _line(db, adventure_id)
    assert [n.id for n in after] == [n.id for n in line]
    assert [n.text for n in after[4:]] == [n.text for n in line[4:]]
    adventure = await adventure_of(db, adventure_id)
    assert adventure.head_node_id == before.head_node_id
    assert adventure.version == before.version + 1
    assert adventure.world_state == before.world_state
    # The memories from the edited entry on are gone, and the cursor is back after turn one,
    # so the cadence writes them again from the new words.
    async with db.session() as session:
        kept = list(await session.scalars(select(col(Memory.text))))
    assert kept == ["One."] and adventure.memory_cursor == 1

    # Undo edit: only while the edit is live, only by whoever may rewrite the entry.
    with pytest.raises(NotAllowed):
        await tree.undo_edit(
            BOB, CHANNEL, adventure_id=adventure_id, node_id=form.node_id, take=2, previous=1
        )
    undone = await tree.undo_edit(
        ALICE, CHANNEL, adventure_id=adventure_id, node_id=form.node_id, take=2, previous=1
    )
    assert (undone.take, undone.text) == (1, line[3].text)
    with pytest.raises(StoryMovedOn, match="changed again"):
        await tree.undo_edit(
            ALICE, CHANNEL, adventure_id=adventure_id, node_id=form.node_id, take=2, previous=1
        )


async def test_an_edit_reaches_a_bounded_way_back(db, engine, tree, fake_model, monkeypatch):
    adventure_id = await new_adventure(db)
    await host(db, adventure_id)
    fake_model.queue("One.", "Two.")
    await turn(engine, adventure_id, "one")
    await turn(engine, adventure_id, "two")
    monkeypatch.setattr(edits, "EDIT_BACK_MAX", 2)
    with pytest.raises(InvalidInput, match="3 entries back"):
        await tree.turn_to_edit(ALICE, CHANNEL, 1)
    assert (await tree.turn_to_edit(ALICE, CHANNEL, 2)).text == "One."
    # The list to choose from holds what can be edited: the newest entries within the reach.
    assert [c.index for c in await tree.entries(CHANNEL)] == [4, 3, 2]
