"""Story cards' world-info options match as SillyTavern's World Info entries do.

The reference: SillyTavern's "World Info" documentation (docs.sillytavern.app/usage/core-concepts/
worldinfo/) and its source, ``public/scripts/world-info.js`` (``world_info_logic``: AND_ANY 0,
NOT_ALL 1, NOT_ANY 2, AND_ALL 3; ``matchKeys``; ``checkWorldInfo``'s secondary-key loop, its
probability roll and its recursive scan). Every test runs the real matcher and the real context
engine on cards built as the database hands them over (``Card.of`` with a stored ``lore``).
"""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from engine.prompt.card_scan import MAX_RECURSION_STEPS, ScanWindow, match_cards, scan_cards
from engine.prompt.cards import Card
from engine.prompt.lore import DEFAULT_LORE, clean_lore, read_lore
from engine.turns.context import ContextEngine
from tests.test_context import FULL, sections, user_text


def fired(cards: list[Card], text: str | ScanWindow, seed: str = "") -> dict[str, str]:
    return {m.card.title: m.reason for m in match_cards(cards, text, seed)}


def card(title: str, keys: str = "", entry: str = "", **lore: object) -> Card:
    return Card.of(title, entry or f"{title}'s entry.", keys, lore=lore)


# --- secondary keys and their four logics ---

SECONDARY = ["lantern", "salt"]


@pytest.mark.parametrize(
    ("logic", "text", "reason"),
    [
        # AND ANY: a primary key and at least one secondary key.
        ("and_any", "Mira lifts the lantern.", "fired by secondary key lantern (AND ANY)"),
        ("and_any", "Mira waits.", None),
        # NOT ALL: a primary key, and at least one secondary key absent.
        ("not_all", "Mira lifts the lantern.", "secondary key salt absent (NOT ALL)"),
        ("not_all", "Mira trades salt by lantern light.", None),
        # NOT ANY: a primary key and no secondary key.
        ("not_any", "Mira waits.", "no secondary key present (NOT ANY)"),
        ("not_any", "Mira counts salt.", None),
        # AND ALL: a primary key and every secondary key.
        ("and_all", "Mira trades salt by lantern light.", "with every secondary key (AND ALL)"),
        ("and_all", "Mira lifts the lantern.", None),
    ],
)
def test_secondary_keys_apply_each_of_the_four_logics(logic, text, reason):
    mira = card("Mira", "Mira", secondary=SECONDARY, logic=logic)
    got = fired([mira], text).get("Mira")
    assert got == (None if reason is None else f"trigger: Mira, {reason}")


def test_secondary_keys_never_fire_a_card_without_its_primary_key():
    mira = card("Mira", "Mira", secondary=SECONDARY, logic="not_any")
    assert fired([mira], "The lantern gutters.") == {}


def test_the_logic_may_come_as_sillytaverns_number():
    assert read_lore({"secondary": ["x"], "logic": 2}).logic == "not_any"
    assert read_lore({"secondary": ["x"], "logic": 1}).logic == "not_all"


# --- case, whole words, scan depth ---


def test_a_case_sensitive_card_ignores_other_spellings():
    rose = card("Rose", "Rose", case_sensitive=True)
    assert fired([rose], "She picked a rose.") == {}
    assert fired([rose], "Rose picked a flower.") == {"Rose": "trigger: Rose"}
    # Its secondary keys are case-sensitive too.
    guarded = card("Rose", "Rose", case_sensitive=True, secondary=["Guard"], logic="and_all")
    assert fired([guarded], "Rose and the guard.") == {}


def test_a_card_may_match_inside_words():
    cat = card("Cat", "cat", whole_words=False)
    assert fired([cat], "The catacombs open.") == {"Cat": "trigger: cat"}
    assert fired([card("Cat", "cat")], "The catacombs open.") == {}


def test_each_card_scans_as_deep_as_it_says():
    story = ["Old: the dragon slept.", "A", "B", "C", "D"]
    window = ScanWindow(story, "> You wait.", depth=4)
    deep = card("Deep", "dragon", scan_depth=5)
    default = card("Default", "dragon")
    action_only = card("Action", "wait", scan_depth=0)
    gone = card("Gone", "D", scan_depth=0)
    assert fired([deep, default, action_only, gone], window) == {
        "Deep": "trigger: dragon",
        "Action": "trigger: wait",
    }


# --- disabled, order, probability ---


def test_a_disabled_card_never_goes_in_even_always_on():
    off = Card.of("Off", "Never.", "Mira", always_on=True, lore={"disabled": True})
    assert fired([off, card("Mira", "Mira")], "Mira.") == {"Mira": "trigger: Mira"}


