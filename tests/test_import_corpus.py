"""The compatibility corpus (``tests/data/corpus/``, sources in its ``SOURCES.md``): real
published files, each imported and checked to do what it is for: its cards fire on a story
naming them, in an adventure started from it.

Keys match as ``engine.prompt.cards`` says: whole words, case-insensitively, the first key of a card
found in the text being the one reported."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import select
from sqlmodel import col

from engine.library.formats import detect
from engine.library.formats.draft import ImportLimits
from engine.library.scenarios.library import ScenarioLibrary
from engine.library.scenarios.start import start_adventure
from engine.people.access.rules import Actor
from engine.prompt.card_scan import match_cards
from engine.prompt.cards import Card
from engine.storage.models import AdventureCard

CORPUS = Path(__file__).parent / "data" / "corpus"
ALICE = Actor(
    user_id=11, user_name="alice", server_id=500, server_name="Hearth", manages_server=True
)


async def _adventure_cards(db, name: str) -> tuple[str, list[Card], list[str]]:
    """The file imported into the library, an adventure started from it, and its cards."""
    library = ScenarioLibrary(db, ImportLimits())
    imported = await library.preview(ALICE, (CORPUS / name).read_bytes(), Path(name).name)
    saved = await library.save(ALICE, imported)
    async with db.session() as session, session.begin():
        adventure = await start_adventure(session, saved.scenario_id, channel_id=9)
        rows = await session.scalars(
            select(AdventureCard)
            .where(col(AdventureCard.adventure_id) == adventure.id)
            .order_by(col(AdventureCard.position))
        )
        cards = [
            Card.of(r.title, r.entry, r.keys, always_on=r.always_on, type=r.type, lore=r.lore)
            for r in rows
        ]
    return imported.format, cards, imported.warnings


async def test_sillytavern_eldoria_world_info_fires_on_a_story_naming_it(db):
    kind, cards, warnings = await _adventure_cards(db, "lorebooks/sillytavern-eldoria.json")
    assert kind == detect.SILLYTAVERN and warnings == []
    assert [c.title for c in cards] == ["eldoria", "shadowfang", "glade", "power"]
    story = "A shadowfang beast circled the glade at the edge of the magical forest."
    fired = {m.card.title: m.reason for m in match_cards(cards, story)}
    # SillyTavern's recursive scan (on by default) reads the entries that went in: the
    # forest's entry speaks of Seraphina's magic, which brings in "power".
    assert fired == {
        "eldoria": "trigger: magical forest",
        "shadowfang": "trigger: shadowfang",
        "glade": "trigger: glade",
        "power": "trigger: magic (in the text of eldoria)",
    }
    fired = {m.card.title: m.reason for m in match_cards(cards, "Her magic healed you.")}
    assert fired == {
        "power": "trigger: magic",
        "glade": "trigger: glade (in the text of power)",
        "eldoria": "trigger: forest (in the text of glade)",
        "shadowfang": "trigger: beast (in the text of glade)",
    }
    assert match_cards(cards, "The road north was quiet.") == []


async def test_novelai_ripple_lorebook_fires_on_a_story_naming_rome(db):
    # Exported from NovelAI as published (lorebookVersion 4, one entry, no categories).
    kind, cards, warnings = await _adventure_cards(
        db, "lorebooks/novelai-grahamwaters/ripple.lorebook"
    )
    assert kind == detect.NOVELAI and warnings == []
    assert [(c.title, c.keys, c.type) for c in cards] == [
        ("Rome Burning", ("Rome", "Emperor", "476 AD"), "custom")
    ]
    assert cards[0].entry.startswith("The Roman Empire burned in the year 476.")
    fired = match_cards(cards, "Word reached the legions that Rome was burning.")
    assert [(m.card.title, m.reason) for m in fired] == [("Rome Burning", "trigger: Rome")]
    fired = match_cards(cards, "In 476 AD the last of the west fell.")
    assert [m.reason for m in fired] == ["trigger: 476 AD"]
    assert match_cards(cards, "Romeo waited under the balcony.") == []


async def test_novelai_lorebook_categories_become_card_types_and_shared_keys_fire_both(db):
    # The first ten entries of a NovelAI lorebook with categories (see SOURCES.md: trimmed).
    kind, cards, warnings = await _adventure_cards(
        db, "lorebooks/novelai-grahamwaters/lockwood.lorebook"
    )
    # Two entries search further back than NovelAI's 1,000 characters: named, not kept.
    assert kind == detect.NOVELAI and warnings == [
        "Options Campfire does not apply were left out: search range in characters (2)."
    ]
    assert [(c.title, c.type) for c in cards] == [
        ("Vera Stepanova", "characters"),
        ("Aston Lockwood", "characters"),
        ("Hugo Lockwood", "characters"),
        ("The Lockwood Estate", "locations"),
        ("Sigmund Lockwood", "characters"),
        ("Miles Sampson", "characters"),
        ("Edward Cass", "characters"),
        ("Lillian Lockwood", "characters"),
        ("Christopher Wallace Lockwood", "characters"),
        ("Aurora Rosé", "characters"),
    ]
    story = "Edward Cass lit a cigar in the atrium while Aurora sang by the piano."
    fired = {m.card.title: m.reason for m in match_cards(cards, story)}
    assert fired == {
        "The Lockwood Estate": "trigger: Atrium",
        "Edward Cass": "trigger: Edward Cass",
        "Aurora Rosé": "trigger: Aurora",
    }
    # Two entries share the key "Vera": both go in, as in NovelAI.
    fired = {m.card.title: m.reason for m in match_cards(cards, "Vera took the night train.")}
    assert fired == {"Vera Stepanova": "trigger: Vera", "Hugo Lockwood": "trigger: Vera"}


async def test_auto_cards_story_card_export_fires_on_a_story_naming_its_cards(db):
    # An AI Dungeon story-card export made by the Auto-Cards script (its first 150 cards), whose
    # keys repeat each name with the punctuation around it (" White , White',\"White , …").
    kind, cards, warnings = await _adventure_cards(
        db, "storycards/auto-cards-pokemon-safari/story-cards.json"
    )
    assert kind == detect.AID_CARDS and warnings == []
    assert len(cards) == 150
    assert {c.type for c in cards} == {"faction", "race", "location"}
    story = "Near Pueltown a Corviknight used Hypnosis on a wild Goomy."
    fired = {m.card.title: m.reason for m in match_cards(cards, story)}
    assert fired == {
        "Pueltown": "trigger: Pueltown",
        "Corviknight": "trigger: Corviknight",
        "Hypnosis": "trigger: Hypnosis",
        "Goomy": "trigger: Goomy",
    }
    # A name written with the punctuation the keys spell out still fires its card.
    fired = [m.card.title for m in match_cards(cards, "They called her (White) for short.")]
    assert fired == ["White"]
    assert [m.card.title for m in match_cards(cards, "The Blood-Moon rose.")] == ["Blood-Moon"]
    assert match_cards(cards, "The moon rose over the quiet meadow.") == []


async def test_hashtag_dnd_story_cards_keep_repeated_titles_apart_and_fire(db):
    # The story cards of the Hashtag-DnD scenario (its first 500): items, weapons and armour,
    # four of them titled "Potion of Healing", each with its own key.
    kind, cards, warnings = await _adventure_cards(db, "storycards/hashtag-dnd/story-cards.json")
    assert kind == detect.AID_CARDS
    assert warnings == [
        "The scenario: 5 story card(s) shared a title with another and were numbered."
    ]
    assert len(cards) == 500
    assert {c.type for c in cards} == {"weapon", "armor", "item"}
    potions = [(c.title, c.keys) for c in cards if c.title.startswith("Potion of Healing")]
    assert potions == [
        ("Potion of Healing", ("Potion of Healing",)),
        ("Potion of Healing (2)", ("Potion of Greater Healing",)),
        ("Potion of Healing (3)", ("Potion of Superior Healing",)),
        ("Potion of Healing (4)", ("Potion of Supreme Healing",)),
    ]
    story = "She lit a Torch, drew her Rapier and drank a Potion of Supreme Healing."
    fired = {m.card.title: m.reason for m in match_cards(cards, story)}
    assert fired == {
        "Rapier": "trigger: Rapier",
        "Potion of Healing (4)": "trigger: Potion of Supreme Healing",
        "Torch": "trigger: Torch",
    }
