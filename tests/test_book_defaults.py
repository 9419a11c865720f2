"""A book's options for the entries that set none: SillyTavern's global world-info settings
(case sensitivity, whole words, scan depth, recursion; docs.sillytavern.app "World Info"), as a
Character Card V2 book carries them (``scan_depth``, ``recursive_scanning``: the spec,
github.com/malfoyslastname/character-card-spec-v2 ``spec_v2.md``) and as a Campfire bundle
writes them (``lore_defaults``). Imported through the commands' readers and played in turns.
"""

from __future__ import annotations

import json

import pytest

from bot.standin import StandinFile
from engine.library.formats.detect import read_scenario
from engine.library.formats.draft import ImportLimits
from engine.library.reading.errors import ImportRejected
from tests.discord_env import DiscordEnv
from tests.fakes.openai_server import FakeModelServer
from tests.test_card_import import fields_of, imported, press
from tests.test_scenario_commands import answer


def book_entry(name: str, keys: list[str], content: str, **extensions: object) -> dict:
    return {
        "keys": keys,
        "content": content,
        "extensions": extensions,
        "enabled": True,
        "insertion_order": 100,
        "name": name,
    }


CARD = {
    "spec": "chara_card_v2",
    "spec_version": "2.0",
    "data": {
        "name": "Ilse",
        "description": "The harbour master's daughter.",
        "personality": "",
        "scenario": "",
        "first_mes": "The fog is thick tonight.",
        "mes_example": "",
        "creator_notes": "",
        "system_prompt": "",
        "post_history_instructions": "",
        "alternate_greetings": [],
        "tags": [],
        "creator": "",
        "character_version": "",
        "extensions": {},
        "character_book": {
            "name": "Harbour",
            "scan_depth": 1,  # the newest message alone
            "recursive_scanning": False,
            "extensions": {},
            "entries": [
                book_entry("Keeper", ["keeper"], "The keeper hides in the lighthouse."),
                book_entry("Lighthouse", ["lighthouse"], "The lighthouse lamp is broken."),
                book_entry("Gulls", ["gulls"], "Gulls nest on the harbour wall.", scan_depth=6),
            ],
        },
    },
}


def read(raw: object, name: str = "file.json"):
    return read_scenario(json.dumps(raw).encode(), name, ImportLimits())


def test_a_character_books_scan_depth_and_recursion_apply_to_its_entries():
    lore = {c.title: c.lore for c in read(CARD).draft.cards}
    # Book depth 1 is SillyTavern's newest message: the new action alone here. Recursion off
    # for the book: no entry's text triggers another (the entries' own default would).
    assert lore["Keeper"] == {"scan_depth": 0}
    assert lore["Gulls"] == {"scan_depth": 5}  # its own depth stands
    plain = json.loads(json.dumps(CARD))
    del plain["data"]["character_book"]["scan_depth"]
    del plain["data"]["character_book"]["recursive_scanning"]
    assert {c.title: c.lore for c in read(plain).draft.cards}["Keeper"] == {"recurse": True}


async def test_the_books_options_hold_in_turns(env: DiscordEnv, fake_model: FakeModelServer):
    thread = await env.start_thread(env.alice)
    file = StandinFile("ilse.json", json.dumps(CARD).encode(), "application/json")
    preview = await imported(env, env.alice, thread, file)
    new = fields_of(preview)["New"]
    await press(env, env.alice, preview, f"Import {new} story cards")

    fake_model.queue("Gulls wheel overhead as you call for the keeper.", "Nothing answers.")
    await env.fake.slash(env.alice, thread, "do", action="call for the keeper")
    await env.done()
    first = json.dumps(fake_model.requests[-1]["messages"])
    assert "The keeper hides in the lighthouse." in first
    assert "The lighthouse lamp is broken." not in first  # no recursion in this book
    await env.fake.slash(env.alice, thread, "do", action="wait")
    await env.done()
    second = json.dumps(fake_model.requests[-1]["messages"])
    # The keeper was named a turn ago: past the book's depth. The gulls' own depth reaches it.
    assert "The keeper hides in the lighthouse." not in second
    assert "Gulls nest on the harbour wall." in second


BUNDLE = {
    "campfire": "scenario",
    "version": 1,
    "title": "Fogbound",
    "prompt": "The fog rolls in over the Fogbound docks.",
    "lore_defaults": {
        "case_sensitive": True,
        "whole_words": False,
        "scan_depth": 0,
        "group_scoring": True,
    },
    "story_cards": [
        {"title": "Orm", "keys": "Orm", "entry": "Orm the net-mender owes you money."},
        {
            "title": "Nets",
            "keys": "net",
            "entry": "The nets are torn.",
            "lore": {"case_sensitive": False},
        },
    ],
    "options": [
        {
            "title": "By night",
            "prompt": "Night falls.",
            "story_cards": [{"title": "Lamp", "keys": "lamp", "entry": "A lamp swings."}],
        },
    ],
}


def test_a_bundles_lore_defaults_apply_to_cards_without_their_own():
    draft = read(BUNDLE).draft
    lore = {c.title: c.lore for c in draft.cards}
    shared = {"whole_words": False, "scan_depth": 0, "group_scoring": True}
    assert lore["Orm"] == {"case_sensitive": True} | shared
    assert lore["Nets"] == {"case_sensitive": False} | shared
    # An option without its own defaults takes its parent's.
    assert draft.options[0].cards[0].lore == lore["Orm"]


@pytest.mark.parametrize(
    ("defaults", "message"),
    [
        ({"scan_depth": 500}, "lore_defaults.scan_depth: 500 is out of range (0 to 100)."),
        ({"order": 3}, "lore_defaults: unknown option(s) order (one of case_sensitive"),
        ({"recurse": "often"}, "lore_defaults.recurse: expected true or false, found text."),
        ("yes", "lore_defaults: expected an object, found text."),
    ],
)
def test_a_wrong_lore_defaults_refuses_the_bundle_naming_it(defaults, message):
    with pytest.raises(ImportRejected) as caught:
        read(BUNDLE | {"lore_defaults": defaults})
    assert message in caught.value.message


async def test_a_bundles_defaults_hold_in_a_turn(env: DiscordEnv, fake_model: FakeModelServer):
    plain = {key: value for key, value in BUNDLE.items() if key != "options"}  # no menu
    file = StandinFile("fogbound.json", json.dumps(plain).encode(), "application/json")
    record = await env.fake.slash(env.alice, env.channel, "scenario import", file=file)
    await env.done()
    await env.fake.press(env.alice, answer(env, record).id, label="Confirm")
    await env.done()
    thread = await env.start_thread(env.alice, scenario="Fogbound")
    fake_model.queue("The sea heaves.", "The docks creak.")
    # Case-sensitive, inside words: "orm" in "storming" is not "Orm"; "Ormsby's" has it.
    await env.fake.slash(env.alice, thread, "do", action="watch the storming sea")
    await env.done()
    assert "Orm the net-mender" not in json.dumps(fake_model.requests[-1]["messages"])
    await env.fake.slash(env.alice, thread, "do", action="ask Ormsby's crew about the nets")
    await env.done()
    sent = json.dumps(fake_model.requests[-1]["messages"])
    assert "Orm the net-mender owes you money." in sent
    assert "The nets are torn." in sent
