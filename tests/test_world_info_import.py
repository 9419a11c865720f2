"""Lorebooks keep their entries' options: SillyTavern world info, a character card's book and
NovelAI lorebooks map onto cards' world-info options, and what cannot be kept is named.

The files are written from the formats as their tools write them: SillyTavern's world-info
entry (``public/scripts/world-info.js``, ``newWorldInfoEntryTemplate``: ``key``,
``keysecondary``, ``selective``, ``selectiveLogic``, ``constant``, ``probability`` and
``useProbability``, ``order``, ``position``, ``caseSensitive``, ``matchWholeWords``,
``scanDepth``, ``excludeRecursion``, ``preventRecursion``, ``group``, ``sticky``, ``cooldown``,
``delay``), the V2 character book (github.com/malfoyslastname/character-card-spec-v2, with
SillyTavern's ``extensions``) and NovelAI's lorebook (``lorebookVersion``, ``entries`` with
``insertionOrder`` and ``cascadingActivation``). Each imported book is then played through the
real matcher: named entries fire, stay silent and recurse as in SillyTavern.
"""

from __future__ import annotations

import json

from engine.library.formats import character_card
from engine.library.formats.bundle import read_bundle, write_bundle
from engine.library.formats.detect import read_scenario
from engine.library.formats.draft import ImportedCard, ImportLimits, ScenarioDraft
from engine.prompt.card_scan import match_cards, scan_cards
from engine.prompt.cards import Card


def entry(uid: int, comment: str, key: list[str], content: str, **options: object) -> dict:
    base = {
        "uid": uid,
        "key": key,
        "keysecondary": [],
        "comment": comment,
        "content": content,
        "constant": False,
        "selective": True,
        "selectiveLogic": 0,
        "order": 100,
        "position": 0,
        "disable": False,
        "probability": 100,
        "useProbability": True,
        "depth": 4,
        "group": "",
        "scanDepth": None,
        "caseSensitive": None,
        "matchWholeWords": None,
        "excludeRecursion": False,
        "preventRecursion": False,
        "sticky": 0,
        "cooldown": 0,
        "delay": 0,
    }
    return base | options


BOOK = {
    "entries": {
        "0": entry(
            0,
            "Harbour Watch",
            ["watch"],
            "The Harbour Watch answers to Captain Ilse.",
            keysecondary=["night", "storm"],
            selectiveLogic=3,  # AND ALL
        ),
        "1": entry(1, "Captain Ilse", ["Ilse"], "Ilse keeps the lighthouse key.", order=300),
        "2": entry(2, "Lighthouse", ["lighthouse"], "The lighthouse is dark.", probability=50),
        "3": entry(3, "Smugglers", ["smuggle"], "Smugglers use the caves.", excludeRecursion=True),
        "4": entry(4, "Old Tide", ["/tides?/i"], "The tide is high.", caseSensitive=True),
        "5": entry(5, "Weather", [], "It always rains.", constant=True, preventRecursion=True),
        "6": entry(6, "Deep lore", ["Ilse"], "Ilse was born at sea.", position=4, sticky=2, role=2),
        "7": entry(7, "Off", ["watch"], "Disabled.", disable=True),
        "8": entry(8, "Regex only", ["/\\w+ing/"], "Any verb."),
        "9": entry(
            9,
            "Far",
            ["crown"],
            "The crown is lost.",
            scanDepth=1,
            group="royals",
            useGroupScoring=True,
        ),
        "10": entry(10, "Look-behind", ["/(?<=sir )Bob/"], "Bob.", delayUntilRecursion=True),
        "11": entry(11, "Example", ["example"], "Speak like this.", position=5),
        "12": entry(12, "Aside", ["aside"], "An aside.", position=3, role=1),
    }
}


def imported(raw: object, name: str = "harbour.json"):
    return read_scenario(json.dumps(raw).encode(), name, ImportLimits())


def cards_of(result) -> dict[str, Card]:
    return {
        c.title: Card.of(c.title, c.entry, c.keys, always_on=c.always_on, lore=c.lore, id=n)
        for n, c in enumerate(result.draft.cards)
    }


