"""Reading scenario files: every format Campfire knows, detected from content; bad files refused
with a message that names the problem; the bundle reads back what it wrote."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.library.formats import character_card, detect
from engine.library.formats.bundle import read_bundle, write_bundle
from engine.library.formats.detect import read_scenario
from engine.library.formats.draft import ImportLimits, fill_placeholders, placeholders_in
from engine.library.reading.errors import ImportRejected
from engine.library.scenarios.shipped import BUILTIN_SCENARIOS
from tests.fuzz_inputs import FIXTURES, json_values

DATA = Path(__file__).parent / "data"
LIMITS = ImportLimits()


def read(name: str, limits: ImportLimits = LIMITS):
    return read_scenario((DATA / name).read_bytes(), name, limits)


def read_raw(value: object, name: str = "file.json", limits: ImportLimits = LIMITS):
    return read_scenario(json.dumps(value).encode(), name, limits)


def rejected(data: bytes | object, limits: ImportLimits = LIMITS) -> str:
    if not isinstance(data, bytes):
        data = json.dumps(data).encode()
    with pytest.raises(ImportRejected) as caught:
        read_scenario(data, "file.json", limits)
    return caught.value.message


# --- every format --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "kind", "title", "cards", "scripts", "options"),
    [
        (
            "01-sunken-crypt-of-vharos.json",
            detect.AIDND,
            "[Demo] The Sunken Crypt of Vharos",
            3,
            4,
            0,
        ),
        (
            "02-signal-from-the-derelict.json",
            detect.AIDND,
            "[Demo] Signal from the Derelict",
            3,
            0,
            0,
        ),
        ("03-hp-system-demo.json", detect.AIDND, "[Demo] The Goblin Ambush (HP script)", 0, 1, 0),
        (
            "04-rpg-world-state.json",
            detect.AIDND,
            "[Demo] The Bandit Camp (RPG world state)",
            1,
            0,
            0,
        ),
        ("aid-new-scenario.json", detect.AID_NEW, "The Clockwork City", 3, 1, 2),
        ("aid-old-scenario.json", detect.AID_OLD, "Lost in the Mines", 2, 1, 0),
        ("aid-story-cards.json", detect.AID_CARDS, "aid-story-cards", 3, 0, 0),
        ("aid-world-info.json", detect.AID_WORLD_INFO, "aid-world-info", 2, 0, 0),
        ("sillytavern-world.json", detect.SILLYTAVERN, "sillytavern-world", 2, 0, 0),
        ("novelai-lorebook.json", detect.NOVELAI, "novelai-lorebook", 2, 0, 0),
        ("character-card-v2.json", character_card.V2, "Captain Vey", 3, 0, 0),
    ],
)
def test_each_fixture_imports_as_its_format(name, kind, title, cards, scripts, options):
    imported = read(name)
    assert imported.format == kind
    assert imported.draft.title == title
    assert (imported.card_count, imported.script_count, imported.option_count) == (
        cards,
        scripts,
        options,
    )


def test_ai_dnd_fields_map_onto_campfire_names():
    imported = read("01-sunken-crypt-of-vharos.json")
    raw = json.loads((DATA / "01-sunken-crypt-of-vharos.json").read_text())
    draft = imported.draft
    assert draft.plot_essentials == raw["memory"].strip()
    assert draft.tags == [t.strip() for t in raw["tags"].split(",")]
    assert draft.cards[0].title == "Mira the Blacksmith"
    assert draft.cards[0].description == raw["story_cards"][0]["notes"]
    dice = draft.scripts[0]
    assert dice.name == "[Demo] Dice Roller"
    assert dice.shared_library == raw["scripts"][0]["library_js"]
    assert dice.on_input == raw["scripts"][0]["input_js"]


def test_the_stat_schema_comes_in_whole():
    imported = read("04-rpg-world-state.json")
    raw = json.loads((DATA / "04-rpg-world-state.json").read_text())
    assert imported.draft.stat_schema == raw["stat_schema"]


def test_new_ai_dungeon_scenario_with_options_placeholders_and_crlf():
    draft = read("aid-new-scenario.json").draft
    assert draft.description == "A city run by gears.\nChoose who you are."  # CRLF normalised
    assert draft.ai_instructions == "Write in second person.\nKeep replies short."
    assert draft.plot_essentials == "The city is ruled by the Engineer."
    assert draft.authors_note == "Steampunk, brass and steam."
    assert [c.title for c in draft.cards] == ["Gearworks", "The Engineer"]
    assert draft.cards[0].entry == "The great factory at the city's heart."
    assert draft.cards[1].description == "secret: an automaton"
    script = draft.scripts[0]
    assert script.shared_library.startswith("function tick()")
    assert script.on_output and not script.on_model_context
    tinkerer, guard = draft.options
    assert tinkerer.title == "Tinkerer" and guard.title == "Guard"
    assert "\r" not in tinkerer.prompt
    assert tinkerer.placeholders == ["character.name", "Who is your oldest friend?"]
    assert [c.title for c in tinkerer.cards] == ["Pocket watch"]


def test_old_ai_dungeon_world_info_given_as_a_json_string():
    draft = read("aid-old-scenario.json").draft
    assert [(c.title, c.keys, c.entry) for c in draft.cards] == [
        ("mine", "mine,shaft", "The mine was closed thirty years ago."),
        ("Jo", "Jo", "Jo is a stubborn miner."),
    ]
    assert draft.plot_essentials == "You are a miner named Jo."
    assert draft.scripts[0].on_input.startswith("const modifier")


def test_story_cards_with_a_repeated_title_are_numbered_and_warned_about():
    imported = read("aid-story-cards.json")
    assert [c.title for c in imported.draft.cards] == ["Elena", "Valtara", "Elena (2)"]
    assert [c.type for c in imported.draft.cards] == ["character", "location", "item"]
    assert any("numbered" in w for w in imported.warnings)


def test_lorebooks_become_cards():
    st_cards = read("sillytavern-world.json").draft.cards
    assert [(c.title, c.keys, c.always_on) for c in st_cards] == [
        ("The Rusty Tankard", "tavern,inn", False),
        ("Mara", "Mara", True),
    ]
    nai = read("novelai-lorebook.json")
    assert [(c.title, c.type, c.always_on) for c in nai.draft.cards] == [
        ("The Spire", "places", False),
        ("Law", "custom", True),
    ]
    assert nai.warnings == ["1 disabled entry was left out."]
    card = read("character-card-v2.json").draft
    assert card.plot_essentials == "The airship Kestrel is fleeing a storm."
    assert [c.title for c in card.cards] == ["Captain Vey", "The Kestrel", "Storms"]
    assert card.cards[0].entry == (
        "A weathered airship captain.\n\nCaptain Vey's personality: Gruff, loyal."
    )


def test_an_api_response_is_unwrapped():
    raw = {
        "data": {"scenario": {"title": "Wrapped", "prompt": "Hi", "memory": "m", "storyCards": []}}
    }
    imported = read_raw(raw)
    assert imported.format == detect.AID_NEW and imported.draft.title == "Wrapped"


def test_a_utf8_bom_and_utf16_files_are_read():
    text = json.dumps({"title": "Bom", "prompt": "Ça va", "memory": "", "authorsNote": ""})
    assert read_scenario(b"\xef\xbb\xbf" + text.encode(), "x.json", LIMITS).draft.prompt == "Ça va"
    assert read_scenario(text.encode("utf-16"), "x.json", LIMITS).draft.title == "Bom"


# --- placeholders --------------------------------------------------------------------------------


def test_placeholders_are_found_once_and_filled():
    text = "You are ${name}. ${name} meets ${Your friend's name?}. ${unanswered} stays."
    assert placeholders_in(text) == ["name", "Your friend's name?", "unanswered"]
    filled = fill_placeholders(text, {"name": "Ada", "Your friend's name?": "Bo"})
    assert filled == "You are Ada. Ada meets Bo. ${unanswered} stays."


# --- the bundle ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(p.name for p in DATA.glob("*.json")))
def test_a_bundle_reads_back_exactly_what_it_wrote(name):
    draft = read(name).draft
    written = write_bundle(draft)
    again = read_raw(written, "again.json")
    assert again.format == detect.BUNDLE
    assert write_bundle(again.draft) == written


def test_the_shipped_scenarios_are_bundles():
    for path in BUILTIN_SCENARIOS.glob("*.json"):
        imported = read_scenario(path.read_bytes(), path.name, LIMITS)
        assert imported.format == detect.BUNDLE
        raw = json.loads(path.read_text())
        assert read_bundle(raw).title == raw["title"]


# --- bad input -----------------------------------------------------------------------------------


def test_not_json():
    assert "not JSON" in rejected(b"title: my scenario\n")
    # A PNG is read as a character card (tests/test_character_cards.py); this one is broken.
    assert "PNG is cut short" in rejected(b"\x89PNG\r\n\x1a\n....")
    assert rejected(b"") == "The file is empty."


def test_wrong_encoding_names_the_byte():
    message = rejected(b'{"title": "caf' + b"\xe9" + b'"}')
    assert "not UTF-8" in message and "0xe9" in message and "line 1" in message


def test_binary_data_is_told_from_text_in_another_encoding():
    # A damaged image, an archive: not "save it again as UTF-8".
    message = rejected(b"\xb6\x13\x00\x9c" * 64)
    assert "not text" in message and "binary" in message and "UTF-8" not in message


def test_a_truncated_file():
    text = (DATA / "aid-new-scenario.json").read_bytes()
    message = rejected(text[: len(text) // 2])
    assert "cut short" in message


def test_invalid_json_names_the_line():
    message = rejected(b'{"title": "x",\n "prompt": }')
    assert "line 2" in message


def test_a_file_over_the_cap():
    small = ImportLimits(max_bytes=1024)
    message = rejected({"title": "x" * 2000, "prompt": "", "memory": ""}, small)
    assert "largest accepted is 1 KiB" in message


def test_a_100000_element_array():
    message = rejected(list(range(100_000)))
    assert "100,000 items" in message


def test_deeply_nested_json():
    deep = b"[" * 100_000 + b"]" * 100_000
    assert "nested too deeply" in rejected(deep)
    moderately = {"title": "x", "storyCards": [], "details": {}}
    node = moderately["details"]
    for _ in range(60):
        node["x"] = {}
        node = node["x"]
    assert "nested too deeply" in rejected(moderately)


def test_duplicate_keys():
    message = rejected(b'{"title": "A", "prompt": "p", "title": "B", "memory": ""}')
    assert "“title” appears twice" in message


def test_nan_is_not_json():
    assert "NaN" in rejected(b'{"title": "x", "prompt": "p", "memory": "", "n": NaN}')


@pytest.mark.parametrize(
    "number",
    [b"9" * 5000, b"-" + b"9" * 101, b"9" * 400 + b".5", b"1e999"],
)
def test_a_number_too_long_to_read_is_refused_with_its_line(number):
    """Python's reader stops at 4,300 digits with a ValueError of its own, and a huge float is
    infinity: both are a file's problem, answered like any other."""
    data = b'{"title": "x 12345",\n "prompt": "p",\n "memory": "",\n "n": ' + number + b"}"
    message = rejected(data)
    assert message.startswith("The file has a number too long to read (line 4)")


