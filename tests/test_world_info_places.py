"""Where a card goes: SillyTavern's insertion positions (docs.sillytavern.app "World Info",
"Insertion Position"; ``world_info_position`` in ``public/scripts/world-info.js``: before 0,
after 1, ANTop 2, ANBottom 3, atDepth 4) on Campfire's layout.

Built by the real context engine from its inputs (the prompt as sent, and Insights' report);
``tests/test_world_info_turns.py`` plays the same through a turn against the fake model server.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from sqlalchemy import update
from sqlalchemy.orm import undefer
from sqlmodel import col

from engine.library.formats import character_card
from engine.library.formats.detect import read_scenario
from engine.library.formats.draft import ImportLimits
from engine.llm.providers.resolver import OperatorDefault
from engine.prompt.cards import Card
from engine.prompt.lore import clean_lore, read_lore
from engine.prompt.lore_places import insert_at_depths
from engine.prompt.sections import authors_note_line
from engine.storage.models import Adventure, AdventureCard, StoryNode
from engine.turns.context import HEADINGS, ContextEngine
from engine.turns.engine import TurnEngine
from tests.discord_env import answered
from tests.helpers import new_adventure
from tests.test_context import FULL, recent_story, sections, story, user_text
from tests.test_story_tree import host, turn

ENGINE = ContextEngine()
LORE = HEADINGS["story_cards"]
NOTE = authors_note_line(FULL.authors_note)


def card(title: str, entry: str, keys: str = "", *, always: bool = False, **lore) -> Card:
    return Card.of(title, entry, keys, always_on=always, lore=lore)


def told(built) -> list[str]:
    """The story's paragraphs as sent (what follows it begins with "Memories:" in FULL)."""
    paragraphs = recent_story(built)
    return paragraphs[: next(i for i, p in enumerate(paragraphs) if p.startswith("Memories:"))]


def items(built) -> dict[str, tuple[bool, str]]:
    return {
        item.label: (item.included, item.reason)
        for section in built.report.sections
        if "cards" in section.key
        for item in section.items
    }


def test_each_position_puts_its_card_where_it_says_and_insights_names_where():
    cards = [
        card("Sea", "The sea rises.", always=True),  # unset: before the story
        card("Mira", "Mira smuggles salt.", "Mira"),  # unset: after it
        card("Ferry", "The ferry leaks.", "Mira", position="before"),
        card("Town", "The town is Brack.", always=True, position="after"),
        card("Omen", "Gulls fall silent.", always=True, position="an_top"),
        card("Tide", "The tide turns.", "lantern", position="an_bottom"),
        card("Deep", "Ash fears deep water.", always=True, position="depth", depth=3),
        card("Last", "Rain on the deck.", always=True, position="depth", depth=0),
    ]
    built = ENGINE.build(replace(FULL, cards=cards))
    system, user = built.messages[0].content, user_text(built)
    # Before the story, after plot essentials: the always-on card, then the one placed there.
    order = [
        "You are Ash",
        f"{LORE}\nThe sea rises.\nThe ferry leaks.",
        "Story Summary:",
        HEADINGS["history"],
        f"{LORE}\nMira smuggles salt.\nThe town is Brack.",
        "World State:",
        FULL.action_text,
        f"{LORE}\nRain on the deck.",  # depth 0: after the new action
    ]
    assert [user.index(part) for part in order] == sorted(user.index(part) for part in order)
    # The author's note closes the system message; its cards wrap it.
    assert system.endswith(f"Gulls fall silent.\n\n{NOTE}\n\nThe tide turns.")
    # Depth 3: three entries after it, counting the new action (SillyTavern's "@ D").
    assert told(built)[-3:] == [
        f"{LORE}\nAsh fears deep water.",
        *(e.text for e in FULL.history[-2:]),
    ]
    reasons = items(built)
    assert reasons["Sea"] == (True, "always on")
    assert reasons["Mira"] == (True, "trigger: Mira")
    assert reasons["Ferry"] == (True, "trigger: Mira; before the story")
    assert reasons["Omen"] == (True, "always on; in the author's note (top)")
    assert reasons["Tide"] == (True, "trigger: lantern; in the author's note (bottom)")
    assert reasons["Deep"] == (True, "always on; at depth 3")
    found = sections(built)
    assert found["always_cards"].reason == "2 before the story (1 always on, 1 placed there)"
    assert found["story_cards"].reason == (
        "1 of 1 cards triggered, 1 always on placed after the story"
    )
    assert found["note_cards_top"].reason == (
        "1 placed there, with the author's note: in the system message (the same every turn)"
    )
    assert found["depth_cards_3"].reason == (
        "1 placed there: depth 3: in the story, before its last 2 entries"
    )
    assert found["depth_cards_0"].reason == "1 placed there: depth 0: after the new action"
    # Reported in the order sent: the depth's cards with the story, the last after the action.
    keys = [s.key for s in built.report.sections]
    assert keys.index("note_cards_top") + 1 == keys.index("authors_note")
    assert keys.index("authors_note") + 1 == keys.index("note_cards_bottom")
    assert keys.index("history") + 1 == keys.index("depth_cards_3")
    assert keys.index("action") + 1 == keys.index("depth_cards_0")
    # What was sent is what the report counts.
    assert built.report.used <= built.report.available