def test_sillytavern_entries_keep_their_options():
    result = imported(BOOK)
    lore = {c.title: c.lore for c in result.draft.cards}
    # Position 0, SillyTavern's default, is before the story: where Campfire puts a constant
    # entry anyway, so only the others say it.
    before = {"recurse": True, "position": "before"}
    assert lore["Harbour Watch"] == before | {"secondary": ["night", "storm"], "logic": "and_all"}
    assert lore["Captain Ilse"] == before | {"order": 300}
    assert lore["Lighthouse"] == before | {"probability": 50}
    assert lore["Smugglers"] == before | {"exclude_recursion": True}
    assert lore["Old Tide"] == before | {"case_sensitive": True}
    assert lore["Weather"] == {}  # prevents recursion: its text triggers nothing
    # SillyTavern's depth 1 is the newest message alone: the new action here.
    assert lore["Far"] == before | {"scan_depth": 0, "group": "royals", "group_scoring": True}
    # Position 4 is at a depth (SillyTavern's ``depth``, 4 in the template).
    assert lore["Deep lore"] == {"sticky": 2, "recurse": True, "position": "depth", "depth": 4}
    assert lore["Aside"] == {"recurse": True, "position": "an_bottom"}
    # Example messages Campfire has not: the entry goes where Campfire's cards go.
    assert lore["Example"] == {"recurse": True}
    # A pattern RE2 runs is kept as a regular-expression key.
    assert lore["Regex only"] == before | {"regex": ["/\\w+ing/"]}
    assert {c.title: c.always_on for c in result.draft.cards}["Weather"] is True
    assert "Off" not in lore


def test_what_cannot_be_kept_is_named_in_the_preview():
    warnings = "\n".join(imported(BOOK).warnings)
    assert "1 disabled entry was left out." in warnings
    assert "Entries placed at example messages (top) (1) go where Campfire places cards" in warnings
    assert "a depth in the chat" not in warnings and "author's note" not in warnings  # kept
    assert "Options Campfire does not apply were left out:" in warnings
    assert "delay until recursion (1)" in warnings
    assert "group scoring" not in warnings  # kept (SillyTavern's useGroupScoring)
    assert "message roles at a depth (1)" in warnings  # the assistant's, there
    assert "sticky" not in warnings and "inclusion group" not in warnings  # both are kept
    assert "1 story card(s) keep keys as regular expressions (e.g. “/\\w+ing/”)" in warnings
    # A regular-expression key RE2 cannot run either: SillyTavern's, not EWIJSON's.
    assert "had only regular-expression keys that could not be written as words" in warnings
    assert "EWIJSON" not in warnings


def test_the_imported_book_fires_stays_silent_and_recurses_as_in_sillytavern():
    cards = list(cards_of(imported(BOOK)).values())

    def fired(text: str, seed: str = "1:1") -> dict[str, str]:
        return {m.card.title: m.reason for m in match_cards(cards, text, seed)}

    # AND ALL: the watch with only one of night and storm stays silent; with both it fires.
    assert "Harbour Watch" not in fired("The watch walks at night.")
    got = fired("The watch walks at night in the storm.")
    assert got["Harbour Watch"] == "trigger: watch, with every secondary key (AND ALL)"
    # Its text names Ilse: her card follows by recursion, and hers names the lighthouse.
    assert got["Captain Ilse"] == "trigger: Ilse (in the text of Harbour Watch)"
    assert got["Deep lore"] == "trigger: Ilse (in the text of Harbour Watch)"
    assert "Lighthouse" in {m.card.title for m in scan_cards(cards, "watch night storm", "1:1")}
    # The constant entry is always on, and prevents recursion: "smuggle" in it fires nothing.
    assert fired("All quiet.") == {"Weather": "always on"}
    assert fired("Someone is singing.")["Regex only"] == "trigger: /\\w+ing/"
    # A regular expression spelled out as words (tide, tides), case-sensitive as set.
    assert fired("Tides turn.").get("Old Tide") is None
    assert fired("tides turn.")["Old Tide"] == "trigger: tides"


