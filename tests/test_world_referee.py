"""The referee: every rule, in order, and nothing ever raises."""

from __future__ import annotations

import copy

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.story.world.referee import (
    Change,
    Rejection,
    StateReport,
    referee,
    set_value,
)
from engine.story.world.schema import initial_state, parse_schema

SCHEMA = parse_schema(
    {
        "world": {"day": {"type": "counter", "min": 1, "initial": 3}},
        "player": {
            "hp": {"min": 0, "max": 100, "initial": 90, "max_delta_per_turn": 35},
            "mana": {"min": 0, "max": 50, "initial": 30, "cooldown": 2},
            "gold": {"min": 0, "max": 10, "initial": 8},
            "outfit": {"type": "text", "initial": "leather", "max_length": 10},
        },
        "flags": {"alarm": {"initial": False}, "hidden": {"initial": True}},
        "milestones": {"found": {"desc": "Find it"}, "escaped": {"desc": "Get out"}},
        "npcs": {
            "gwen": {"name": "Gwen", "keys": "Gwen", "stats": {"trust": {"min": -10, "max": 10}}}
        },
    }
)


def start(**overrides) -> dict:
    state = initial_state(SCHEMA)
    state["values"]["milestones.found"] = True
    state["changed_at"]["player.mana"] = 4
    state["values"].update(overrides)
    return state


def test_every_rule_in_one_delta():
    state = start()
    before = copy.deepcopy(state)
    delta = {
        "player": {"hp": -50, "mana": -5, "gold": "+5", "nope": 1},
        "world.day": -1,
        "flags": {"alarm": True, "hidden": False},
        "milestones": {"found": False, "escaped": True},
        "npcs": {"gwen": {"trust": "lots"}},
        "player.outfit": "chainmail",
    }
    new, report = referee(SCHEMA, state, delta, turn_index=5, block="```state\n{}\n```")
    assert state == before  # never mutated
    assert report.applied == [
        Change("flags.alarm", False, True),
        Change("flags.hidden", True, False),
        Change("milestones.escaped", False, True),
        Change("player.outfit", "leather", "chainmail"),
    ]
    assert report.clamped == [
        Change("player.hp", 90, 55, "limited to ±35 per turn"),
        Change("player.gold", 8, 10, "clamped to 0..10"),
    ]
    assert report.rejected == [
        Rejection("player.mana", -5, "cooling down (2 more turns)"),
        Rejection("player.nope", 1, "unknown path"),
        Rejection("world.day", -1, "counters only go up"),
        Rejection("milestones.found", False, "milestones stay reached"),
        Rejection("npcs.gwen.trust", "lots", "expects a number"),
    ]
    assert report.block == "```state\n{}\n```"
    values = new["values"]
    assert values["player.hp"] == 55 and values["player.gold"] == 10
    assert values["player.mana"] == 30 and values["world.day"] == 3
    assert values["milestones.found"] is True and values["flags.hidden"] is False
    assert new["changed_at"] == {
        "player.mana": 4,
        "player.hp": 5,
        "player.gold": 5,
        "flags.alarm": 5,
        "flags.hidden": 5,
        "milestones.escaped": 5,
        "player.outfit": 5,
    }


def test_cooldown_counts_turn_indexes_and_a_retry_does_not_advance_it():
    state = start()
    state["changed_at"]["player.mana"] = 2
    first, report = referee(SCHEMA, state, {"player.mana": -5}, turn_index=5)
    assert report.applied == [Change("player.mana", 30, 25)]
    assert first["changed_at"]["player.mana"] == 5
    # A retry replays the same turn from the same state: same outcome.
    again, report = referee(SCHEMA, state, {"player.mana": -8}, turn_index=5)
    assert report.applied == [Change("player.mana", 30, 22)]
    # Even handed the state that already holds this turn's change, the same index is allowed.
    _, report = referee(SCHEMA, first, {"player.mana": -1}, turn_index=5)
    assert report.applied == [Change("player.mana", 25, 24)]
    # Later turns wait out the cooldown.
    _, report = referee(SCHEMA, first, {"player.mana": -1}, turn_index=6)
    assert report.rejected == [Rejection("player.mana", -1, "cooling down (2 more turns)")]
    _, report = referee(SCHEMA, first, {"player.mana": -1}, turn_index=7)
    assert report.rejected == [Rejection("player.mana", -1, "cooling down (1 more turn)")]
    _, report = referee(SCHEMA, first, {"player.mana": -1}, turn_index=8)
    assert report.applied == [Change("player.mana", 25, 24)]


def test_value_forms():
    state = start()
    cases = [
        ({"player.hp": "-10"}, 80),
        ({"player.hp": "+5"}, 95),
        ({"player.hp": "=70"}, 70),
        ({"player.hp": {"set": 60}}, 60),
        ({"player.hp": 2.6}, 93),  # whole numbers are rounded
        ({"hp": -1}, 89),  # a unique bare id
    ]
    for delta, hp in cases:
        new, report = referee(SCHEMA, state, delta, turn_index=9)
        assert new["values"]["player.hp"] == hp, delta
        assert not report.rejected
    new, report = referee(SCHEMA, state, {"flags.alarm": "true", "gwen.trust": 3}, turn_index=9)
    assert new["values"]["flags.alarm"] is True and new["values"]["npcs.gwen.trust"] == 3