def test_probability_is_the_same_for_the_same_turn_and_varies_across_turns():
    maybe = Card.of("Maybe", "Perhaps.", "Mira", id=7, lore={"probability": 40})
    outcomes = {
        turn: [m.included for m in scan_cards([maybe], "Mira", f"3:{turn}")] for turn in range(200)
    }
    # A retry (the same adventure and turn) rolls the same.
    assert all(
        [m.included for m in scan_cards([maybe], "Mira", f"3:{turn}")] == outcomes[turn]
        for turn in range(200)
    )
    hits = sum(result == [True] for result in outcomes.values())
    assert 50 <= hits <= 110  # about 40 % of 200
    lost = next(t for t, result in outcomes.items() if result == [False])
    (match,) = scan_cards([maybe], "Mira", f"3:{lost}")
    assert match.reason == "trigger: Mira; probability 40%: not this turn"
    assert match_cards([maybe], "Mira", f"3:{lost}") == []
    never = Card.of("Never", "No.", "Mira", lore={"probability": 0})
    assert fired([never], "Mira") == {}


def test_insights_names_the_roll_and_order_sets_the_place_and_the_claim_on_the_budget():
    engine = ContextEngine()
    cards = [
        Card.of("Late", "Late lore.", "Mira", id=1, lore={"order": 300}),
        Card.of("Early", "Early lore.", "Mira", id=2, lore={"order": 10}),
        Card.of("Plain", "Plain lore.", "Mira", id=3),
        Card.of("Chance", "Chance lore.", "Mira", id=4, lore={"probability": 1}),
    ]
    inputs = replace(FULL, cards=cards, action_text="> You hail Mira.", adventure_id=5)
    built = engine.build(inputs)
    text = user_text(built)
    assert text.index("Early lore.") < text.index("Plain lore.") < text.index("Late lore.")
    assert "Chance lore." not in text
    report = sections(built)["story_cards"]
    assert [(i.label, i.included) for i in report.items] == [
        ("Early", True),
        ("Plain", True),
        ("Chance", False),
        ("Late", True),
    ]
    assert report.items[2].reason == "trigger: Mira; probability 1%: not this turn"
    assert report.reason == "4 of 4 cards triggered; 1 not this turn by chance"
    # With room for one card, the highest order claims it (SillyTavern spends its budget so).
    tight = ContextEngine(card_share=0.0)
    cheap = replace(inputs, cards=cards[:3])
    squeezed = sections(tight.build(cheap))["story_cards"]
    assert not any(i.included for i in squeezed.items)
    assert all(i.reason.startswith("over the 0% card budget") for i in squeezed.items)


# --- recursion ---


def test_a_cards_text_triggers_others_when_it_recurses():
    mira = card("Mira", "Mira", "Mira serves the Salt Guild.", recurse=True)
    guild = card("Guild", "Salt Guild", "The Salt Guild rules the docks from the Tower.")
    tower = card("Tower", "Tower", "The Tower leans.")
    assert fired([tower, guild, mira], "> You hail Mira.") == {
        "Mira": "trigger: Mira",
        "Guild": "trigger: Salt Guild (in the text of Mira)",
    }
    # The guild's text triggers the tower only when it too recurses.
    guild = card("Guild", "Salt Guild", guild.entry, recurse=True)
    assert fired([tower, guild, mira], "> You hail Mira.")["Tower"] == (
        "trigger: Tower (in the text of Guild)"
    )


def test_recursion_respects_exclusion_prevention_and_its_bound():
    mira = card("Mira", "Mira", "Mira serves the Salt Guild.", recurse=True)
    shy = card("Guild", "Salt Guild", "The guild.", exclude_recursion=True)
    assert fired([mira, shy], "Mira") == {"Mira": "trigger: Mira"}
    silent = card("Mira", "Mira", "Mira serves the Salt Guild.")  # no recursion: AI Dungeon's way
    assert fired([silent, card("Guild", "Salt Guild")], "Mira") == {"Mira": "trigger: Mira"}
    # A chain longer than the bound stops at it.
    chain = [card(f"C{i}", f"k{i}", f"Next is k{i + 1}.", recurse=True) for i in range(12)]
    got = fired(chain, "k0")
    assert len(got) == 1 + MAX_RECURSION_STEPS
    # A loop ends (each card goes in once).
    a = card("A", "alpha", "beta", recurse=True)
    b = card("B", "beta", "alpha", recurse=True)
    assert set(fired([a, b], "alpha")) == {"A", "B"}


# --- the stored options ---


