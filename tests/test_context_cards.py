"""Story cards in the layout: always-on cards before the story, triggered ones after it.

Always-on cards are the same every turn, so they go with plot essentials, before the story,
where a provider's prefix cache (or the embedded model's reuse of the last prompt) serves them;
triggered cards change with the story, so they follow it ("World Lore:" both times).
"""

from __future__ import annotations

from dataclasses import replace

from engine.prompt.cards import Card
from engine.prompt.inputs import ContextInputs
from engine.prompt.tokens import count_tokens
from engine.turns.context import HEADINGS, ContextEngine
from tests.test_context import FULL, sections, story, user_text

ENGINE = ContextEngine()
LORE = HEADINGS["story_cards"]
CARDS = [
    Card.of("Mira", "Mira smuggles salt.", "Mira"),
    Card.of("Sea", "The sea rises.", always_on=True),
    Card.of("Ferry", "The ferry leaks.", "ferry"),
    Card.of("Town", "The town is called Brack.", always_on=True),
]


def test_always_on_cards_follow_plot_essentials_and_triggered_ones_follow_the_story():
    inputs = replace(FULL, cards=CARDS, action_text="> You hail Mira.")
    built = ENGINE.build(inputs)
    user = user_text(built)
    order = [
        "You are Ash",
        f"{LORE}\nThe sea rises.\nThe town is called Brack.",
        "Story Summary:\nAsh found",
        "Recent Story:\n",
        "Memories:\n",
        f"{LORE}\nMira smuggles salt.",
        "World State:\nhp 55",
        inputs.action_text,
    ]
    positions = [user.index(part) for part in order]
    assert positions == sorted(positions)
    assert "The ferry leaks." not in user  # not triggered
    keys = [s.key for s in built.report.sections]
    assert keys.index("plot_essentials") + 1 == keys.index("always_cards")
    assert keys.index("always_cards") + 1 == keys.index("story_summary")
    assert keys.index("history") < keys.index("story_cards") < keys.index("world_state")
    always, triggered = sections(built)["always_cards"], sections(built)["story_cards"]
    assert (always.title, always.reason) == (
        "Always-on cards",
        "2 always on, the same every turn: before the story",
    )
    assert [(i.label, i.reason) for i in always.items] == [
        ("Sea", "always on"),
        ("Town", "always on"),
    ]
    assert triggered.reason == "1 of 2 cards triggered"
    assert [(i.label, i.reason) for i in triggered.items] == [("Mira", "trigger: Mira")]
    # Each section pays for its own heading.
    heading = count_tokens(LORE)
    assert always.tokens == heading + sum(i.tokens for i in always.items)
    assert triggered.tokens == heading + triggered.items[0].tokens


def test_the_next_turn_repeats_the_always_on_cards_in_its_prefix():
    """A turn later the story has grown and other cards are triggered: everything up to the
    story's window, the always-on cards included, is the same text."""
    first = replace(FULL, cards=CARDS, history=story(6), line_length=6, action_text="> Mira?")
    second = replace(first, history=story(8), line_length=8, action_text="> The ferry!")
    a, b = (user_text(ENGINE.build(inputs)) for inputs in (first, second))
    head = a.split("Recent Story:\n", 1)[0]
    assert "The sea rises." in head and "The town is called Brack." in head
    assert b.startswith(head)
    assert "Mira smuggles salt." in a.split("Recent Story:\n", 1)[1]
    assert "The ferry leaks." in b.split("Recent Story:\n", 1)[1]


def test_no_always_on_cards_no_section_and_none_triggered_is_still_reported():
    only_keyed = [c for c in CARDS if not c.always_on]
    built = ENGINE.build(replace(FULL, cards=only_keyed, action_text="> Wait."))
    assert "always_cards" not in sections(built)
    assert sections(built)["story_cards"].reason == "0 of 2 cards triggered"
    assert LORE not in user_text(built)
    # Always-on cards alone: the triggered section is reported empty, with nothing sent.
    only_always = [c for c in CARDS if c.always_on]
    built = ENGINE.build(replace(FULL, cards=only_always, action_text="> Wait."))
    assert user_text(built).count(LORE) == 1
    assert sections(built)["story_cards"].tokens == 0
    assert {"always_cards", "story_cards"}.isdisjoint(
        sections(ENGINE.build(replace(FULL, cards=[])))
    )


def test_the_two_sections_share_one_card_budget_always_on_first():
    big = "salt " * 150  # about 150 tokens each
    cards = [
        Card.of("Triggered", f"Triggered: {big}", "salt"),
        Card.of("Pinned", f"Pinned: {big}", always_on=True),
        Card.of("Also pinned", f"Also pinned: {big}", always_on=True),
    ]
    inputs = ContextInputs(budget=1000, max_output_tokens=300, cards=cards, action_text="> salt")
    cap = int(ENGINE.history_ceiling(inputs) * ENGINE.card_share)
    built = ENGINE.build(inputs)
    always, triggered = sections(built)["always_cards"], sections(built)["story_cards"]
    assert 0 < always.tokens + triggered.tokens <= cap
    assert [(i.label, i.included) for i in always.items] == [
        ("Pinned", True),
        ("Also pinned", False),
    ]
    assert always.reason.endswith("; 1 left out")
    assert always.items[1].reason == "over the 40% card budget (always on)"
    assert [(i.label, i.included) for i in triggered.items] == [("Triggered", False)]
    assert triggered.tokens == 0 and user_text(built).count(LORE) == 1
