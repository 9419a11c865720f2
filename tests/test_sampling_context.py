"""The author's note at a depth: entries from the story's end, the new action counted as the
newest, as SillyTavern's "@ Depth" and AI Dungeon's note 3 entries from the end place it; unset,
it closes the system message, where the provider's prompt cache keeps it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from engine.prompt.sections import authors_note_line
from engine.turns.context import ContextEngine
from tests.test_context import FULL, recent_story, sections, story, user_text

ENGINE = ContextEngine()
NOTE = authors_note_line(FULL.authors_note)
#: FULL's story: six entries, 0 to 5, the newest last.
ENTRIES = [entry.text for entry in FULL.history]


def placed(depth: int | None, **changes):
    built = ENGINE.build(replace(FULL, authors_note_depth=depth, **changes))
    return built, user_text(built)


def test_unset_the_note_closes_the_system_message_as_before():
    built, user = placed(None)
    assert built.messages[0].content.endswith(NOTE) and NOTE not in user
    assert sections(built)["authors_note"].reason == "in the system message (the same every turn)"


@pytest.mark.parametrize(
    ("depth", "before"),
    [(2, ENTRIES[5]), (3, ENTRIES[4]), (6, ENTRIES[1])],
)
def test_a_depth_puts_the_note_that_many_entries_from_the_end(depth, before):
    """The new action is the newest entry: depth 2 is before the story's last entry."""
    built, user = placed(depth)
    assert NOTE not in built.messages[0].content
    paragraphs = recent_story(built)
    assert paragraphs[paragraphs.index(NOTE) + 1] == before
    # Counted once: its own section, its text inside the story's.
    report = sections(built)
    into = depth - 1
    entries = "entry" if into == 1 else "entries"
    assert report["authors_note"].reason == (
        f"depth {depth}: in the story, before its last {into} {entries}"
    )
    assert built.report.used == sum(section.tokens for section in built.report.sections)
    assert user.count(NOTE) == 1


def test_depth_one_is_just_before_the_action_and_zero_just_after_it():
    _, user = placed(1)
    assert user.index(ENTRIES[5]) < user.index("World State:") < user.index(NOTE)
    assert user.index(NOTE) < user.index(FULL.action_text)
    built, user = placed(0)
    assert user.index(FULL.action_text) < user.index(NOTE)
    assert sections(built)["authors_note"].reason == "depth 0: after the new action"


def test_a_depth_past_the_story_puts_it_at_the_story_start():
    built, _ = placed(100)
    assert recent_story(built)[0] == NOTE
    assert recent_story(built)[1] == ENTRIES[0]


def test_on_a_continue_the_depth_counts_from_the_story_end():
    built, _ = placed(1, action_text="")
    paragraphs = recent_story(built)
    assert paragraphs[paragraphs.index(NOTE) + 1] == ENTRIES[5]
    built, user = placed(0, action_text="")
    assert user.index(ENTRIES[5]) < user.index(NOTE)


def test_a_note_a_script_sets_follows_the_depth_too():
    built, _ = placed(3, authors_note_from_script=True)
    paragraphs = recent_story(built)
    assert paragraphs[paragraphs.index(NOTE) + 1] == ENTRIES[4]


def test_a_story_with_no_entries_yet_has_the_note_after_it():
    built, user = placed(4, history=())
    assert user.index(NOTE) < user.index(FULL.action_text)
    assert sections(built)["authors_note"].reason.endswith("(the story has none yet: after it)")


def test_a_depth_costs_the_cached_prefix_only_from_the_note_on():
    """What changes between two turns at depth 2 begins where the note stood: before it, the
    prompt is the same (the prefix a provider serves from its cache)."""
    first = user_text(ENGINE.build(replace(FULL, authors_note_depth=2, history=story(6))))
    second = user_text(ENGINE.build(replace(FULL, authors_note_depth=2, history=story(8))))
    shared = next(i for i, (a, b) in enumerate(zip(first, second, strict=False)) if a != b)
    assert first[:shared].endswith(ENTRIES[4] + "\n\n")
    assert first[shared:].startswith(NOTE)