def test_a_number_too_long_in_world_info_text_is_refused():
    inner = '[{"keys": "a", "entry": "b", "n": ' + "9" * 5000 + "}]"
    message = rejected({"title": "t", "prompt": "p", "memory": "", "worldInfo": inner})
    assert message.startswith("worldInfo has a number too long to read (line 1)")


def test_long_numbers_inside_text_are_only_text():
    raw = {"title": "t", "prompt": "9" * 5000, "memory": ""}
    assert read_raw(raw).draft.prompt == "9" * 5000


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"title": ["a"], "prompt": "p", "memory": ""}, "title: expected text, found a list"),
        (
            {"title": "t", "storyCards": [{"keys": "a", "value": 5, "title": "x"}, {"value": {}}]},
            "storyCards[1].value: expected text, found an object",
        ),
        ({"title": "t", "storyCards": "cards"}, "storyCards: expected a list, found text"),
        (
            [{"keys": "a", "value": "v"}, {"keys": ["a", 3, None], "value": "v"}],
            "[1].keys[2]: expected text, found null",
        ),
        (
            {"title": "t", "story_cards": [{"name": "x", "always_on": "maybe"}]},
            "story_cards[0].always_on: expected true or false",
        ),
        (
            {"title": "t", "prompt": "p", "memory": "", "worldInfo": "[{not json"},
            "worldInfo: a text that should hold the world-info list is not valid JSON",
        ),
        (
            {"title": "", "prompt": "p", "memory": "", "authorsNote": ""},
            "The scenario has no title",
        ),
        ({"hello": "world"}, "does not recognise this file's format"),
        ([], "empty list"),
        ([1, 2, 3], "not of story cards"),
    ],
)
def test_missing_or_wrongly_typed_fields_are_named(raw, expected):
    assert expected in rejected(raw)


