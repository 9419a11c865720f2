"""KoboldAI world info imports as story cards that fire as they do in KoboldAI.

The files are written by hand from the shapes those tools write (no openly licensed KoboldAI
story was found to keep): KoboldAI's saved story (KoboldAI/KoboldAI-Client ``aiserver.py``,
``exportRequest``: ``worldinfo`` entries with ``key``, ``keysecondary``, ``content``,
``comment``, ``folder``, ``selective``, ``constant``, and ``wifolders_d``), KoboldAI Lite's
world-info export and save (LostRuins/lite.koboldai.net ``index.html``, ``export_wi_to_file``:
the entries with ``keyanti``, ``probability``, ``wigroup``, ``widisabled``) and KoboldAI
United's ``worldinfo_v2``. KoboldAI matches a key anywhere in the text, ignoring case, a
selective entry needing one of its secondary keys and (Lite) none of its anti-keys
(``checkworldinfo``; Lite's world-info loop): the tests play the imported cards through the
real matcher, and through ``/card import`` and a turn.
"""

from __future__ import annotations

import json
from pathlib import Path

from engine.library.formats import detect
from engine.library.formats.detect import read_cards, read_scenario
from engine.library.formats.draft import ImportLimits
from engine.prompt.card_scan import match_cards
from engine.prompt.cards import Card
from tests.discord_env import DiscordEnv
from tests.fakes.openai_server import FakeModelServer
from tests.test_card_import import fields_of, from_disk, imported, press

DATA = Path(__file__).parent / "data"
STORY = DATA / "koboldai-story.json"
LITE = DATA / "koboldai-lite-world-info.json"


def read(path: Path, raw: object = None):
    data = path.read_bytes() if raw is None else json.dumps(raw).encode()
    return read_scenario(data, path.name, ImportLimits())


def cards_of(result) -> list[Card]:
    return [
        Card.of(c.title, c.entry, c.keys, always_on=c.always_on, lore=c.lore, id=n)
        for n, c in enumerate(result.draft.cards)
    ]


def fired(cards: list[Card], text: str) -> dict[str, str]:
    return {m.card.title: m.reason for m in match_cards(cards, text, "1:1")}


def test_a_koboldai_story_imports_as_a_scenario_with_its_world_info():
    result = read(STORY)
    assert result.format == detect.KOBOLD_STORY  # not AI Dungeon's 2020-21 scenario
    draft = result.draft
    assert draft.prompt.startswith("The ferry to Saltmere leaves at dusk.")
    assert draft.plot_essentials.startswith("You are a courier")
    assert draft.authors_note == "Keep the tone quiet and foggy."
    got = {c.title: c for c in draft.cards}
    assert list(got) == ["Saltmere", "Keeper Odile", "Ferryman Brann", "Fog"]
    assert got["Saltmere"].keys == "Saltmere, the island"
    assert got["Saltmere"].lore == {"whole_words": False}
    assert got["Keeper Odile"].lore == {
        "secondary": ["lighthouse", "lamp"],
        "logic": "and_any",
        "whole_words": False,
    }
    # Not selective: KoboldAI ignores its secondary keys.
    assert got["Ferryman Brann"].lore == {"whole_words": False}
    assert got["Keeper Odile"].type == "people" and got["Saltmere"].type == "custom"
    assert got["Fog"].always_on and got["Fog"].keys == ""
    assert "2 actions played after the story's opening were left out" in "\n".join(result.warnings)


def test_the_storys_cards_fire_as_in_koboldai():
    cards = cards_of(read(STORY))
    assert fired(cards, "You wait.") == {"Fog": "always on"}
    # A selective entry: its key alone stays silent; with a secondary key it fires.
    assert "Keeper Odile" not in fired(cards, "You ask for the keeper.")
    assert (
        fired(cards, "The keeper trims the lamp.")["Keeper Odile"]
        == "trigger: keeper, fired by secondary key lamp (AND ANY)"
    )
    # Keys are found inside words and whatever the case, as KoboldAI finds them.
    assert fired(cards, "SALTMERERS fish at night.")["Saltmere"] == "trigger: Saltmere"
    assert fired(cards, "The ferryman's boat.")["Ferryman Brann"] == "trigger: ferryman"


