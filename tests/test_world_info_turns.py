"""World-info options in play: stored with a card, read by a real turn, kept by snapshots.

A turn runs through the turn engine against the fake model server and a migrated database;
the prompt the model received and the node's Insights report say what the options did.
"""

from __future__ import annotations

import pytest
from sqlalchemy import select
from sqlalchemy.orm import undefer
from sqlmodel import col

from engine.llm.providers.resolver import OperatorDefault
from engine.prompt.cards import load_context_cards
from engine.storage.models import ActionType, AdventureCard, StoryNode
from engine.story.snapshots import capture, load_cards, restore
from engine.story.tree import StoryTree
from engine.turns.engine import TurnEngine
from engine.turns.events import TurnDone
from tests.discord_env import answered
from tests.helpers import new_adventure, play
from tests.test_story_tree import ALICE, host, turn

GUARD = {"secondary": ["tower"], "logic": "and_any", "order": 5}


@pytest.fixture
def engine(db, provider) -> TurnEngine:
    return TurnEngine(db, OperatorDefault(provider))


async def add_card(db, adventure_id: int, title: str, keys: str, entry: str, lore: dict) -> int:
    async with db.session() as session, session.begin():
        card = AdventureCard(
            adventure_id=adventure_id, title=title, keys=keys, entry=entry, lore=lore
        )
        session.add(card)
        await session.flush()
        assert card.id is not None
        return card.id


async def cards_report(db, node_id: int) -> dict:
    async with db.session() as session:
        node = await session.get(
            StoryNode, node_id, options=[undefer(col(StoryNode.context_report))]
        )
        assert node is not None and node.context_report is not None
        (section,) = [s for s in node.context_report["sections"] if s["key"] == "story_cards"]
        return {item["label"]: item for item in section["items"]}


async def test_a_turn_applies_secondary_keys_and_insights_says_why(db, engine, fake_model):
    adventure_id = await new_adventure(db)
    await add_card(db, adventure_id, "Watch", "guard", "The guard watches the tower.", GUARD)
    await add_card(
        db, adventure_id, "Gate", "guard", "The guard sleeps at the gate.", {"disabled": True}
    )
    fake_model.queue("The guard nods.", "The guard points at the tower.")

    first = await play(engine, adventure_id, ActionType.DO, "greet the guard")
    assert isinstance(first[-1], TurnDone)
    sent = "\n".join(m["content"] for m in fake_model.requests[-1]["messages"])
    assert "watches the tower" not in sent  # a primary key without its secondary one
    assert "sleeps at the gate" not in sent  # disabled

    second = await play(engine, adventure_id, ActionType.DO, "climb the tower, guard")
    done = second[-1]
    assert isinstance(done, TurnDone)
    sent = "\n".join(m["content"] for m in fake_model.requests[-1]["messages"])
    assert "The guard watches the tower." in sent
    report = await cards_report(db, done.result.narrator_node_id)
    assert report["Watch"]["reason"] == "trigger: guard, fired by secondary key tower (AND ANY)"
    assert "Gate" not in report


async def test_options_are_stored_read_and_restored_with_the_cards(db):
    adventure_id = await new_adventure(db)
    card_id = await add_card(db, adventure_id, "Watch", "guard", "The guard.", GUARD)
    async with db.session() as session, session.begin():
        context = {card.id: card for card in await load_context_cards(session, adventure_id)}
        assert context[card_id].lore.secondary == ("tower",)
        assert context[card_id].lore.order == 5
        before = capture({}, {}, await load_cards(session, adventure_id))
        row = await session.get(AdventureCard, card_id)
        assert row is not None
        row.lore = {"probability": 10}
    async with db.session() as session, session.begin():
        await restore(session, adventure_id, before)  # an undo, as the turn engine does it
    async with db.session() as session:
        rows = await session.scalars(
            select(AdventureCard).where(col(AdventureCard.adventure_id) == adventure_id)
        )
        restored = {row.title: row.lore for row in rows}
    assert restored["Watch"] == GUARD
    # A snapshot from before options (or a file's, with junk in them) restores without them.
    old = {**before, "cards": [{**c, "lore": "junk"} for c in before["cards"]]}
    async with db.session() as session, session.begin():
        await restore(session, adventure_id, old)
    async with db.session() as session:
        lores = await session.scalars(
            select(col(AdventureCard.lore)).where(col(AdventureCard.adventure_id) == adventure_id)
        )
        assert set(map(str, lores)) == {"{}"}


