"""Player claims stay claims (issue 22, Deliver 6): short personal statements a player makes to
a character are kept as quoted, unverified notes for that character alone, bounded, replaced by
a correction, never facts of the world, and rewound with the action that made them. The
extractor on its own; the turns on both databases with the fake model server."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select
from sqlmodel import col

from engine.llm.providers.resolver import OperatorDefault
from engine.people.access.rules import Actor
from engine.platform.queue import AdventureQueue
from engine.storage.models import ActionType, Adventure, AdventureCard
from engine.storage.play_models import CharacterClaim
from engine.story.actions import PlayerAction
from engine.story.claims import (
    HEADER,
    MAX_CONTEXT_CHARS,
    MAX_IN_CONTEXT,
    MAX_PER_CHARACTER,
    Character,
    addressed,
    statements,
)
from engine.story.tree import StoryTree
from engine.turns.engine import TurnEngine
from engine.turns.events import TurnDone
from tests.helpers import add_users, new_adventure

BOB = 7
GWEN = Character("Gwen", ("Gwen",))
TOM = Character("Tom", ("Tom", "the smith"))


# --- the extractor --------------------------------------------------------------------------------


def test_explicit_first_person_statements_are_kept_with_their_slot():
    found = statements(
        "My favorite colour is green, and I prefer tea. Call me Ash. I'm from Dunmore! "
        "The sky is blue."  # not about the player: nothing kept
    )
    assert [(s.slot, s.text) for s in found] == [
        ("favourite colour", "My favorite colour is green"),
        ("preference", "I prefer tea"),
        ("name", "Call me Ash"),
        ("home", "I'm from Dunmore"),
    ]
    # Corrected in one breath: the last word wins the slot.
    again = statements("My favourite colour is green. No, my favourite colour is red")
    assert [(s.slot, s.text) for s in again] == [("favourite colour", "my favourite colour is red")]
    assert statements("I walk to the well.") == []
    # Two statements joined in one clause are two; "and" inside one is kept.
    joined = statements("my favourite colour is green and I prefer tea and biscuits")
    assert [(s.slot, s.text) for s in joined] == [
        ("favourite colour", "my favourite colour is green"),
        ("preference", "I prefer tea and biscuits"),
    ]


def test_only_an_action_addressed_to_a_character_counts():
    characters = [GWEN, TOM]

    def to(kind: ActionType, text: str) -> str | None:
        found = addressed(PlayerAction(kind, text, BOB, "Bob"), characters)
        return found.name if found else None

    assert to(ActionType.SAY, "Gwen, my favourite colour is green.") == "Gwen"
    assert to(ActionType.SAY, "Listen, the smith: I prefer iron.") == "Tom"
    assert to(ActionType.DO, "tell Gwen that I prefer tea") == "Gwen"
    assert to(ActionType.DO, "ask the smith whether my name is known") == "Tom"
    # Named but not spoken to, no one named, or not the player speaking: no claim.
    assert to(ActionType.DO, "think of Gwen; my favourite colour is green") is None
    assert to(ActionType.SAY, "My favourite colour is green.") is None
    assert to(ActionType.STORY, "Gwen learns my favourite colour is green.") is None


# --- in turns ----------------------------------------------------------------------------------


@pytest.fixture
def engine(db, provider) -> TurnEngine:
    return TurnEngine(db, OperatorDefault(provider))


async def with_characters(db) -> int:
    adventure_id = await new_adventure(db)
    await add_users(db, BOB)
    async with db.transaction() as session:
        for position, (title, keys) in enumerate((("Gwen", "Gwen"), ("Tom", "Tom, the smith"))):
            session.add(
                AdventureCard(
                    adventure_id=adventure_id,
                    position=position,
                    type="character",
                    title=title,
                    keys=keys,
                    entry=f"{title} lives in the village.",
                )
            )
    return adventure_id


async def say(engine, fake_model, adventure_id: int, text: str, kind=ActionType.SAY) -> TurnDone:
    fake_model.queue("The moment passes.")
    events = [e async for e in engine.play(adventure_id, PlayerAction(kind, text, BOB, "Bob"))]
    assert isinstance(events[-1], TurnDone), events[-1]
    return events[-1]


def last_prompt(fake_model) -> str:
    return "\n".join(m["content"] for m in fake_model.requests[-1]["messages"])


async def test_claims_are_quoted_for_their_character_in_the_scene_alone(db, engine, fake_model):
    adventure_id = await with_characters(db)
    await say(engine, fake_model, adventure_id, "Gwen, my favourite colour is green. I prefer tea.")
    await say(engine, fake_model, adventure_id, "the smith, my name is Ash")

    await say(engine, fake_model, adventure_id, "look at Gwen", ActionType.DO)
    prompt = last_prompt(fake_model)
    assert HEADER in prompt
    assert '- Bob told Gwen: "my favourite colour is green"' in prompt
    assert '- Bob told Gwen: "I prefer tea"' in prompt
    # Tom is in the scene too (named in the newest entries): his note is his, not Gwen's.
    assert '- Bob told Tom: "my name is Ash"' in prompt
    assert 'told Gwen: "my name is Ash"' not in prompt

    # Out of the scene (nobody names her in the newest entries), she is not mentioned.
    for _ in range(5):
        await say(engine, fake_model, adventure_id, "walk on", ActionType.DO)
    assert HEADER not in last_prompt(fake_model)


async def test_a_correction_replaces_its_slot_and_a_claim_is_never_a_fact(db, engine, fake_model):
    adventure_id = await with_characters(db)
    async with db.session() as session:
        before = await session.get(Adventure, adventure_id)
        assert before is not None
        state, cards = dict(before.world_state), await _cards(session, adventure_id)
    await say(engine, fake_model, adventure_id, "Gwen, my favourite colour is green.")
    await say(engine, fake_model, adventure_id, "Gwen, my favourite colour is blue, truly.")
    await say(engine, fake_model, adventure_id, "smile at Gwen", ActionType.DO)
    prompt = last_prompt(fake_model)
    assert '"my favourite colour is blue, truly"' not in prompt  # cut at the comma
    assert '- Bob told Gwen: "my favourite colour is blue"' in prompt
    assert "is green" not in prompt.split(HEADER)[1].split("\n\n")[0]
    async with db.session() as session:
        after = await session.get(Adventure, adventure_id)
        assert after is not None
        assert after.world_state == state and await _cards(session, adventure_id) == cards


async def _cards(session, adventure_id: int) -> list[tuple[str, str]]:
    rows = await session.execute(
        select(col(AdventureCard.title), col(AdventureCard.entry)).where(
            col(AdventureCard.adventure_id) == adventure_id
        )
    )
    return sorted(rows.all())


async def test_claims_are_bounded_per_character_and_in_the_context(db, engine, fake_model):
    adventure_id = await with_characters(db)
    things = [
        "birthday", "age", "job", "trade", "sister", "brother", "mother", "father",
        "wife", "dog", "cat", "horse", "ship", "goal",
    ]  # fmt: skip
    for thing in things:
        await say(engine, fake_model, adventure_id, f"Gwen, my {thing} is {'x' * 90}")
    async with db.session() as session:
        kept = await session.scalar(select(func.count()).select_from(CharacterClaim))
    assert kept == MAX_PER_CHARACTER  # the 13th and 14th slots were not kept
    await say(engine, fake_model, adventure_id, "wave to Gwen", ActionType.DO)
    section = last_prompt(fake_model).split(HEADER)[1].split("\n\n")[0]
    quoted = [line for line in section.splitlines() if line.startswith("- Bob told Gwen")]
    assert 0 < len(quoted) <= MAX_IN_CONTEXT
    assert sum(len(line) + 1 for line in quoted) <= MAX_CONTEXT_CHARS


async def test_claims_rewind_with_the_action_that_made_them(db, engine, fake_model):
    adventure_id = await with_characters(db)
    await say(engine, fake_model, adventure_id, "Gwen, I prefer tea")
    async with db.transaction() as session:
        adventure = await session.get(Adventure, adventure_id)
        assert adventure is not None and adventure.channel_id is not None
        channel = adventure.channel_id
    tree = StoryTree(db, AdventureQueue())
    host = Actor(user_id=BOB, user_name="Bob", server_id=None, server_name="")
    async with db.transaction() as session:
        adventure = await session.get(Adventure, adventure_id)
        assert adventure is not None
        adventure.host_id = BOB
    await tree.undo(host, channel)
    await say(engine, fake_model, adventure_id, "greet Gwen", ActionType.DO)
    assert HEADER not in last_prompt(fake_model)  # undone: never said on this line

    # A retry rewrites the narration, not the player's words: the claim stays.
    await say(engine, fake_model, adventure_id, "Gwen, I prefer coffee")
    fake_model.queue("Again the moment passes.")
    assert isinstance([e async for e in engine.retry(adventure_id)][-1], TurnDone)
    await say(engine, fake_model, adventure_id, "nod to Gwen", ActionType.DO)
    assert '- Bob told Gwen: "I prefer coffee"' in last_prompt(fake_model)


async def test_a_players_claims_go_with_their_data(db, engine, fake_model):
    """A claim is the player's own words: deleting the player (``/profile delete``, guest
    cleanup: one DELETE of their row) takes their claims with it."""
    from sqlalchemy import delete

    from engine.storage.models import User

    adventure_id = await with_characters(db)
    await say(engine, fake_model, adventure_id, "Gwen, I prefer tea")
    async with db.transaction() as session:
        await session.execute(delete(User).where(col(User.id) == BOB))
    async with db.session() as session:
        assert await session.scalar(select(func.count()).select_from(CharacterClaim)) == 0
