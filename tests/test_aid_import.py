"""Issue 19, the import half: real AI Dungeon material as AI Dungeon reads it.

- An old (2020–21) export that lists several scenarios imports each, with its options.
- The card cap is one operator setting (at least 1,000), one rule for cards added by hand, by a
  script and by an import; an import over it keeps the first cards and says so.
- Keys written for EWIJSON (``Name|(|the )emp(ress|eror)#[t=5l=5f=2S=2]``) and ``/regex/`` keys
  become Campfire keys that fire; what cannot be converted is said in the preview.
- Every ``${…}`` question is asked, story cards' too.
"""

from __future__ import annotations

import copy
import json
import time

import pytest
from sqlalchemy import select
from sqlmodel import col

from bot.config import Settings
from engine.errors import InvalidInput
from engine.library.formats import detect
from engine.library.formats.adventure import parse_adventure
from engine.library.formats.detect import read_scenario
from engine.library.formats.draft import ImportLimits
from engine.library.reading.errors import ImportRejected
from engine.library.scenarios.library import ScenarioLibrary
from engine.library.scenarios.start import scenario_questions_of, start_adventure
from engine.library.scripting import sandbox
from engine.library.scripting.results import Caps
from engine.library.scripting.sandbox import DEFAULT_CAPS
from engine.people.access.rules import Actor
from engine.prompt.card_cap import DEFAULT_MAX_CARDS
from engine.prompt.card_scan import match_cards
from engine.prompt.cards import Card
from engine.storage.models import AdventureCard, Scenario, StoryNode
from engine.story.steering.cards import CardDraft, StoryCards
from tests.test_adventure_files import SAMPLE
from tests.test_scripting_sandbox import payload as script_payload
from tests.test_steering import CHANNEL, HOST_ACTOR, server_adventure

ALICE = Actor(
    user_id=11, user_name="alice", server_id=500, server_name="Hearth", manages_server=True
)


def read(raw: object, limits: ImportLimits | None = None):
    return read_scenario(json.dumps(raw).encode(), "export.json", limits or ImportLimits())


# --- an old export listing several scenarios -----------------------------------------------------

#: The shape of a 2020–21 export of a user's scenarios: a list of scenario objects, world info
#: as ``{keys, entry, hidden}``, options as whole sub-scenarios.
OLD_LIST = [
    {
        "title": "The Dragon's Hoard",
        "prompt": "You stand before the cave of ${character.name}'s rival.",
        "memory": "The dragon Smaug sleeps on gold.",
        "authorsNote": "Grim tone.",
        "worldInfo": [{"keys": "Smaug, dragon", "entry": "Smaug is ancient.", "hidden": False}],
        "options": [],
    },
    {
        "title": "Choose a kingdom",
        "prompt": "Where were you born?",
        "memory": "",
        "authorsNote": "",
        "worldInfo": [],
        "options": [
            {"title": "Larion", "prompt": "You are a knight of Larion.", "memory": "Larion."},
            {"title": "Zalt", "prompt": "You sail from Zalt.", "memory": "Zalt."},
        ],
    },
]


def test_an_old_export_listing_scenarios_reads_each_one():
    """Refused before: "The file is a list, but not of story cards"."""
    imported = read(OLD_LIST)
    assert imported.format == detect.AID_OLD_LIST
    assert [d.title for d in imported.scenarios] == ["The Dragon's Hoard", "Choose a kingdom"]
    hoard, menu = imported.scenarios
    assert [(c.title, c.keys, c.entry) for c in hoard.cards] == [
        ("Smaug", "Smaug, dragon", "Smaug is ancient.")
    ]
    # Options are sub-scenarios chosen from a menu under the parent's prompt.
    assert [o.title for o in menu.options] == ["Larion", "Zalt"]
    assert (imported.card_count, imported.option_count) == (1, 2)
    assert imported.placeholders == ["character.name"]


async def test_each_listed_scenario_is_saved_as_its_own(db):
    library = ScenarioLibrary(db, ImportLimits())
    imported = await library.preview(ALICE, json.dumps(OLD_LIST).encode(), "mine.json")
    saved = await library.save(ALICE, imported)
    assert (saved.title, saved.more) == ("The Dragon's Hoard", ("Choose a kingdom",))
    async with db.session() as session:
        rows = (
            await session.execute(
                select(col(Scenario.title), col(Scenario.parent_id)).where(
                    col(Scenario.server_id) == 500
                )
            )
        ).all()
    tops = [title for title, parent in rows if parent is None]
    assert sorted(tops) == ["Choose a kingdom", "The Dragon's Hoard"]
    assert sorted(t for t, parent in rows if parent is not None) == ["Larion", "Zalt"]


# --- the card cap --------------------------------------------------------------------------------


def test_the_card_cap_is_one_setting_of_at_least_a_thousand():
    default = Settings.model_fields["max_story_cards"].default
    assert default == DEFAULT_MAX_CARDS >= 1000
    assert ImportLimits().max_cards == default
    assert DEFAULT_CAPS.cards == default