def test_lite_world_info_maps_anti_keys_probability_and_groups():
    result = read_cards(LITE.read_bytes(), LITE.name, ImportLimits())  # /card import's reader
    assert result.format == detect.KOBOLD_WORLD_INFO
    lore = {c.title: c.lore for c in result.draft.cards}
    # Anti-keys alone are SillyTavern's NOT ANY; beside secondary keys they cannot be kept.
    assert lore["Wolves"] == {"secondary": ["tame"], "logic": "not_any", "whole_words": False}
    assert lore["The Pass"] == {"secondary": ["snow"], "logic": "and_any", "whole_words": False}
    assert lore["Shrine"] == {"probability": 40, "whole_words": False}
    assert "Bandits" not in lore
    assert {c.title: c.type for c in result.draft.cards}["Wolves"] == "beasts"
    warnings = "\n".join(result.warnings)
    assert "1 disabled entry was left out." in warnings
    assert (
        "Options Campfire does not apply were left out: anti-keys beside secondary keys (1)"
        in warnings
    )

    cards = cards_of(result)
    got = fired(cards, "Wolves howl over the passage in the snow.")
    assert got["Wolves"] == "trigger: wolves, no secondary key present (NOT ANY)"
    assert got["The Pass"] == "trigger: pass, fired by secondary key snow (AND ANY)"
    assert "Wolves" not in fired(cards, "A tame wolf follows you.")


def test_a_lite_save_and_a_united_save_read_their_world_info():
    entries = json.loads(LITE.read_text())
    save = {
        "gamestarted": True,
        "prompt": "The pass is quiet.",
        "memory": "",
        "authorsnote": "",
        "anotetemplate": "",
        "actions": [],
        "actions_metadata": {},
        "worldinfo": entries,
        "wifolders_d": {},
        "wifolders_l": [],
        "wisearchdepth": 200,
        "savedsettings": {"my_api_key": "0000000000"},
    }
    lite = read(LITE, save)
    assert lite.format == detect.KOBOLD_STORY
    assert [c.title for c in lite.draft.cards] == ["Wolves", "The Pass", "Shrine"]
    assert "search depth (200 characters) is not kept" in "\n".join(lite.warnings)

    united = {
        "file_version": 2,
        "prompt": "The lamp is out.",
        "memory": "A keeper's diary.",
        "actions": {"action_count": 1, "actions": {"0": {"Selected Text": "You climb."}}},
        "worldinfo_v2": {
            "entries": {
                "0": {
                    "uid": 0,
                    "title": "Odile",
                    "key": ["keeper", "Odile"],
                    "keysecondary": ["lamp"],
                    "selective": True,
                    "constant": False,
                    "content": "Odile keeps the light.",
                    "comment": "",
                    "folder": "root",
                }
            },
            "folders": {"root": [0]},
        },
    }
    result = read(STORY, united)
    assert result.format == detect.KOBOLD_STORY
    (odile,) = result.draft.cards
    assert (odile.title, odile.keys, odile.type) == ("Odile", "keeper,Odile", "custom")
    assert odile.lore == {"secondary": ["lamp"], "logic": "and_any", "whole_words": False}
    assert "1 action played after the story's opening was left out" in "\n".join(result.warnings)


async def test_lite_world_info_through_card_import_and_a_turn(
    env: DiscordEnv, fake_model: FakeModelServer
):
    thread = await env.start_thread(env.alice)
    preview = await imported(env, env.alice, thread, from_disk(LITE))
    fields = fields_of(preview)
    assert fields["Format"] == "KoboldAI Lite world info"
    assert fields["New"] == "3"
    await press(env, env.alice, preview, "Import 3 story cards")
    fake_model.queue("The wind bites.")
    await env.fake.slash(env.alice, thread, "do", action="follow the wolves up the passage")
    await env.done()
    prompt = json.dumps(fake_model.requests[-1]["messages"])
    assert "Grey wolves hunt the pass in winter." in prompt
    assert "The pass is closed by snow" not in prompt  # no snow: its secondary key is missing
    # A whole KoboldAI story is a scenario: /card import sends it to /scenario import.
    story = await imported(env, env.alice, thread, from_disk(STORY))
    assert story.content.startswith("⚠ This file is a whole scenario (KoboldAI story)")