async def test_card_list_shows_a_cards_world_info_options(env):
    thread = await env.start_thread()
    ref = await env.bot.services.play.adventure_in(thread)
    await add_card(env.bot.services.db, ref.adventure_id, "Watch", "guard", "The guard.", GUARD)
    listing = await env.fake.slash(env.alice, thread, "card list")
    (embed,) = (await answered(env, listing)).embeds
    # Position 0 (add_card's default) lists it among the scenario's cards by id.
    assert (
        "**2. Watch** · class\nkeys: guard\n"
        "world info: secondary keys (AND ANY): tower; order 5\n> The guard."
    ) in embed["description"]


async def test_a_sticky_card_stays_in_on_the_next_turn_and_undo_forgets_it(db, engine, fake_model):
    adventure_id = await new_adventure(db)
    await host(db, adventure_id)
    await add_card(
        db, adventure_id, "Bell", "bell", "The bell is cracked.", {"sticky": 2, "scan_depth": 0}
    )
    fake_model.queue("It tolls.", "The road is long.")
    first = await turn(engine, adventure_id, "ring the bell")
    second = await turn(engine, adventure_id, "walk on")
    sent = "\n".join(m["content"] for m in fake_model.requests[-1]["messages"])
    assert "The bell is cracked." in sent  # no "bell" in the scan: it stayed in
    report = await cards_report(db, second.narrator_node_id)
    assert first.action_node_id is not None
    async with db.session() as session:
        node = await session.get(StoryNode, first.action_node_id)
        assert node is not None
    assert report["Bell"]["reason"] == f"sticky: stays in through entry {node.index + 2}"
    # Undo both turns and walk on: this line never rang the bell, so nothing is sticky.
    tree = StoryTree(db)
    await tree.undo(ALICE, 1)
    await tree.undo(ALICE, 1)
    fake_model.queue("You walk.")
    again = await turn(engine, adventure_id, "walk on")
    assert "Bell" not in await cards_report(db, again.narrator_node_id)


WEATHER = {"group": "weather", "group_scoring": True}


async def test_group_scoring_chooses_in_a_turn_and_insights_says_so(db, engine, fake_model):
    # SillyTavern's useGroupScoring (world-info.js, filterGroupsByScoring): of an inclusion
    # group's entries, those whose keys matched most stay candidates; Light's weight would
    # otherwise win the draw almost every time.
    adventure_id = await new_adventure(db)
    await add_card(db, adventure_id, "Heavy", "rain, flood", "Heavy rain floods the road.", WEATHER)
    await add_card(
        db, adventure_id, "Light", "rain", "A light rain falls.", WEATHER | {"group_weight": 9999}
    )
    fake_model.queue("You wade on.")
    done = (await play(engine, adventure_id, ActionType.DO, "wade through the rain and flood"))[-1]
    assert isinstance(done, TurnDone)
    sent = "\n".join(m["content"] for m in fake_model.requests[-1]["messages"])
    assert "Heavy rain floods the road." in sent and "A light rain falls." not in sent
    report = await cards_report(db, done.result.narrator_node_id)
    assert report["Light"]["reason"].endswith(
        "inclusion group weather: Heavy chosen (most keys matched)"
    )


async def test_card_list_says_a_group_is_scored(env):
    thread = await env.start_thread()
    ref = await env.bot.services.play.adventure_in(thread)
    await add_card(env.bot.services.db, ref.adventure_id, "Heavy", "rain", "Rain.", WEATHER)
    listing = await env.fake.slash(env.alice, thread, "card list")
    (embed,) = (await answered(env, listing)).embeds
    assert (
        "world info: inclusion group weather (most keys matched, then weight 100)"
        in embed["description"]
    )