def _story_cards(count: int) -> list[dict[str, str]]:
    return [{"keys": f"k{i}", "value": f"v{i}", "title": f"Card {i}"} for i in range(count)]


def test_an_import_over_the_cap_keeps_the_first_cards_and_says_so():
    """A 1,000-card export was refused whole by the 500-card cap."""
    imported = read(_story_cards(1_200))
    assert imported.card_count == 1_000 and imported.cards_left_out == 200
    assert imported.draft.cards[-1].title == "Card 999"
    warning = imported.warnings[0]
    assert "has 1,200 story cards; an adventure may hold at most 1,000" in warning
    assert "the last 200, from “Card 1000” on, are left out" in warning
    assert read(_story_cards(1_000)).cards_left_out == 0


async def test_by_hand_and_by_script_the_same_cap_holds(db):
    adventure_id = await server_adventure(db)
    cards = StoryCards(db, max_cards=3)
    async with db.session() as session:
        present = len(
            (
                await session.scalars(
                    select(AdventureCard).where(col(AdventureCard.adventure_id) == adventure_id)
                )
            ).all()
        )
    for n in range(3 - present):
        await cards.add(CHANNEL, HOST_ACTOR, CardDraft(f"Extra {n}"))
    with pytest.raises(InvalidInput) as refused:
        await cards.add(CHANNEL, HOST_ACTOR, CardDraft("One too many"))
    assert "already has 3 story cards, the most it can hold (3)" in refused.value.message
    # A script leaving four cards where three fit: its changes are not kept, in the same words.
    caps = Caps(text_chars=1000, state_chars=1000, cards=3)
    source = "addStoryCard('k1', 'e1'); addStoryCard('k2', 'e2'); addStoryCard('k3', 'e3'); ''"
    result = sandbox.run_sync(source, script_payload(), caps=caps)  # it holds one card
    assert result.error == (
        "The script left 4 story cards; an adventure may hold at most 3. Its changes were not kept."
    )
    fits = sandbox.run_sync("addStoryCard('k1', 'e1'); ''", script_payload(), caps=caps)
    assert fits.ok and len(fits.cards) == 2


# --- key syntaxes --------------------------------------------------------------------------------

#: Eighteen world-info entries keyed for EWIJSON: the regex alternation of each name, with the
#: attribute suffix the script reads (``t`` trailing line, ``l`` range, ``f`` filter, ``S``
#: sticky). Before, each was one literal key and none fired.
EWI_NAMES = {
    "Empress": "Name|(|the )emp(ress|eror)#[t=5l=5f=2S=2]",
    "Sif": "boss|Sif|wolf#[T=1L=2F=2]",
    "John": "(you(rself)?|John|John Doe)#[t=1]",
    "Larion": "Larion|the (kingdom|realm) of Larion#[t=2]",
    "Zalt": "[Zz]alt(ese)?#[t=1l=3]",
    "Ironhold": "Iron(hold|keep)#[p=1]",
    "Mira": "\\bMira\\b#[t=0]",
    "Grog": "Grog|(the )?ogre#[t=1S=1]",
    "Vess": "Vess(a)?#[f=1]",
    "Tarn": "Tarn|(the )?tarnished knight#[t=3]",
    "Ool": "Ool|the (great )?ooze#[t=1]",
    "Pell": "Pell(inore)?#[t=2l=4]",
    "Quill": "Quill|(the )?scribe#[w=10]",
    "Rook": "Rook|(the )?tower#[t=1]",
    "Sable": "Sable|(the )?black (cat|panther)#[t=1]",
    "Thorn": "Thorn(e)?#[t=2]",
    "Umber": "Umber|(the )?shadow(s)?#[t=1]",
    "Vael": "/Va(e)?l/i#[t=1]",
}


def test_eighteen_ewijson_cards_fire_on_a_story_naming_them():
    entries = [
        {"keys": keys, "entry": f"{name} matters.", "hidden": False}
        for name, keys in EWI_NAMES.items()
    ]
    imported = read(entries)
    cards = [Card.of(c.title, c.entry, c.keys) for c in imported.draft.cards]
    story = (
        "The emperor summoned Sif, John, the realm of Larion's envoy, a Zaltese trader, "
        "the smith of Ironkeep, Mira, the ogre, Vessa, the tarnished knight, the ooze, "
        "Pellinore, the scribe, the tower guard, a black panther, Thorne, the shadows and Val."
    )
    fired = {m.card.entry.split()[0] for m in match_cards(cards, story)}
    assert fired == set(EWI_NAMES)
    assert imported.draft.cards[0].keys == "Name,empress,emperor,the empress,the emperor"
    assert any(
        "EWIJSON attributes (#[…]: F, L, S, T, f, l, p, t, w)" in w for w in imported.warnings
    )
    assert any("spelled out as plain words" in w for w in imported.warnings)