def test_cards_at_one_depth_keep_their_order_after_the_note_there():
    cards = [
        card("B", "Second by order.", always=True, position="depth", depth=2, order=50),
        card("A", "First by order.", always=True, position="depth", depth=2, order=10),
    ]
    built = ENGINE.build(replace(FULL, cards=cards, authors_note_depth=2))
    # SillyTavern orders a depth's prompts by name, its author's note's first.
    assert told(built)[-3:] == [
        NOTE,
        f"{LORE}\nFirst by order.\nSecond by order.",
        FULL.history[-1].text,
    ]


def test_cards_in_the_note_follow_it_and_stand_where_it_would_without_one():
    cards = [card("Omen", "Gulls fall silent.", always=True, position="an_top")]
    with_depth = ENGINE.build(replace(FULL, cards=cards, authors_note_depth=2))
    assert told(with_depth)[-3:-1] == ["Gulls fall silent.", NOTE]
    # No note: the cards stand where it would, closing the system message.
    alone = ENGINE.build(replace(FULL, cards=cards, authors_note=""))
    assert alone.messages[0].content.endswith("\n\nGulls fall silent.")
    assert "authors_note" not in sections(alone)


def test_a_depth_in_a_story_with_no_entries_yet_is_just_before_the_action():
    cards = [card("Deep", "Ash fears deep water.", always=True, position="depth", depth=4)]
    built = ENGINE.build(replace(FULL, cards=cards, history=(), line_length=0))
    user = user_text(built)
    assert user.index("Ash fears deep water.") < user.index(FULL.action_text)
    assert sections(built)["depth_cards_4"].reason.endswith("(the story has none yet: after it)")


def test_unset_and_the_same_place_written_out_send_the_same_prompt():
    plain = [
        card("Sea", "The sea rises.", always=True),
        card("Mira", "Mira smuggles salt.", "Mira"),
    ]
    placed = [
        card("Sea", "The sea rises.", always=True, position="before"),
        card("Mira", "Mira smuggles salt.", "Mira", position="after"),
    ]
    one, other = (ENGINE.build(replace(FULL, cards=cards)) for cards in (plain, placed))
    assert one.messages == other.messages
    assert one.report.used == other.report.used


def test_the_card_budget_covers_cards_wherever_they_go():
    long = " ".join(["The deep is cold and dark."] * 40)
    cards = [
        card("Deep", long, always=True, position="depth", depth=2),
        card("Omen", long, always=True, position="an_top", order=200),
    ]
    inputs = replace(FULL, cards=cards, budget=1500)
    built = ENGINE.build(inputs)
    reasons = items(built)
    # Both always on: the higher order claims the budget first; the other does not fit.
    assert reasons["Omen"][0] is True
    assert reasons["Deep"] == (
        False,
        "over the 40% card budget (always on; at depth 2)",
    )
    assert long not in user_text(built)
    assert sections(built)["depth_cards_2"].reason.startswith("1 placed there; 1 left out")
    assert built.report.used <= built.report.available


