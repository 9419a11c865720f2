"""Story-card keys: comma-separated, case-insensitive, whole words, safe for any text."""

from __future__ import annotations

import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.prompt.card_scan import match_cards
from engine.prompt.cards import Card, compile_keys, find_trigger, parse_keys, scan_text


def test_keys_are_split_on_commas_stripped_and_deduplicated():
    assert parse_keys(" Mira, mira ,, the  Old Mill ,") == ("Mira", "the Old Mill")
    assert parse_keys(["Mira, Ash", "ash"]) == ("Mira", "Ash")
    assert parse_keys("") == ()
    assert parse_keys(" , ,  ") == ()


@pytest.mark.parametrize(
    ("keys", "text", "trigger"),
    [
        ("Mira", "You see mira by the river.", "Mira"),
        ("Mira", "MIRA!", "Mira"),
        ("Mira", "Mira's lantern", "Mira"),
        ("Mira", "Miranda waves.", None),
        ("Mira", "Admira waves.", None),
        ("mira, lantern", "The lantern gutters.", "lantern"),
        ("Old Mill", "the old\n  mill creaks", "Old Mill"),
        ("O'Brien", "Ask o'brien about it.", "O'Brien"),
        ("C++", "She codes in C++ daily.", "C++"),
        ("(hp)", "watch your (hp) now", "(hp)"),
        ("Zoë", "zoë laughs", "Zoë"),
        ("Straße", "STRASSE 9", "Straße"),  # compared case-folded
        ("Zoë", "Zoëlle laughs", None),
        ("東京", "我们去東京吧", None),  # no spaces between words: the key sits inside a word
        ("東京", "to 東京, quickly", "東京"),
        (".*", "anything at all", None),  # keys are text, never patterns
        (".*", "what .* means", ".*"),
        ("", "anything", None),
        ("  ,  ", "anything", None),
    ],
)
def test_keys_match_whole_words_case_insensitively(keys, text, trigger):
    assert find_trigger(keys, text) == trigger


def test_a_card_is_compiled_once_per_distinct_keys():
    first = Card.of("Mira", "A smuggler.", "Mira, the smuggler")
    second = Card.of("Mira again", "Another.", "Mira, the smuggler")
    assert first.matcher is second.matcher
    assert compile_keys(()) is None


def test_matching_cards_in_order_with_reasons():
    cards = [
        Card.of("Mira", "Mira smuggles salt.", "Mira"),
        Card.of("Empty", "   ", "Mira"),  # nothing to add, so never a match
        Card.of("World", "The sea is rising.", always_on=True),
        Card.of("Ash", "Ash is the player.", "Ash"),
        Card.of("Mill", "The mill is haunted.", "mill, miller"),
    ]
    matches = match_cards(cards, "The miller nods at mira.")
    assert [(m.card.title, m.reason) for m in matches] == [
        ("Mira", "trigger: Mira"),
        ("World", "always on"),
        ("Mill", "trigger: miller"),
    ]


def test_the_scan_window_is_the_last_entries_and_the_new_action():
    entries = ["one", "two", "three", "four", "five"]
    assert scan_text(entries, "> You wave.", 4) == "two\nthree\nfour\nfive\n> You wave."
    assert scan_text(entries, "", 2) == "four\nfive"
    assert scan_text(entries, "act", 0) == "act"


# --- properties --------------------------------------------------------------------------------

WORD_CHARS = string.ascii_letters + string.digits + "_"
key_text = st.text(min_size=1, max_size=20).filter(lambda k: "," not in k and k.strip())


@given(keys=st.text(max_size=60), text=st.text(max_size=200))
def test_any_keys_and_text_are_safe(keys, text):
    trigger = find_trigger(keys, text)
    assert trigger is None or trigger in parse_keys(keys)
    card = Card.of("t", "entry", keys)
    assert card.trigger(text) == trigger


@given(key=key_text, left=st.text(max_size=20), right=st.text(max_size=20))
def test_a_key_standing_alone_always_matches(key, left, right):
    (stripped,) = parse_keys(key)
    assert find_trigger(key, f"{left} {stripped} {right}") is not None


@given(
    key=st.text(alphabet=WORD_CHARS, min_size=1, max_size=12),
    left=st.text(alphabet=WORD_CHARS, min_size=1, max_size=5),
    right=st.text(alphabet=WORD_CHARS, min_size=1, max_size=5),
)
def test_a_key_inside_a_word_never_matches(key, left, right):
    assert find_trigger(key, left + key + right) is None


@given(key=st.text(alphabet=string.ascii_letters, min_size=1, max_size=12))
def test_matching_ignores_case(key):
    assert find_trigger(key, f"...{key.swapcase()}!") == key
