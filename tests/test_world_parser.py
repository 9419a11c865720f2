"""The state-block parser: tolerant of the model, never eating the story."""

from __future__ import annotations

import json

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from engine.story.world.parser import extract_delta, extract_state, flatten_delta, loads_tolerant

PROSE = "Gwen looses an arrow; the bandit drops.\n\nWhat now?"


@pytest.mark.parametrize(
    "block",
    [
        '```state\n{"player": {"hp": -15}}\n```',
        '```json\n{"player": {"hp": -15}}\n```',
        '```\n{"player": {"hp": -15}}\n```',
        '```STATE\n{"player.hp": -15}\n```',
        '```state {"player": {"hp": -15}}```',
        '```state\n{"player": {"hp": -15,},}\n```',
        "```state\n{player: {hp: -15}}\n```",
        '```state\n{"player": {"hp": -15}}',  # cut off before the closing fence
        '```state\n{"player": {"hp": -15',  # ...and before the closing braces
        '{"player": {"hp": -15}}',
        '{\n  "player.hp": -15\n}',
    ],
)
def test_accepted_forms(block):
    prose, delta = extract_delta(f"{PROSE}\n\n{block}\n")
    assert prose == PROSE
    assert delta == {"player.hp": -15}


def test_plus_numbers_and_strings_are_kept_for_the_referee():
    text = f'{PROSE}\n```state\n{{"player": {{"hp": +5, "mana": "-3", "gold": "=40"}}}}\n```'
    assert extract_delta(text) == (
        PROSE,
        {"player.hp": 5, "player.mana": "-3", "player.gold": "=40"},
    )


def test_set_objects_and_other_values():
    text = (
        PROSE + '\n```state\n{"player": {"hp": {"set": 40}, "outfit": "mail"}, '
        '"flags": {"alarm": true}, "milestones.found": true, "world": {"day": {"=": 2}}}\n```'
    )
    assert extract_delta(text)[1] == {
        "player.hp": {"set": 40},
        "player.outfit": "mail",
        "flags.alarm": True,
        "milestones.found": True,
        "world.day": {"set": 2},
    }


def test_the_raw_block_is_kept():
    block = '```state\n{"player": {"hp": -15,},}\n```'
    found = extract_state(f"{PROSE}\n\n{block}\n\n")
    assert found.block == block and found.prose == PROSE


def test_empty_block():
    assert extract_delta(f"{PROSE}\n```state\n{{}}\n```") == (PROSE, {})
    assert extract_delta(f"{PROSE}\n{{}}") == (PROSE, {})


def test_broken_state_fence_is_removed_with_an_empty_delta():
    assert extract_delta(f"{PROSE}\n```state\nhp goes down a bit\n```") == (PROSE, {})


def test_state_fence_in_the_middle_is_removed():
    text = 'She runs.\n```state\n{"player": {"hp": -5}}\n```\nThe door slams.'
    assert extract_delta(text) == ("She runs.\n\nThe door slams.", {"player.hp": -5})


def test_the_last_state_fence_wins():
    text = 'A\n```state\n{"a": 1}\n```\nB\n```state\n{"b": 2}\n```'
    assert extract_delta(text) == ("A\n\nB", {"b": 2})


@pytest.mark.parametrize(
    "text",
    [
        "The sign over the door reads {closed}",
        'He whispers: {"hp": -5}',  # not on a line of its own
        'The scroll shows:\n{"hp": -5}\nand then crumbles.',  # not at the end
        "The code is\n{1, 2, 3}",
        'A riddle:\n{"who": ["a", "b"]}',  # a list is not a delta
        'A note:\n{"the answer": 4}',  # keys with spaces are not paths
        "```json\n[1, 2]\n```",
        "A poem:\n```\nroses are red\n```",
        '```json\n{"a": 1}\n```\nand prose after the fence.',
        "Curly {braces} end here }",
        "",
        "   ",
    ],
)
def test_prose_is_never_eaten(text):
    assert extract_delta(text) == (text.rstrip(), {})


def test_not_text_never_raises():
    assert extract_delta(None) == ("", {})  # type: ignore[arg-type]