def test_options_are_validated_bounded_and_stored_compactly():
    warnings: list[str] = []
    stored = clean_lore(
        {
            "secondary": ["lantern", "Lantern", "", "salt"],
            "logic": "and_all",
            "probability": 150,
            "order": 5,
            "scan_depth": "deep",
            "whole_words": False,
            "recurse": "yes",
            "colour": "red",
        },
        warnings,
        where="Card “Mira”: ",
    )
    assert stored == {
        "secondary": ["lantern", "salt"],
        "logic": "and_all",
        "order": 5,  # the probability, clamped to 100, is the default: not stored
        "whole_words": False,
    }
    (warning,) = warnings
    assert warning.startswith("Card “Mira”: world-info options not kept as written:")
    for part in ("probability 150", "scan_depth (a number)", "recurse (true or false)", "colour"):
        assert part in warning
    assert clean_lore({}, []) == {}
    assert read_lore(None) is DEFAULT_LORE
    assert read_lore({"probability": "x"}) == DEFAULT_LORE
    long = clean_lore({"secondary": ["k" * 300] * 2 + [f"x{i}" * 100 for i in range(9)]}, [])
    assert sum(len(k) + 1 for k in long["secondary"]) <= 1000


# --- regular-expression keys, on RE2 ---


def test_regex_keys_fire_with_their_flags():
    tide = card("Tide", regex=["/tides?/i"])
    assert fired([tide], "TIDES turn.") == {"Tide": "trigger: /tides?/i"}
    strict = card("Tide", regex=["/Tides?/"])
    assert fired([strict], "tides turn.") == {}
    # A card fires on a plain key or a regular-expression one; secondary keys still apply.
    both = card("Both", "harbour", regex=["/\\bport\\w*/"], secondary=["ship"], logic="and_any")
    assert fired([both], "The portside ship.") == {
        "Both": "trigger: /\\bport\\w*/, fired by secondary key ship (AND ANY)"
    }


def test_a_backtracking_pattern_cannot_stall_a_turn():
    # (a+)+$ takes exponential time in a backtracking engine on "aaaa…b"; RE2 is linear.
    evil = card("Evil", regex=["/(a+)+$/"])
    story = ["a" * 50_000 + "b"] * 4
    started = time.perf_counter()
    assert fired([evil], ScanWindow(story, "> You wait.")) == {}
    assert time.perf_counter() - started < 1.0


def test_regex_keys_re2_cannot_run_or_too_long_are_named_not_kept():
    warnings: list[str] = []
    stored = clean_lore(
        {"regex": ["/(?<=sir )Bob/", "/" + "a" * 400 + "/", "/ok/i", "plain", "/x/q"]},
        warnings,
    )
    assert stored == {"regex": ["/ok/i"]}
    (warning,) = warnings
    assert "regex key “/(?<=sir )Bob/” (not one RE2 runs, or too long)" in warning
    assert warning.count("not one RE2 runs") == 4  # the look-behind, the long one, "plain", q
    many = clean_lore({"regex": [f"/k{i}/" for i in range(20)]}, warnings)
    assert len(many["regex"]) == 16


# --- sticky, cooldown, delay: replayed from the line ---


def line(*texts: str, action: str, depth: int = 0) -> ScanWindow:
    """A story line of ``texts`` (entries 0…, actions and narrations alternating from an
    opening narration) and the new action; turns began at every action."""
    return ScanWindow(
        list(texts),
        action,
        depth,
        indices=list(range(len(texts))),
        turn=len(texts),
        starts=[i for i in range(1, len(texts)) if i % 2 == 1],
    )


BELL = ("Opening.", "> You ring the bell.", "It tolls.")


def test_a_sticky_card_stays_in_after_its_keys_leave_the_scan():
    bell = card("Bell", "bell", sticky=2)  # scan depth 0: only the new action is scanned
    assert fired([bell], line(*BELL, action="> You walk.")) == {
        "Bell": "sticky: stays in through entry 3"
    }
    # Two entries later it is gone.
    assert fired([bell], line(*BELL, "> You walk.", "Road.", action="> You rest.")) == {}
    # Another line (a branch, or the line after an undo) without the bell has no sticky card.
    assert fired([bell], line("Opening.", "> You sing.", "Birds.", action="> You walk.")) == {}


def test_a_card_on_cooldown_is_reported_and_left_out_then_fires_again():
    bell = card("Bell", "bell", cooldown=2)
    (match,) = scan_cards([bell], line(*BELL, action="> You ring the bell again."), "4")
    assert (match.included, match.reason) == (
        False,
        "trigger: bell; on cooldown for 1 more entry",
    )
    later = line(*BELL, "> You wait.", "Silence.", action="> You ring the bell.")
    assert fired([bell], later, "4") == {"Bell": "trigger: bell"}


def test_a_delayed_card_waits_for_the_line_to_grow():
    bell = card("Bell", "bell", delay=4)
    (match,) = scan_cards([bell], line("Opening.", action="> You ring the bell."), "4")
    assert (match.included, match.reason) == (False, "trigger: bell; delayed until entry 4")
    assert fired([bell], line(*BELL, "> You wait.", action="> You ring the bell.")) == {
        "Bell": "trigger: bell"
    }


