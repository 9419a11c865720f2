"""The first turn loop: actions in, streamed narration out, turns stored whole or not at all."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import select
from sqlalchemy.orm import undefer

from engine.errors import ModelError, StoryMovedOn
from engine.llm.providers.resolver import OperatorDefault
from engine.platform.events import TextDelta
from engine.storage.models import ActionType, Adventure, Role, StoryNode
from engine.story.actions import PlayerAction, format_action
from engine.story.line.read import line_tail, state_before_of
from engine.turns.engine import TurnEngine
from engine.turns.events import ActionAccepted, TurnDone, TurnFailed
from tests.fakes.openai_server import Reply
from tests.helpers import add_users, new_adventure, node_count, play


@pytest.fixture
def engine(db, provider) -> TurnEngine:
    return TurnEngine(db, OperatorDefault(provider))


def streamed_text(events) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


async def test_three_turns_are_stored_in_order_with_the_text_streamed(db, engine, fake_model):
    adventure_id = await new_adventure(db)
    replies = [
        "The door groans open onto a stair that spirals down into the dark.",
        "Your voice echoes back, twice, and the second echo is not quite yours.",
        "Far below, a lantern flickers on, as if someone heard you.",
    ]
    fake_model.queue(*replies)
    turns = [
        (ActionType.DO, "open the door"),
        (ActionType.SAY, "Hello?"),
        (ActionType.CONTINUE, ""),
    ]
    streamed = []
    for kind, text in turns:
        events = await play(engine, adventure_id, kind, text)
        assert isinstance(events[0], ActionAccepted)
        assert isinstance(events[-1], TurnDone), events[-1]
        # Streamed token by token, not in one piece.
        assert sum(isinstance(e, TextDelta) for e in events) > 3
        streamed.append(streamed_text(events))
    assert streamed == replies

    async with db.session() as session:
        adventure = await session.get(Adventure, adventure_id)
        line = await line_tail(session, adventure.head_node_id, 100)
    assert [(n.role, n.action, n.text) for n in line[1:]] == [
        (Role.PLAYER, ActionType.DO, "> You open the door."),
        (Role.NARRATOR, ActionType.CONTINUE, replies[0]),
        (Role.PLAYER, ActionType.SAY, '> You say "Hello?"'),
        (Role.NARRATOR, ActionType.CONTINUE, replies[1]),
        (Role.NARRATOR, ActionType.CONTINUE, replies[2]),
    ]
    assert [n.index for n in line] == list(range(6))
    assert adventure.version == 3

    # The model saw the story so far, with the action the AI Dungeon way, newest last.
    last_prompt = fake_model.requests[-1]["messages"][-1]["content"]
    assert last_prompt.index("> You open the door.") < last_prompt.index(replies[1])


async def test_one_turn_writes_several_players_actions_in_order_then_one_narration(
    db, engine, fake_model
):
    adventure_id = await new_adventure(db)
    async with db.session() as session:
        before = await session.get(Adventure, adventure_id)
    reply = "Mira's lantern swings wide; Gwen ducks under it, laughing."
    fake_model.queue(reply)
    await add_users(db, 11, 12)
    actions = [
        PlayerAction(ActionType.DO, "swing the lantern", author_id=11, actor="Mira"),
        PlayerAction(ActionType.SAY, "Watch it!", author_id=12, actor="Gwen"),
    ]
    events = [event async for event in engine.play_actions(adventure_id, actions)]
    assert isinstance(events[0], ActionAccepted)
    done = events[-1]
    assert isinstance(done, TurnDone), done
    assert streamed_text(events) == reply

    mira, gwen = (format_action(action) for action in actions)
    async with db.session() as session:
        adventure = await session.get(Adventure, adventure_id)
        line = await line_tail(session, adventure.head_node_id, 4)
        stored = list(
            await session.scalars(
                select(StoryNode.state_before)
                .where(StoryNode.id.in_([n.id for n in line[1:]]))
                .order_by(StoryNode.index)
            )
        )
        states = [await state_before_of(session, n.id) for n in line[1:]]
    opening, *turn = line
    assert opening.id == before.head_node_id
    assert [(n.role, n.action, n.author_id, n.text) for n in turn] == [
        (Role.PLAYER, ActionType.DO, 11, mira),
        (Role.PLAYER, ActionType.SAY, 12, gwen),
        (Role.NARRATOR, ActionType.CONTINUE, None, reply),
    ]
    # One chain below the old head, one index apart, the head on the narration.
    assert [n.parent_id for n in turn] == [opening.id, turn[0].id, turn[1].id]
    assert [n.index for n in turn] == [opening.index + 1, opening.index + 2, opening.index + 3]
    assert adventure.version == before.version + 1
    assert (done.result.action_node_id, done.result.narrator_node_id) == (turn[0].id, turn[2].id)
    # Undo goes back to before the whole turn: only its first node has a state before it, the
    # one its parent (the old head) holds; none of the turn's nodes stores a copy.
    assert states[0] is not None and states[1:] == [None, None]
    assert stored == [None, None, None]
    # The narration answered both actions, in order.
    prompt = fake_model.requests[-1]["messages"][-1]["content"]
    assert prompt.index(mira) < prompt.index(gwen)


async def test_reasoning_is_kept_apart_from_the_story(db, engine, fake_model):
    adventure_id = await new_adventure(db)
    fake_model.queue(Reply(reasoning="The player is cautious. ", text="You wait, listening."))
    events = await play(engine, adventure_id, ActionType.DO, "wait")
    done = events[-1]
    assert isinstance(done, TurnDone)
    assert done.result.text == "You wait, listening."
    assert done.result.reasoning == "The player is cautious."
    async with db.session() as session:
        node = await session.get(
            StoryNode,
            done.result.narrator_node_id,
            options=[undefer(StoryNode.reasoning), undefer(StoryNode.prompt_snapshot)],
        )
        assert node.text == "You wait, listening."
        assert node.reasoning == "The player is cautious."
        assert node.prompt_snapshot  # compressed JSON of exactly what was sent


@pytest.mark.parametrize(
    ("reply", "words"),
    [
        (Reply(fault="500"), "internal error"),
        (Reply(fault="429", retry_after=7), "Try again in 7 s"),
        (Reply(fault="401"), "refused the API key"),
        (Reply(fault="404"), "no model called"),
        (Reply(fault="timeout"), "stopped answering"),
        (Reply(fault="disconnect", text="One two three four five six seven eight."), "broke off"),
        (Reply(fault="malformed", text="One two three four five six."), "could not read"),
        (Reply(fault="empty"), "empty reply"),
        (Reply(reasoning="Hmm. " * 20, text="", finish_reason="length"), "maximum output tokens"),
    ],
    ids=lambda value: value.fault or "reasoning" if isinstance(value, Reply) else value,
)
async def test_a_fault_is_explained_and_leaves_no_half_stored_turn(
    db, engine, fake_model, reply, words
):
    adventure_id = await new_adventure(db)
    before = await node_count(db, adventure_id)
    fake_model.queue(reply)
    events = await play(engine, adventure_id, ActionType.DO, "light the lantern")
    failed = events[-1]
    assert isinstance(failed, TurnFailed), failed
    assert isinstance(failed.error, ModelError)
    assert words in failed.error.message
    assert await node_count(db, adventure_id) == before

    fake_model.queue("The lantern catches.")
    events = await play(engine, adventure_id, ActionType.DO, "light the lantern")
    assert isinstance(events[-1], TurnDone)
    assert events[-1].result.text == "The lantern catches."
    assert await node_count(db, adventure_id) == before + 2


async def test_unreachable_endpoint_is_explained(db):
    from engine.llm.providers.openai_compat import OpenAICompatibleProvider

    # Port 9 (discard) on loopback has nothing listening here; the connection is refused.
    provider = OpenAICompatibleProvider("http://127.0.0.1:9/v1", "any", timeout=2)
    adventure_id = await new_adventure(db)
    events = await play(
        TurnEngine(db, OperatorDefault(provider)), adventure_id, ActionType.DO, "look"
    )
    await provider.aclose()
    assert isinstance(events[-1], TurnFailed)
    assert "Couldn't reach the model at 127.0.0.1:9" in events[-1].error.message


async def test_a_turn_abandoned_mid_stream_stores_nothing(db, engine, fake_model):
    adventure_id = await new_adventure(db)
    before = await node_count(db, adventure_id)
    fake_model.queue(Reply(text="word " * 200, delay=0.01))
    stream = engine.play(adventure_id, PlayerAction(ActionType.DO, "run"))
    async for event in stream:
        if isinstance(event, TextDelta):
            break
    await stream.aclose()
    assert fake_model.wait_for_disconnect(timeout=5)
    assert await node_count(db, adventure_id) == before


async def test_a_story_that_moved_on_is_not_overwritten(db, engine, fake_model):
    adventure_id = await new_adventure(db)
    fake_model.queue(Reply(text="Slow words arrive one by one.", delay=0.05), "Quick.")
    stream = engine.play(adventure_id, PlayerAction(ActionType.DO, "wait"))
    assert isinstance(await anext(stream), ActionAccepted)
    assert isinstance(await anext(stream), TextDelta)
    # Someone else's turn lands while this one is still streaming.
    other = await play(engine, adventure_id, ActionType.DO, "shout")
    assert isinstance(other[-1], TurnDone)
    events = [event async for event in stream]
    assert isinstance(events[-1], TurnFailed)
    assert isinstance(events[-1].error, StoryMovedOn)
    async with db.session() as session:
        texts = list(
            await session.scalars(
                select(StoryNode.text).where(StoryNode.adventure_id == adventure_id)
            )
        )
    assert "Slow words arrive one by one." not in texts
    assert "Quick." in texts


async def test_turns_in_two_adventures_run_at_once(db, engine, fake_model):
    first = await new_adventure(db, channel_id=1)
    second = await new_adventure(db, channel_id=2)
    fake_model.default_text = "The night deepens around you."
    results = await asyncio.gather(
        play(engine, first, ActionType.DO, "sleep"), play(engine, second, ActionType.DO, "sing")
    )
    assert all(isinstance(events[-1], TurnDone) for events in results)


async def test_empty_action_is_refused_before_anything_happens(db, engine, fake_model):
    adventure_id = await new_adventure(db)
    events = await play(engine, adventure_id, ActionType.DO, "   ")
    assert len(events) == 1 and isinstance(events[0], TurnFailed)
    assert "empty" in events[0].error.message
    assert fake_model.requests == []