def test_a_character_books_entries_read_the_spec_and_sillytaverns_extensions():
    card = {
        "spec": "chara_card_v2",
        "spec_version": "2.0",
        "data": {
            "name": "Ilse",
            "description": "A lighthouse keeper.",
            "character_book": {
                "entries": [
                    {
                        "keys": ["lamp"],
                        "content": "The lamp burns whale oil.",
                        "enabled": True,
                        "insertion_order": 7,
                        "case_sensitive": False,
                        "name": "Lamp",
                        "selective": True,
                        "secondary_keys": ["oil"],
                        "constant": False,
                        "position": "after_char",
                        "extensions": {
                            "selectiveLogic": 2,
                            "probability": 25,
                            "useProbability": True,
                            "scan_depth": 3,
                            "match_whole_words": False,
                            "exclude_recursion": True,
                            "prevent_recursion": True,
                            "cooldown": 3,
                        },
                    }
                ]
            },
        },
    }
    result = imported(card, "ilse.json")
    (lamp,) = [c for c in result.draft.cards if c.title == "Lamp"]
    assert lamp.lore == {
        "secondary": ["oil"],
        "logic": "not_any",
        "order": 7,
        "probability": 25,
        "scan_depth": 2,
        "case_sensitive": False,
        "whole_words": False,
        "exclude_recursion": True,
        "cooldown": 3,
    }


def test_novelai_entries_keep_order_and_cascading_activation():
    book = {
        "lorebookVersion": 5,
        "entries": [
            {
                "text": "The Order guards the Archive.",
                "displayName": "Order",
                "keys": ["Order"],
                "insertionOrder": 400,
                "cascadingActivation": False,
            },
            {
                "text": "The Archive holds maps.",
                "displayName": "Archive",
                "keys": ["Archive"],
                "cascadingActivation": True,
                "searchRange": 4000,
            },
        ],
    }
    result = imported(book, "order.lorebook")
    lore = {c.title: c.lore for c in result.draft.cards}
    assert lore == {
        "Order": {"order": 400, "recurse": True, "exclude_recursion": True},
        "Archive": {"recurse": True},
    }
    assert "search range in characters (1)" in "\n".join(result.warnings)
    cards = list(cards_of(result).values())
    fired = {m.card.title: m.reason for m in match_cards(cards, "Hail the Order.")}
    assert fired == {
        "Order": "trigger: Order",
        "Archive": "trigger: Archive (in the text of Order)",
    }


def test_campfires_own_bundle_carries_the_options_both_ways():
    bundle = {
        "campfire": "scenario",
        "version": 1,
        "title": "Harbour",
        "prompt": "You arrive.",
        "story_cards": [
            {
                "title": "Watch",
                "keys": "watch",
                "entry": "The watch.",
                "lore": {"secondary": ["night"], "logic": "not_any", "probability": 30},
            },
            {"title": "Bad", "keys": "bad", "entry": "Bad.", "lore": {"probability": "often"}},
        ],
    }
    result = imported(bundle, "harbour.json")
    watch, bad = result.draft.cards
    assert watch.lore == {"secondary": ["night"], "logic": "not_any", "probability": 30}
    assert bad.lore == {}
    assert any(
        "“Bad”" in w and "world-info options not kept as written: probability (a number)" in w
        for w in result.warnings
    )
    written = write_bundle(result.draft)
    assert written["story_cards"][0]["lore"] == watch.lore
    assert "lore" not in written["story_cards"][1]
    assert read_bundle(written).cards[0].lore == watch.lore


def test_a_scenario_exported_as_a_character_card_keeps_its_cards_options():
    rich = {
        "secondary": ["night"],
        "logic": "not_all",
        "regex": ["/tid\\w+/i"],  # no list of words: it stays a regular expression
        "order": 40,
        "probability": 30,
        "scan_depth": 2,
        "case_sensitive": True,
        "whole_words": False,
        "recurse": True,
        "exclude_recursion": True,
        "sticky": 2,
        "cooldown": 1,
        "delay": 3,
        "group": "sea",
        "group_weight": 7,
        "group_scoring": True,
    }
    draft = ScenarioDraft(
        title="Ilse",
        prompt="The lamp is lit.",
        cards=[
            ImportedCard("Ilse", "Ilse", "A lighthouse keeper.", "character", always_on=True),
            ImportedCard("Watch", "watch", "The watch.", lore=rich),
            ImportedCard("Plain", "plain", "Plain lore."),
        ],
    )
    for version in (character_card.V2, character_card.V3):
        written = character_card.write_card(draft, version)
        result = imported(written, "ilse.json")
        lore = {c.title: c.lore for c in result.draft.cards}
        assert lore["Watch"] == rich
        assert lore["Plain"] == {}