def test_the_story_takes_its_inserts_from_its_end():
    texts = ["a", "b", "c"]
    assert insert_at_depths(texts, [(1, "x"), (1, "y"), (3, "z"), (9, "far")]) == [
        "far",
        "z",
        "a",
        "b",
        "x",
        "y",
        "c",
    ]
    assert insert_at_depths(texts, [(0, "end"), (2, "")]) == ["a", "b", "c", "end"]


def test_position_and_depth_are_validated_bounded_and_described():
    warnings: list[str] = []
    assert clean_lore({"position": "depth", "depth": 2}, warnings) == {
        "position": "depth",
        "depth": 2,
    }
    assert clean_lore({"position": "an_top"}, warnings) == {"position": "an_top"}
    assert warnings == []
    assert clean_lore({"position": "depth"}, warnings) == {"position": "depth", "depth": 4}
    assert clean_lore({"position": "depth", "depth": 300}, warnings)["depth"] == 100
    assert clean_lore({"position": "middle"}, warnings) == {}
    assert clean_lore({"depth": 3}, warnings) == {}
    assert warnings == [
        "world-info options not kept as written: depth 300 (from 0 to 100; clamped).",
        "world-info options not kept as written: position 'middle' (one of before, after, "
        "an_top, an_bottom, depth).",
        "world-info options not kept as written: depth (only with position depth).",
    ]
    assert read_lore({"position": "depth", "depth": 2}).describe() == ["placed at depth 2"]
    assert read_lore({"position": "an_bottom"}).describe() == [
        "placed in the author's note (bottom)"
    ]
    assert read_lore({"position": "before"}).place == "before the story"
    assert read_lore({}).place is None


def test_a_short_story_still_takes_a_deep_card_at_its_start():
    cards = [card("Deep", "Ash fears deep water.", always=True, position="depth", depth=40)]
    built = ENGINE.build(replace(FULL, cards=cards, history=story(2), line_length=2))
    assert told(built)[0] == f"{LORE}\nAsh fears deep water."


# --- in a turn, from an imported SillyTavern book ------------------------------------------------


def st_entry(uid: int, key: str, content: str, position: int, **options: object) -> dict:
    """An entry as SillyTavern writes it (``newWorldInfoEntryTemplate``: position 0, depth 4)."""
    return {
        "uid": uid,
        "key": [key],
        "keysecondary": [],
        "comment": key.title(),
        "content": content,
        "constant": False,
        "selective": True,
        "order": 100,
        "position": position,
        "depth": 4,
        "disable": False,
    } | options


BOOK = {
    "entries": {
        "0": st_entry(0, "compass", "The compass points to the drowned bell.", 4, depth=2),
        "1": st_entry(1, "fog", "Fog hides the far shore.", 2),
        "2": st_entry(2, "fog", "The fog smells of salt.", 3, comment="Salt"),
        "3": st_entry(3, "ferry", "The ferry has no pilot.", 0),
        "4": st_entry(4, "ferry", "The ferryman hums.", 1, comment="Ferryman"),
    }
}


@pytest.fixture
def engine(db, provider) -> TurnEngine:
    return TurnEngine(db, OperatorDefault(provider))