def test_keys_that_cannot_be_words_are_reported_not_kept_silently():
    cards = [
        {"keys": "/\\w+ing/", "value": "Any verb.", "title": "Verbs"},
        {"keys": "knight, /sir\\s(Bob|Rob)/", "value": "A knight.", "title": "Knight"},
        {"keys": "plain key, another", "value": "Plain.", "title": "Plain"},
        {"keys": "you,(wield|equip),(branch|staff)#[p=1]", "value": "Armed.", "title": "Armed"},
        {"keys": "/(?<=sir )Bob/", "value": "Bob.", "title": "Behind"},
    ]
    imported = read(cards)
    keys = [c.keys for c in imported.draft.cards]
    assert keys == [
        "",
        "knight,sir Bob,sir Rob",
        "plain key, another",
        "you,wield,equip,branch,staff",
        "",
    ]
    # A pattern RE2 runs is kept as a regular-expression key; a look-behind is not.
    assert imported.draft.cards[0].lore == {"regex": ["/\\w+ing/"]}
    assert imported.draft.cards[4].lore == {}
    warnings = "\n".join(imported.warnings)
    assert "1 story card(s) keep keys as regular expressions (e.g. “/\\w+ing/”)" in warnings
    assert "1 key(s) could not be written as words and were left out (e.g. “/(?<=sir )Bob/”)" in (
        warnings
    )
    # Not EWIJSON's wording: the card's only key was a regular expression.
    assert "1 story card(s) had only regular-expression keys that could not be written" in warnings
    assert "EWIJSON entries" not in warnings
    assert "1 story card(s) needed several expressions at once" in warnings


def test_campfire_bundles_keep_their_keys_as_written():
    bundle = {
        "campfire": "scenario",
        "version": 1,
        "title": "Pipes",
        "story_cards": [{"title": "Pipe", "keys": "a|b", "entry": "x"}],
    }
    assert read(bundle).draft.cards[0].keys == "a|b"


# --- questions -----------------------------------------------------------------------------------


async def test_every_question_is_asked_and_filled(db):
    """Seven questions, one in a story card: all asked, none left as raw ``${…}``."""
    prompt = " ".join(f"Q{i}=${{Question {i}?}}" for i in range(6))
    raw = {
        "title": "Many questions",
        "prompt": prompt,
        "memory": "${Question 0?} is the hero.",
        "authorsNote": "",
        "storyCards": [{"keys": "${Your pet?}", "value": "A loyal ${Your pet?}.", "title": "Pet"}],
    }
    library = ScenarioLibrary(db, ImportLimits())
    saved = await library.save(ALICE, await library.preview(ALICE, json.dumps(raw).encode(), "q"))
    async with db.session() as session:
        scenario = await session.get(Scenario, saved.scenario_id)
        questions = await scenario_questions_of(session, scenario)
    assert questions == [f"Question {i}?" for i in range(6)] + ["Your pet?"]
    answers = {q: f"A{n}" for n, q in enumerate(questions)}
    async with db.session() as session, session.begin():
        adventure = await start_adventure(session, saved.scenario_id, answers=answers)
        opening = await session.get(StoryNode, adventure.head_node_id)
        pet = await session.scalar(
            select(AdventureCard).where(col(AdventureCard.adventure_id) == adventure.id)
        )
    assert "${" not in opening.text and opening.text.endswith("Q5=A5")
    assert (pet.keys, pet.entry) == ("A6", "A loyal A6.")


def test_an_adventure_file_over_the_cap_is_refused_in_the_rules_words():
    """An adventure's cards are its story's: none is dropped unseen (no preview offers it)."""
    raw = copy.deepcopy(SAMPLE)
    raw["story_cards"] = [{"title": f"Card {i}", "keys": "k", "entry": "e"} for i in range(4)]
    with pytest.raises(ImportRejected) as refused:
        parse_adventure(raw, ImportLimits(max_cards=3))
    assert "has 4 story cards; an adventure may hold at most 3" in refused.value.message
    raw["story_cards"] = raw["story_cards"][:3]
    parse_adventure(raw, ImportLimits(max_cards=3))


@pytest.mark.parametrize(
    "keys",
    [
        "/" + "[ab]" * 40_000 + "y/",  # each set doubled the spellings to spell out: 20 s once
        "(" * 400 + "a" + ")" * 400,  # exhausted the recursion
        "#[" * 80_000,  # a search for the attribute suffix along the whole line
    ],
    ids=["sets", "nesting", "suffixes"],
)
def test_a_key_built_to_be_slow_to_convert_is_dropped_or_refused_at_once(keys: str):
    started = time.perf_counter()
    try:
        imported = read([{"keys": keys, "entry": "Slow.", "hidden": False}])
    except ImportRejected as refused:  # kept as written, too long for a card's keys
        assert "at most 500 are allowed" in refused.message
    else:
        assert imported.draft.cards[0].keys != keys  # dropped: it spells out no words
    assert time.perf_counter() - started < 1.0