def test_caps_are_those_of_live_creation():
    too_many = [{"keys": f"k{i}", "value": "v", "title": f"c{i}"} for i in range(6)]
    over = read_raw(too_many, limits=ImportLimits(max_cards=5))
    assert [c.title for c in over.draft.cards] == ["c0", "c1", "c2", "c3", "c4"]
    assert over.cards_left_out == 1
    assert "has 6 story cards; an adventure may hold at most 5" in over.warnings[0]
    long_entry = [{"keys": "a", "value": "x" * 4001, "title": "Big"}]
    message = rejected(long_entry)
    assert "story card 1 (“Big”): its entry has 4,001 characters; at most 4,000" in message
    long_keys = [{"keys": "k" * 501, "value": "v", "title": "Keys"}]
    assert "its keys together has 501 characters" in rejected(long_keys)
    script = {"title": "t", "gameCodeOnInput": "x" * 11}
    assert "input hook has 11 characters; at most 10" in rejected(
        script, ImportLimits(max_script_chars=10)
    )
    note = {"title": "t", "prompt": "", "memory": "", "authorsNote": "n" * 4001}
    assert "author's note has 4,001 characters" in rejected(note)


def test_an_imported_stat_schema_passes_the_same_validation():
    raw = json.loads((DATA / "04-rpg-world-state.json").read_text())
    raw["stat_schema"]["player"]["hp"]["min"] = "zero"
    message = rejected(raw)
    assert "world-state schema" in message and "player.hp" in message


