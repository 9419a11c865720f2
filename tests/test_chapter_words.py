"""A chapter's tally reads in the scenario's words, not its ids (``engine.story.chapters.words``):
"places: lamp_room · met_wren: yes" was shown as it is stored."""

from __future__ import annotations

import json
from pathlib import Path

from engine.story.chapters.plan import read_plan
from engine.story.chapters.recaps import facts_lines
from engine.story.chapters.words import chapter_words, humanised

TIDEWATCH = Path(__file__).parents[1] / "data" / "scenarios" / "tidewatch-light.json"


def first_chapter() -> dict:
    return read_plan(json.loads(TIDEWATCH.read_text()))["chapters"][0]


def test_the_reported_tally_reads_in_words():
    facts = {"fields": {"places": ["lamp_room"], "clues": 2, "met_wren": True}}
    assert facts_lines(facts, chapter_words(first_chapter())) == [
        "Tally: places: lamp room · clues: 2 · met Wren: yes"
    ]


def test_a_name_is_spelt_as_the_scenario_spells_it():
    chapter = {
        "title": "The Dock",
        # "Clues" opens a sentence and "The" a title: neither is a name; "Wren" is.
        "notes": "Clues lie about. The keeper meets Wren at the dock.",
        "events": {
            "met": {"fold": "flag", "field": "met_wren", "about": "the player meets Wren"},
            "found": {"fold": "counter", "field": "clues", "about": "a clue is found"},
            "went": {"fold": "set", "field": "the_places", "values": ["dock", "old_mill"]},
        },
        "beats": [{"title": "Find the keeper", "hints": ["A gull cries."]}],
    }
    assert chapter_words(chapter) == {
        "met_wren": "met Wren",
        "clues": "clues",
        "the_places": "the places",
        "dock": "dock",
        "old_mill": "old mill",
    }


def test_ids_without_the_plan_are_still_words():
    # A recap whose chapter the plan no longer has: its ids, humanised.
    assert humanised("lamp_room") == "lamp room"
    assert facts_lines({"fields": {"saw_it": False, "places": []}}) == [
        "Tally: saw it: no · places: none"
    ]