def test_loads_tolerant():
    assert loads_tolerant('{"a": True, b: +1.5, "c": [1,2,],}') == {
        "a": True,
        "b": 1.5,
        "c": [1, 2],
    }
    assert loads_tolerant("{'a': 'x'}") == {"a": "x"}
    assert loads_tolerant("not json") is None
    assert loads_tolerant("[" * 5000) is None


def test_flatten_delta():
    assert flatten_delta({"player": {"hp": -1, "x": {"set": 3}}, "a.b": [1]}) == {
        "player.hp": -1,
        "player.x": {"set": 3},
        "a.b": [1],
    }
    assert flatten_delta("nope") == {}


@settings(max_examples=300, deadline=None)
@given(st.text())
@example("x\n{}")
@example("```state")
@example('```json\n{"a": 1}')
def test_never_raises_and_only_removes_a_tail_delta(text):
    found = extract_state(text)
    prose, delta = found.prose, found.delta
    assert isinstance(prose, str) and isinstance(delta, dict)
    if "```" not in text:
        stripped = text.rstrip()
        assert stripped.startswith(prose)
        if prose != stripped:
            # Only a trailing object that parses as a delta is ever removed.
            assert isinstance(loads_tolerant(stripped[len(prose) :]), dict)


_keys = st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True)
_leaf = st.one_of(
    st.integers(-1000, 1000),
    st.booleans(),
    st.text(max_size=20).filter(lambda t: "`" not in t),
    st.sampled_from(["+5", "-5", "=40"]),
)
_delta = st.dictionaries(
    _keys, st.one_of(_leaf, st.dictionaries(_keys, _leaf, min_size=1, max_size=3)), max_size=4
)


@settings(max_examples=300, deadline=None)
@given(
    st.text().filter(lambda t: "```" not in t),
    _delta,
    st.sampled_from(["state", "json", ""]),
    st.sampled_from(["\n", "\n\n", " "]),
)
def test_prose_with_an_appended_fence_is_recovered(prose, delta, label, gap):
    text = f"{prose}{gap}```{label}\n{json.dumps(delta)}\n```\n"
    found_prose, found_delta = extract_delta(text)
    assert found_prose == prose.rstrip()
    assert found_delta == flatten_delta(delta)


@settings(max_examples=200, deadline=None)
@given(st.text().filter(lambda t: "```" not in t), _delta.filter(bool))
def test_prose_with_an_appended_bare_object_is_recovered(prose, delta):
    prose = prose.rstrip()
    text = f"{prose}\n{json.dumps(delta, indent=1)}"
    found_prose, found_delta = extract_delta(text)
    assert found_delta == flatten_delta(delta)
    assert found_prose == prose


_prose_piece = st.text(alphabet=st.characters(blacklist_characters="`"), max_size=40).filter(
    # A word right after an unlabelled run is that run's label; "state" would make it a block.
    lambda t: not t.lstrip(" \t").casefold().startswith("state")
)
_stray = st.tuples(
    st.integers(3, 5),
    st.sampled_from(["", "python", "json", "text", "js"]),
    st.sampled_from(["\n", " ", ""]),
).map(lambda t: "`" * t[0] + t[1] + t[2])


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(_prose_piece, _stray), min_size=1, max_size=4),
    _prose_piece,
    _delta,
    st.sampled_from(["state", "json", ""]),
    st.sampled_from(["\n", "\n\n", " "]),
)
@example([("She types ", "```")], " into the terminal.", {"hp": -5}, "state", "\n\n")
@example([("", "````python\n")], "print(1)", {"hp": -5}, "", "\n")
def test_stray_fences_before_the_block_never_hide_it(pieces, last, delta, label, gap):
    """Unpaired runs of 3-5 backticks in the prose, labelled or not, before a valid block:
    the block is still found, and the prose shown is the prose, strays and all, never the
    raw block."""
    prose = "".join(piece + stray for piece, stray in pieces) + last
    block = f"```{label}\n{json.dumps(delta)}\n```"
    found = extract_state(f"{prose}{gap}{block}\n")
    assert found.delta == flatten_delta(delta)
    assert found.block == block
    assert found.prose == prose.rstrip()
    assert block not in found.prose