def test_an_option_is_named_when_it_breaks_a_cap():
    raw = json.loads((DATA / "aid-new-scenario.json").read_text())
    raw["options"][1]["authorsNote"] = "a" * 5000
    assert "Option “Guard”'s author's note" in rejected(raw)


def test_an_adventure_file_is_sent_to_the_adventure_command():
    assert "/adventure import" in rejected({"campfire": "adventure", "version": 1})


def test_a_newer_bundle_version_is_refused():
    assert "version 2" in rejected({"campfire": "scenario", "version": 2, "title": "x"})


# --- fuzzing: only the player-facing import error ever comes out ---------------------------------


def _import_or_refuse(data: bytes) -> None:
    try:
        read_scenario(data, "fuzz.json", LIMITS)
    except ImportRejected as error:
        assert error.message.strip()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=300))
def test_fuzz_random_bytes(data):
    _import_or_refuse(data)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_values)
def test_fuzz_random_json(value):
    _import_or_refuse(json.dumps(value).encode())


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(FIXTURES),
    st.lists(st.tuples(st.integers(min_value=0), st.integers(0, 255)), min_size=1, max_size=8),
)
def test_fuzz_mutated_fixtures(fixture, edits):
    data = bytearray(fixture)
    for position, byte in edits:
        data[position % len(data)] = byte
    _import_or_refuse(bytes(data))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(FIXTURES), json_values, st.data())
def test_fuzz_fixtures_with_a_field_replaced(fixture, value, data):
    raw = json.loads(fixture)
    target = raw
    # Walk into the fixture a few steps, then replace whatever is there.
    for _ in range(data.draw(st.integers(0, 3))):
        if isinstance(target, dict) and target:
            key = data.draw(st.sampled_from(sorted(target)))
            if not isinstance(target[key], dict | list) or not target[key]:
                break
            target = target[key]
        elif isinstance(target, list) and target:
            i = data.draw(st.integers(0, len(target) - 1))
            if not isinstance(target[i], dict | list) or not target[i]:
                break
            target = target[i]
    if isinstance(target, dict) and target:
        target[data.draw(st.sampled_from(sorted(target)))] = value
    elif isinstance(target, list) and target:
        target[data.draw(st.integers(0, len(target) - 1))] = value
    _import_or_refuse(json.dumps(raw).encode())


def test_placeholders_in_the_steering_text_are_asked_too():
    raw = {"title": "t", "prompt": "You are ${name}.", "memory": "${name} hates ${food}."}
    assert read_raw(raw).draft.placeholders == ["name", "food"]


def test_more_than_five_questions_are_all_asked():
    """Issue 19: a scenario asking seven questions had the last two left as raw ``${…}``."""
    prompt = " ".join(f"${{q{i}}}" for i in range(7))
    imported = read_raw({"title": "t", "prompt": prompt, "memory": ""})
    assert imported.draft.placeholders == [f"q{i}" for i in range(7)]
    assert not any("questions" in w for w in imported.warnings)


def test_nul_and_unpaired_surrogates_are_sanitised_away():
    """JSON can escape both; neither can be stored (PostgreSQL text holds no NUL, and a lone
    surrogate is not text): NUL goes, a lone surrogate becomes U+FFFD, in code too."""
    imported = read_scenario(
        b'{"title": "x\\ud800", "prompt": "a\\u0000b\\u001bc", "memory": "",'
        b' "gameCodeOnInput": "const a = 1;\\u0000"}',
        "file.json",
        LIMITS,
    )
    draft = imported.draft
    assert (draft.title, draft.prompt) == ("x\ufffd", "abc")
    assert draft.scripts[0].on_input == "const a = 1;"