async def test_an_imported_books_entries_go_where_sillytavern_puts_them(db, engine, fake_model):
    result = read_scenario(json.dumps(BOOK).encode(), "shore.json", ImportLimits())
    adventure_id = await new_adventure(db)
    await host(db, adventure_id)
    async with db.session() as session, session.begin():
        await session.execute(
            update(Adventure)
            .where(col(Adventure.id) == adventure_id)
            .values(authors_note="Keep it eerie.")
        )
        for c in result.draft.cards:
            fields = {"title": c.title, "keys": c.keys, "entry": c.entry, "lore": c.lore}
            session.add(AdventureCard(adventure_id=adventure_id, **fields))
    fake_model.queue("The road bends by the water.", "The bell tolls below.")
    await turn(engine, adventure_id, "walk on")
    done = await turn(engine, adventure_id, "check the compass in the fog by the ferry")
    system, user = (m["content"] for m in fake_model.requests[-1]["messages"])

    # Position 4, depth 2: two entries after it, the last narration and the new action.
    story_text = user.split(HEADINGS["history"] + "\n", 1)[1]
    paragraphs = story_text.split("\n\n")
    deep = paragraphs.index(f"{LORE}\nThe compass points to the drowned bell.")
    assert paragraphs[deep + 1] == "The road bends by the water."
    assert user.index("The road bends by the water.") < user.index("check the compass")
    # Positions 2 and 3: around the author's note, which closes the system message.
    note = authors_note_line("Keep it eerie.")
    assert system.endswith(f"Fog hides the far shore.\n\n{note}\n\nThe fog smells of salt.")
    # Position 0 before the story, 1 after it (where Campfire puts a triggered card anyway).
    before, after = user.index("The ferry has no pilot."), user.index("The ferryman hums.")
    assert before < user.index(HEADINGS["history"]) < after

    async with db.session() as session:
        node = await session.get(
            StoryNode, done.narrator_node_id, options=[undefer(StoryNode.context_report)]
        )
        assert node is not None and node.context_report is not None
    reasons = {
        item["label"]: item["reason"]
        for section in node.context_report["sections"]
        for item in section["items"]
        if "cards" in section["key"]
    }
    assert reasons["Compass"] == "trigger: compass; at depth 2"
    assert reasons["Ferry"] == "trigger: ferry; before the story"
    assert reasons["Ferryman"] == "trigger: ferry"  # position 1: where it goes unplaced
    assert reasons["Fog"] == "trigger: fog; in the author's note (top)"
    assert reasons["Salt"] == "trigger: fog; in the author's note (bottom)"


def test_a_character_books_place_reads_sillytaverns_extension_first_and_writes_it_back():
    def book_entry(name: str, **fields: object) -> dict:
        base = {"keys": [name.lower()], "content": f"{name}.", "enabled": True, "name": name}
        return base | fields

    card = {
        "spec": "chara_card_v2",
        "spec_version": "2.0",
        "data": {
            "name": "Ilse",
            "description": "A lighthouse keeper.",
            "character_book": {
                "entries": [
                    # SillyTavern writes its number under extensions; it wins over the spec's.
                    book_entry(
                        "Deep", position="before_char", extensions={"position": 4, "depth": 2}
                    ),
                    book_entry("Early", position="before_char"),
                    book_entry("Late", position="after_char"),
                    book_entry("Top", extensions={"position": 2}),
                ]
            },
        },
    }
    result = read_scenario(json.dumps(card).encode(), "ilse.json", ImportLimits())
    lore = {c.title: c.lore for c in result.draft.cards}
    assert lore["Deep"]["position"] == "depth" and lore["Deep"]["depth"] == 2
    assert lore["Early"]["position"] == "before"
    assert "position" not in lore["Late"]  # after the story: where it goes unplaced
    assert lore["Top"]["position"] == "an_top"

    # Exported and read back, each card keeps its place.
    for version in (character_card.V2, character_card.V3):
        written = character_card.write_card(result.draft, version)
        entries = written["data"]["character_book"]["entries"]
        deep = next(e for e in entries if e["name"] == "Deep")
        assert deep["position"] == "after_char"
        assert (deep["extensions"]["position"], deep["extensions"]["depth"]) == (4, 2)
        again = read_scenario(json.dumps(written).encode(), "ilse.json", ImportLimits())
        assert {c.title: c.lore for c in again.draft.cards} == lore


async def test_card_list_says_where_a_card_is_placed(env):
    thread = await env.start_thread()
    ref = await env.bot.services.play.adventure_in(thread)
    async with env.bot.services.db.session() as session, session.begin():
        lore = {"position": "depth", "depth": 2, "order": 5}
        fields = {"title": "Bell", "keys": "bell", "entry": "The bell is cracked.", "lore": lore}
        session.add(AdventureCard(adventure_id=ref.adventure_id, **fields))
    listing = await env.fake.slash(env.alice, thread, "card list")
    (embed,) = (await answered(env, listing)).embeds
    assert "world info: order 5; placed at depth 2\n> The bell is cracked." in embed["description"]