# --- inclusion groups ---


def test_one_card_of_an_inclusion_group_goes_in_drawn_by_weight_and_fixed_per_turn():
    heavy = Card.of(
        "Heavy", "Heavy rain.", "rain", id=1, lore={"group": "weather", "group_weight": 900}
    )
    light = Card.of(
        "Light", "Light rain.", "rain", id=2, lore={"group": "weather", "group_weight": 100}
    )
    other = Card.of("Other", "Puddles.", "rain", id=3)
    wins = {"Heavy": 0, "Light": 0}
    for turn in range(200):
        matches = scan_cards([heavy, light, other], "rain", f"9:{turn}")
        included = [m.card.title for m in matches if m.included]
        assert "Other" in included and len(included) == 2
        winner = included[0] if included[0] != "Other" else included[1]
        wins[winner] += 1
        loser = next(m for m in matches if not m.included)
        assert loser.reason == f"trigger: rain; inclusion group weather: {winner} chosen"
        # The same turn draws the same.
        again = scan_cards([heavy, light, other], "rain", f"9:{turn}")
        assert [m.included for m in again] == [m.included for m in matches]
    assert 150 <= wins["Heavy"] <= 195 and wins["Light"] >= 5


def test_group_override_takes_the_highest_order_and_a_settled_group_takes_no_more():
    a = card("A", "rain", group="weather", order=10, group_override=True)
    b = card("B", "rain", group="weather", order=50, group_override=True)
    c = card("C", "rain", group="weather", order=99)
    assert fired([a, b, c], "rain") == {"B": "trigger: rain"}
    # A card brought in by recursion cannot unseat the group's card.
    storm = card("Storm", "storm", "Then rain.", recurse=True, group="sky")
    rain = card("Rain", "rain", group="weather")
    snow = card("Snow", "snow", group="weather")
    got = {m.card.title: m for m in scan_cards([storm, snow, rain], "storm and snow", "1")}
    assert got["Snow"].included and not got["Rain"].included
    assert got["Rain"].reason.endswith("inclusion group weather: chosen before")


def test_group_scoring_keeps_the_cards_whose_keys_matched_most():
    # SillyTavern's filterGroupsByScoring: a scoring entry whose key-match score
    # (WorldInfoBuffer.getScore: primary keys found, and secondary ones under AND ANY) is below
    # the group's best drops out before the weighted draw; one without scoring stays a candidate.
    heavy = card("Heavy", "rain, downpour, flood", group="weather", group_scoring=True)
    light = card("Light", "rain, drizzle", group="weather", group_scoring=True, group_weight=9000)
    for turn in range(20):
        got = {m.card.title: m for m in scan_cards([heavy, light], "rain, a flood", str(turn))}
        assert got["Heavy"].included and got["Heavy"].reason == "trigger: rain"
        assert got["Light"].reason == (
            "trigger: rain; inclusion group weather: Heavy chosen (most keys matched)"
        )
    # Secondary keys found under AND ANY count towards the score too.
    tied = [
        Card.of("Heavy", "Heavy.", "rain", lore={"group": "w", "group_scoring": True}),
        Card.of(
            "Light",
            "Light.",
            "rain",
            lore={"group": "w", "group_scoring": True, "secondary": ["grey"]},
        ),
    ]
    got = {m.card.title: m for m in scan_cards(tied, "grey rain", "1")}
    assert got["Light"].included and "(most keys matched)" in got["Heavy"].reason
    # A card without scoring is not dropped for its score: the draw decides among all.
    unscored = card("Plain", "rain", group="weather", group_weight=1_000_000)
    got = {m.card.title: m for m in scan_cards([heavy, unscored], "rain, a flood", "1")}
    assert got["Plain"].included and "most keys" not in got["Heavy"].reason
    # Without group scoring anywhere in the group, the weights alone choose.
    assert read_lore({"group": "weather"}).group_scoring is False
    assert card("X", group="g", group_scoring=True).lore.describe() == [
        "inclusion group g (most keys matched, then weight 100)"
    ]


def test_recursion_does_not_bring_in_a_card_on_cooldown():
    herald = card("Herald", "herald", "The herald rings the bell.", recurse=True)
    bell = card("Bell", "bell", cooldown=2)
    window = line(*BELL, action="> You greet the herald.")
    assert fired([herald, bell], window, "4") == {"Herald": "trigger: herald"}
    later = line(*BELL, "> You wait.", "Silence.", action="> You greet the herald.")
    assert fired([herald, bell], later, "4")["Bell"] == "trigger: bell (in the text of Herald)"
