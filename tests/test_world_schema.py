"""The stat schema: the fixture's schema parses; every problem names its path."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from engine.errors import CampfireError
from engine.library.scenarios.shipped import BUILTIN_SCENARIOS
from engine.story.world.schema import (
    SchemaError,
    initial_state,
    parse_schema,
    sync_state,
)

DATA = Path(__file__).resolve().parent / "data" / "04-rpg-world-state.json"


def fixture_schema() -> dict:
    return json.loads(DATA.read_text(encoding="utf-8"))["stat_schema"]


def problems_of(raw: dict) -> list[str]:
    with pytest.raises(SchemaError) as caught:
        parse_schema(raw)
    return caught.value.problems


def test_the_shipped_scenario_carries_the_same_schema():
    shipped = BUILTIN_SCENARIOS / "bandit-camp.json"
    assert json.loads(shipped.read_text(encoding="utf-8"))["stat_schema"] == fixture_schema()


def test_the_fixture_schema_parses():
    schema = parse_schema(fixture_schema())
    assert not schema.is_empty
    assert list(schema.by_path) == [
        "world.day",
        "player.hp",
        "player.mana",
        "player.outfit",
        "flags.alarm_raised",
        "flags.player_hidden",
        "npcs.gwen.health",
        "npcs.gwen.trust",
        "npcs.bandit_leader.health",
        "npcs.bandit_leader.aggression",
        "milestones.camp_cleared",
        "milestones.strongbox_found",
        "milestones.gwen_survives",
    ]
    hp = schema.stat("player.hp")
    assert (hp.type, hp.min, hp.max, hp.initial, hp.max_delta) == ("number", 0, 100, 100, 35)
    assert hp.band(55) == "scratched" and hp.band(0) == "dead" and hp.band(100) == "full health"
    assert schema.stat("world.day").type == "counter"
    assert schema.stat("player.outfit").type == "text"
    assert schema.stat("flags.alarm_raised").type == "flag"
    assert schema.stat("milestones.camp_cleared").type == "milestone"
    gwen = schema.npc("gwen")
    assert gwen.name == "Gwen" and gwen.keys == ("Gwen", "ranger", "her")
    assert schema.stat("npcs.gwen.trust").band(20) == "wary"


def test_initial_state_is_flat_paths():
    state = initial_state(parse_schema(fixture_schema()))
    assert state["changed_at"] == {}
    values = state["values"]
    assert values["player.hp"] == 100
    assert values["world.day"] == 1
    assert values["player.outfit"] == "worn leather armor, travel-stained"
    assert values["flags.player_hidden"] is True
    assert values["npcs.gwen.trust"] == 20
    assert values["milestones.strongbox_found"] is False
    json.dumps(state)  # stored as JSON


def test_empty_schema():
    assert parse_schema({}).is_empty
    assert parse_schema(None).is_empty
    assert initial_state(parse_schema(None)) == {"values": {}, "changed_at": {}}


def test_schema_error_is_a_player_error():
    assert issubclass(SchemaError, CampfireError)


def test_max_not_above_min():
    raw = fixture_schema()
    raw["player"]["hp"]["max"] = -5
    assert "player.hp.max: must be a number greater than min" in problems_of(raw)


def test_bad_keys():
    raw = fixture_schema()
    raw["npcs"]["gwen"]["keys"] = 5
    assert problems_of(raw) == ["npcs.gwen.keys: must be comma-separated text or a list of text"]
    raw["npcs"]["gwen"]["keys"] = " , "
    assert problems_of(raw) == ["npcs.gwen.keys: must name at least one key"]


def test_overlapping_and_unsorted_bands():
    raw = fixture_schema()
    raw["player"]["hp"]["bands"] = [[0, 30, "low"], [20, 60, "mid"], [60, 101, "high"]]
    assert problems_of(raw) == [
        "player.hp.bands[1]: overlaps the band before it (starts at 20, before 30)"
    ]
    raw["player"]["hp"]["bands"] = [[50, 101, "high"], [0, 50, "low"]]
    assert problems_of(raw) == ["player.hp.bands[1]: bands must be sorted by their low bound"]
    raw["player"]["hp"]["bands"] = [[0, 50, "low"], [60, 50, "odd"], [70, 80]]
    assert problems_of(raw) == [
        "player.hp.bands[1]: high (50) must be greater than low (60)",
        'player.hp.bands[2]: must be [low, high_exclusive, "words"]',
    ]


def test_initial_outside_range():
    raw = fixture_schema()
    raw["npcs"]["gwen"]["stats"]["trust"]["initial"] = 150
    assert problems_of(raw) == ["npcs.gwen.stats.trust.initial: must be between -100 and 100"]


@pytest.mark.parametrize("initial", [[], {}])
def test_initial_that_is_not_a_number(initial):
    raw = fixture_schema()
    raw["player"]["hp"]["initial"] = initial
    assert problems_of(raw) == ["player.hp.initial: must be a number"]


def test_unknown_type_and_field():
    raw = fixture_schema()
    raw["player"]["luck"] = {"type": "dice"}
    raw["player"]["hp"]["max_delta"] = 5
    assert problems_of(raw) == [
        "player.hp.max_delta: unknown field for a number",
        "player.luck.type: unknown type 'dice' (expected number, counter, text, flag, milestone)",
    ]


def test_more_problems():
    raw = {
        "player": {
            "hp": {"min": "0", "max": 10, "cooldown": -1, "max_delta_per_turn": 0},
            "bad id": {"min": 0},
            "flag": {"type": "flag", "initial": "yes"},
        },
        "npcs": {"x": "nope", "y": {"stats": {"m": {"type": "milestone"}}}},
        "world": [],
    }
    assert problems_of(raw) == [
        "player.hp.cooldown: must be a whole number of turns, 0 or more",
        "player.hp.min: must be a number",
        "player.hp.max_delta_per_turn: must be greater than 0",
        "player.bad id: stat ids must be letters, digits and _ (no dots or spaces)",
        "player.flag.initial: must be true or false",
        "npcs.x: must be an object with name, keys, desc and stats",
        "npcs.y.stats.m.type: an NPC's stat cannot be a milestone",
        "world: must be an object",
    ]


def test_not_an_object():
    with pytest.raises(SchemaError) as caught:
        parse_schema(["hp"])  # type: ignore[arg-type]
    assert caught.value.problems == ["schema: must be a JSON object of groups"]


def test_message_lists_ten_problems_then_a_count():
    raw = {"player": {f"s{i}": {"type": "nope"} for i in range(13)}}
    error = pytest.raises(SchemaError, parse_schema, raw).value
    assert len(error.problems) == 13
    assert error.message.count("•") == 10
    assert error.message.endswith("…and 3 more")


def test_shorthands_and_inference():
    schema = parse_schema(
        {
            "stats": {
                "hp": {"min": 0, "max": 100},
                "name": {"initial": "Ann"},
                "lit": {"initial": True},
            },
            "milestones": {"done": "Finish it"},
            "npcs": {"old_tom": {}},
        }
    )
    assert schema.stat("stats.hp").initial == 0
    assert schema.stat("stats.name").type == "text"
    assert schema.stat("stats.lit").type == "flag"
    assert schema.stat("milestones.done").desc == "Finish it"
    assert schema.npc("old_tom").name == "Old Tom" and schema.npc("old_tom").keys == ("Old Tom",)


def test_fractional_numbers_stay_fractional():
    schema = parse_schema({"p": {"speed": {"min": 0, "max": 2.5, "initial": 1.5}}})
    assert schema.stat("p.speed").integer is False


def test_resolve_forgives_the_model():
    schema = parse_schema(fixture_schema())
    assert schema.resolve("player.hp").path == "player.hp"
    assert schema.resolve("Player.HP").path == "player.hp"
    assert schema.resolve("gwen.trust").path == "npcs.gwen.trust"
    assert schema.resolve("npcs.gwen.stats.trust").path == "npcs.gwen.trust"
    assert schema.resolve("hp").path == "player.hp"
    assert schema.resolve("health") is None  # ambiguous
    assert schema.resolve("mana.max") is None


def test_sync_state_repairs_and_never_mutates():
    schema = parse_schema(fixture_schema())
    stored = {
        "values": {"player.hp": 500, "player.mana": "lots", "gone.stat": 3},
        "changed_at": {"player.hp": 4, "gone.stat": 2, "player.mana": "x"},
        "extra": 1,
    }
    before = copy.deepcopy(stored)
    state = sync_state(schema, stored)
    assert stored == before
    assert state["values"]["player.hp"] == 100
    assert state["values"]["player.mana"] == 30
    assert "gone.stat" not in state["values"]
    assert state["changed_at"] == {"player.hp": 4}
    assert state["extra"] == 1
    assert sync_state(schema, None) == initial_state(schema)