def test_absolute_sets_still_obey_the_turn_limit_and_the_counter_rule():
    _, report = referee(SCHEMA, start(), {"player.hp": "=10", "world.day": "=2"}, turn_index=9)
    assert report.clamped == [Change("player.hp", 90, 55, "limited to ±35 per turn")]
    assert report.rejected == [Rejection("world.day", "=2", "counters only go up")]


def test_counter_goes_up_and_repeated_paths_share_the_turn_limit():
    new, report = referee(
        SCHEMA, start(), {"world.day": 1, "player.hp": -30, "hp": -30}, turn_index=9
    )
    assert new["values"]["world.day"] == 4
    assert new["values"]["player.hp"] == 55
    assert report.applied == [Change("world.day", 3, 4)]
    assert report.clamped == [Change("player.hp", 90, 55, "limited to ±35 per turn")]


def test_no_ops_are_not_reported():
    state = start()
    new, report = referee(
        SCHEMA,
        state,
        {"player.hp": 0, "flags.alarm": False, "milestones.escaped": False},
        turn_index=9,
    )
    assert report.is_empty and new == state


def test_clamp_that_changes_nothing_is_still_reported():
    _, report = referee(SCHEMA, start(**{"player.gold": 10}), {"player.gold": 3}, turn_index=9)
    assert report.clamped == [Change("player.gold", 10, 10, "clamped to 0..10")]
    assert report.applied == []


def test_text_is_cut_to_its_length():
    _, report = referee(SCHEMA, start(), {"player.outfit": "a" * 30}, turn_index=9)
    assert report.clamped == [Change("player.outfit", "leather", "a" * 10, "cut to 10 characters")]
    _, report = referee(SCHEMA, start(), {"player.outfit": 5}, turn_index=9)
    assert report.rejected == [Rejection("player.outfit", 5, "expects text")]
    _, report = referee(SCHEMA, start(), {"flags.alarm": 1}, turn_index=9)
    assert report.rejected == [Rejection("flags.alarm", 1, "expects true or false")]


def test_malformed_delta_and_state():
    state = start()
    for delta in (None, [], "hp -5", 5):
        new, report = referee(SCHEMA, state, delta, turn_index=1)  # type: ignore[arg-type]
        assert new == state and report.is_empty
    new, report = referee(SCHEMA, None, {"player.hp": -5}, turn_index=1)  # type: ignore[arg-type]
    assert new["values"]["player.hp"] == 85
    new, _ = referee(SCHEMA, {"values": "junk"}, {}, turn_index="x")  # type: ignore[arg-type]
    assert new == initial_state(SCHEMA)


def test_set_value_is_the_hosts_authority():
    state = start(**{"world.day": 5})
    new, report = set_value(SCHEMA, state, "player.hp", "10", turn_index=5)
    assert (
        report.applied == [Change("player.hp", 90, 10)] and new["changed_at"] == state["changed_at"]
    )
    new, report = set_value(SCHEMA, state, "player.mana", "+=5", turn_index=5)  # no cooldown
    assert report.applied == [Change("player.mana", 30, 35)]
    _, report = set_value(SCHEMA, state, "gwen.trust", "-7", turn_index=5)
    assert report.applied == [Change("npcs.gwen.trust", 0, -7)]
    _, report = set_value(SCHEMA, state, "world.day", "2", turn_index=5)
    assert report.applied == [Change("world.day", 5, 2)]
    _, report = set_value(SCHEMA, state, "milestones.found", "no", turn_index=5)
    assert report.applied == [Change("milestones.found", True, False)]
    _, report = set_value(SCHEMA, state, "player.outfit", '"a cloak"', turn_index=5)
    assert report.applied == [Change("player.outfit", "leather", "a cloak")]
    _, report = set_value(SCHEMA, state, "player.hp", "500", turn_index=5)
    assert report.clamped == [Change("player.hp", 90, 100, "clamped to 0..100")]
    _, report = set_value(SCHEMA, state, "player.hp", "lots", turn_index=5)
    assert report.rejected == [Rejection("player.hp", "=lots", "expects a number")]
    _, report = set_value(SCHEMA, state, "mana.max", "5", turn_index=5)
    assert report.rejected == [Rejection("mana.max", "5", "unknown path")]


def test_report_json_round_trip():
    _, report = referee(
        SCHEMA, start(), {"player.hp": -50, "x": 1, "flags.alarm": True}, turn_index=5
    )
    report.block = "```state\n{}\n```"
    data = report.to_json()
    assert StateReport.from_json(data) == report
    assert StateReport.from_json(None).is_empty
    assert StateReport.from_json({"applied": [1, {"path": "a"}], "rejected": "x"}).applied == [
        Change("a", None, None)
    ]


_paths = st.sampled_from([*SCHEMA.by_path, "nope", "hp", "gwen.trust", "", "a.b.c.d"])
_json = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=30),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(st.dictionaries(_paths, _json, max_size=6), _json),
    st.integers(-5, 20),
)
def test_never_raises(delta, turn_index):
    state = start()
    frozen = copy.deepcopy(state)
    new, report = referee(SCHEMA, state, delta, turn_index=turn_index)
    assert state == frozen
    assert set(new["values"]) == set(SCHEMA.by_path)
    for path, value in new["values"].items():
        stat = SCHEMA.stat(path)
        if stat.numeric:
            assert stat.min is None or value >= stat.min
            assert stat.max is None or value <= stat.max
    assert new["values"]["world.day"] >= 3 and new["values"]["milestones.found"] is True
    assert abs(new["values"]["player.hp"] - 90) <= 35
    StateReport.from_json(report.to_json())
