"""World state as text: the model's guide and live state, the players' chip and /state."""

from __future__ import annotations

import json
from pathlib import Path

from engine.prompt.held_block import instruction
from engine.story.world.parser import extract_delta
from engine.story.world.referee import Change, Rejection, StateReport, referee
from engine.story.world.render import (
    STATE_PART,
    chip,
    describe,
    guide,
    ladder,
    live_state,
    npcs_in_scene,
    reminder,
    state_block,
)
from engine.story.world.schema import EMPTY, initial_state, parse_schema

DATA = Path(__file__).resolve().parent / "data" / "04-rpg-world-state.json"
SCHEMA = parse_schema(json.loads(DATA.read_text(encoding="utf-8"))["stat_schema"])


def state_with(**values) -> dict:
    state = initial_state(SCHEMA)
    state["values"].update({k.replace("__", "."): v for k, v in values.items()})
    return state


def test_band_ladders():
    assert ladder(SCHEMA.stat("player.hp")) == (
        "0 dead · 1–24 gravely wounded · 25–49 hurt · 50–79 scratched · 80–99 healthy"
        " · 100 full health"
    )
    assert ladder(SCHEMA.stat("player.mana")) == "0–9 drained · 10–29 steady · 30–50 brimming"
    assert ladder(SCHEMA.stat("npcs.gwen.trust")) == (
        "-100 to -31 hostile · -30 to 29 wary · 30–69 friendly · 70–100 devoted"
    )


def test_guide_names_every_stat_with_its_ladder():
    text = guide(SCHEMA)
    for path in SCHEMA.by_path:
        assert path in text
    assert "- player.hp 0–100 (at most ±35 a turn): The player's physical health." in text
    assert "0 dead · 1–24 gravely wounded" in text
    assert "world.day 1+ (counter, only goes up)" in text
    assert "milestones.strongbox_found (milestone: set true once reached)" in text
    assert "NPC Gwen (npcs.gwen; in scene when the story mentions Gwen, ranger, her)" in text


def test_live_state_has_band_words():
    text = live_state(SCHEMA, state_with(player__hp=55), recent_text="")
    assert "hp 55/100 (scratched)" in text
    assert "player: hp 55/100 (scratched) · mana 30/50 (brimming) · outfit " in text
    assert "flags: alarm_raised no · player_hidden yes" in text
    assert "npcs." not in text


def test_npcs_are_listed_only_in_scene():
    state = state_with(npcs__gwen__trust=45)
    text = live_state(SCHEMA, state, recent_text="You glance at GWEN, who nods.")
    assert "npcs.gwen (Gwen, in scene): health 100/100 (healthy) · trust 45 (friendly)" in text
    assert "bandit_leader" not in text
    assert [n.id for n in npcs_in_scene(SCHEMA, "Gwendolyn waves")] == []
    assert [n.id for n in npcs_in_scene(SCHEMA, "the scarred chief and the ranger")] == [
        "gwen",
        "bandit_leader",
    ]


def test_state_part_and_reminder():
    assert STATE_PART.key == "state" and "paths above" in STATE_PART.rule
    line = reminder(SCHEMA)
    assert line == "Remember: end with a ```state block of what changed (or {})."
    assert "\n" not in line


def test_the_emit_rules_example_parses_and_referees_cleanly():
    example = instruction([STATE_PART]).split("```state\n")[1].split("\n```")[0]
    _, delta = extract_delta(f"Prose.\n```state\n{example}\n```")
    _, report = referee(SCHEMA, initial_state(SCHEMA), delta, turn_index=1)
    assert not report.rejected and len(report.changes) == 3


def test_chip():
    report = StateReport(
        applied=[
            Change("npcs.gwen.trust", 20, 25),
            Change("milestones.strongbox_found", False, True),
            Change("flags.alarm_raised", False, True),
            Change("player.outfit", "leather", "a stolen bandit cloak, far too big for you"),
        ],
        clamped=[Change("player.hp", 100, 65, "limited to ±35 per turn")],
        rejected=[
            Rejection("mana", 5, "unknown path"),
            Rejection("world.day", -1, "counters only go up"),
        ],
    )
    assert chip(SCHEMA, report) == (
        "hp 100 → 65 (scratched; limited to ±35 per turn)"
        " · outfit → “a stolen bandit cloak, far too big for…”"
        " · alarm raised: yes · Gwen trust 20 → 25 (wary) · ✓ strongbox found"
        " · ✗ rejected mana (unknown path) · ✗ rejected day (counters only go up)"
    )
    assert chip(SCHEMA, StateReport()) == ""
    assert chip(SCHEMA, None) == ""
    assert chip(SCHEMA, StateReport(clamped=[Change("player.hp", 0, 0, "clamped to 0..100")])) == (
        "hp stays 0 (dead; clamped to 0..100)"
    )


def test_chip_is_short():
    report = StateReport(rejected=[Rejection(f"x{i}", i, "unknown path") for i in range(20)])
    text = chip(SCHEMA, report)
    assert text.count("·") == 7 and text.endswith("+13 more")


def test_describe():
    text = describe(SCHEMA, state_with(player__hp=55, milestones__strongbox_found=True))
    assert "**Player**\n`player.hp` 55/100 (scratched)" in text
    assert "✓ strongbox found — Recover the stolen strongbox" in text
    assert "☐ camp cleared — Clear the bandit camp of enemies" in text
    assert "**Gwen** (Gwen, ranger, her)\n`npcs.gwen.health` 100/100 (healthy)" in text
    assert "`npcs.bandit_leader.aggression` 40/100 (fierce)" in text


def test_state_block():
    assert state_block(StateReport(block="```state\n{}\n```\n")) == "```state\n{}\n```"
    report = StateReport(
        applied=[Change("npcs.gwen.trust", 20, 25), Change("milestones.camp_cleared", False, True)],
        clamped=[Change("player.hp", 100, 65, "limited")],
    )
    block = state_block(report)
    assert extract_delta(f"x\n{block}")[1] == {
        "npcs.gwen.trust": 5,
        "milestones.camp_cleared": True,
        "player.hp": -35,
    }
    assert state_block(StateReport()) == "```state\n{}\n```"


def test_empty_schema_renders_nothing():
    report = StateReport(applied=[Change("player.hp", 1, 2)])
    assert guide(EMPTY) == live_state(EMPTY, {}, recent_text="x") == ""
    assert reminder(EMPTY) == describe(EMPTY, {}) == ""
    assert chip(EMPTY, StateReport()) == ""
    assert chip(EMPTY, report) == ""
