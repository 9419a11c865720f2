"""The narrative state's validator, the block's "story" list, and the prompt's section: each
event type accepted and refused, references resolved, the order of authority, the scene."""

from __future__ import annotations

import pytest

from engine.prompt.tokens import count_tokens
from engine.story.narrative.canon import protected_facts
from engine.story.narrative.events import (
    BY_HOST,
    BY_MODEL,
    EVENT_TYPES,
    MAX_EVENTS_PER_TURN,
    apply_events,
)
from engine.story.narrative.render import describe, prompt_section
from engine.story.narrative.state import empty, stored
from engine.story.narrative.turn import settle_story
from engine.story.world.apply import settle
from engine.story.world.parser import extract_state

PEOPLE = [
    {"type": "add_entity", "id": "mira", "name": "Mira", "kind": "person"},
    {"type": "add_entity", "name": "Tomas Reed", "kind": "person"},
    {"type": "add_entity", "id": "harbor", "name": "The Harbor", "kind": "place"},
    {"type": "add_entity", "id": "lantern", "name": "brass lantern", "kind": "item"},
]


def world(*events: dict) -> dict:
    outcome = apply_events(empty(), [*PEOPLE, *events])
    assert not outcome.refused, outcome.refused
    return outcome.state


#: Each event type: one the validator accepts (on ``world()``), what it changes (part, key,
#: the value after), and one it refuses, with words from the reason.
CASES = {
    "add_entity": (
        {"type": "add_entity", "name": "Old Gull", "kind": "ship"},
        ("entities", "old_gull", {"name": "Old Gull", "kind": "ship"}),
        ({"type": "add_entity", "kind": "ship"}, "'name' is missing"),
    ),
    "set_location": (
        {"type": "set_location", "entity": "Mira", "place": "the harbor"},
        ("locations", "mira", "harbor"),
        ({"type": "set_location", "entity": "mira", "place": "moon"}, "no known entity"),
    ),
    "set_possession": (
        {"type": "set_possession", "item": "brass lantern", "holder": "tomas_reed"},
        ("possessions", "lantern", "tomas_reed"),
        ({"type": "set_possession", "item": "lantern", "holder": 7}, "must name an entity"),
    ),
    "add_fact": (
        {"type": "add_fact", "id": "gate", "text": "The north gate is locked.", "about": "mira"},
        ("facts", "gate", {"text": "The north gate is locked.", "about": "mira", "by": "model"}),
        ({"type": "add_fact", "id": "gate"}, "'text' is missing"),
    ),
    "retract_fact": (
        {"type": "retract_fact", "id": "Mira owes Tomas."},
        ("facts", "mira_owes_tomas", None),
        ({"type": "retract_fact", "id": "dragons"}, "there is no fact"),
    ),
    "relate": (
        {"type": "relate", "a": "mira", "b": "Tomas Reed", "relation": "rivals"},
        (
            "relationships",
            "mira>tomas_reed",
            {"a": "mira", "b": "tomas_reed", "relation": "rivals"},
        ),
        ({"type": "relate", "a": "mira", "b": "mira", "relation": "self"}, "itself"),
    ),
    "open_thread": (
        {"type": "open_thread", "id": "key", "text": "Who stole the brass key?"},
        ("threads", "key", {"text": "Who stole the brass key?"}),
        ({"type": "open_thread", "text": 42}, "must be text"),
    ),
    "close_thread": (
        {"type": "close_thread", "id": "debt"},
        ("threads", "debt", None),
        ({"type": "close_thread", "id": "key"}, "no open thread"),
    ),
}


def test_every_event_type_has_a_case():
    assert set(CASES) == set(EVENT_TYPES)


@pytest.mark.parametrize("kind", EVENT_TYPES)
def test_each_event_type_is_accepted_and_refused_correctly(kind):
    accepted, (part, key, after), (refused, reason) = CASES[kind]
    start = world(
        {"type": "add_fact", "text": "Mira owes Tomas."},
        {"type": "open_thread", "id": "debt", "text": "Will Mira pay?"},
    )
    outcome = apply_events(start, [accepted])
    assert not outcome.refused
    assert outcome.state[part].get(key) == after
    (change,) = outcome.changes
    assert (change.key, change.after) == (key, after)
    assert change.before == start[part].get(key)

    outcome = apply_events(start, [refused])
    assert outcome.state == start and not outcome.changes
    (refusal,) = outcome.refused
    assert reason in refusal.reason and refusal.event == refused


def test_unknown_types_and_shapes_are_refused_and_the_rest_goes_on():
    start = world()
    outcome = apply_events(
        start,
        [
            {"type": "teleport", "entity": "mira"},
            "mira goes home",
            {"entity": "mira"},
            {"type": "set_location", "entity": "mira", "place": "harbor"},
        ],
    )
    reasons = [r.reason for r in outcome.refused]
    assert "unknown event type 'teleport'" in reasons[0]
    assert "object" in reasons[1] and "unknown event type None" in reasons[2]
    assert outcome.state["locations"] == {"mira": "harbor"}


def test_references_resolve_by_id_name_or_slug_and_in_order():
    outcome = apply_events(
        empty(),
        [
            # Named before it exists: refused; the same event after the add resolves.
            {"type": "set_location", "entity": "Jory", "place": "Jory's Inn"},
            {"type": "add_entity", "name": "Jory"},
            {"type": "add_entity", "name": "Jory's Inn", "kind": "place"},
            {"type": "set_location", "entity": "JORY", "place": "jory_s_inn"},
        ],
    )
    assert len(outcome.refused) == 1 and "add_entity it first" in outcome.refused[0].reason
    assert outcome.state["locations"] == {"jory": "jory_s_inn"}
    # Two entities may not share a name: a reference by name must mean one.
    clash = apply_events(outcome.state, [{"type": "add_entity", "id": "j2", "name": "jory"}])
    assert "already called" in clash.refused[0].reason


def test_null_clears_a_location_or_a_holder_and_the_log_keeps_what_was():
    start = world(
        {"type": "set_location", "entity": "mira", "place": "harbor"},
        {"type": "set_possession", "item": "lantern", "holder": "mira"},
    )
    outcome = apply_events(
        start,
        [
            {"type": "set_location", "entity": "mira", "place": None},
            {"type": "set_possession", "item": "lantern", "holder": None},
        ],
    )
    assert outcome.state["locations"] == {} and outcome.state["possessions"] == {}
    assert [(c.kind, c.before, c.after) for c in outcome.changes] == [
        ("location", "harbor", None),
        ("possession", "mira", None),
    ]


def test_a_place_cannot_end_up_inside_what_is_inside_it():
    start = world(
        {"type": "set_location", "entity": "lantern", "place": "mira"},
        {"type": "set_location", "entity": "mira", "place": "harbor"},
    )
    outcome = apply_events(start, [{"type": "set_location", "entity": "mira", "place": "lantern"}])
    assert "inside itself" in outcome.refused[0].reason and outcome.state == start


def test_an_event_that_changes_nothing_records_nothing():
    start = world({"type": "set_location", "entity": "mira", "place": "harbor"})
    again = apply_events(start, [{"type": "set_location", "entity": "mira", "place": "harbor"}])
    assert not again.changes and not again.refused and again.state == start


def test_the_host_outranks_canon_which_outranks_the_narration():
    start = world({"type": "add_fact", "id": "gate", "text": "The north gate is locked."})
    canon = protected_facts(["The north gate is LOCKED."])
    # Canon: the narration may neither retract nor rewrite the fact.
    for event in (
        {"type": "retract_fact", "id": "gate"},
        {"type": "add_fact", "id": "gate", "text": "The north gate stands open."},
    ):
        outcome = apply_events(start, [event], by=BY_MODEL, protected=canon)
        assert "Canon" in outcome.refused[0].reason and outcome.state == start
    # Without Canon behind it, the narration may.
    assert not apply_events(start, [{"type": "retract_fact", "id": "gate"}]).refused
    # The host may, Canon or not; and what the host set, the narration may not change.
    hosted = apply_events(
        start,
        [{"type": "add_fact", "id": "gate", "text": "The gate is rubble."}],
        by=BY_HOST,
        protected=canon,
    )
    assert not hosted.refused and hosted.state["facts"]["gate"]["by"] == BY_HOST
    narrated = apply_events(hosted.state, [{"type": "retract_fact", "id": "gate"}])
    assert "set by the host" in narrated.refused[0].reason
    again = apply_events(hosted.state, [{"type": "retract_fact", "id": "gate"}], by=BY_HOST)
    assert not again.refused and "gate" not in again.state["facts"]


def test_a_canon_passage_protects_the_facts_it_states_in_its_own_words():
    start = world(
        {"type": "add_fact", "id": "ice", "text": "The harbour never  freezes."},
        {"type": "add_fact", "id": "fog", "text": "Fog rolls in at dusk."},
    )
    passage = "# The harbour\n\nThe HARBOUR never freezes, whatever the winter. Its lanterns..."
    canon = protected_facts([passage])
    retract = [{"type": "retract_fact", "id": "ice"}, {"type": "retract_fact", "id": "fog"}]
    outcome = apply_events(start, retract, by=BY_MODEL, protected=canon)
    assert [r.reason for r in outcome.refused] == [
        "fact 'ice' is Canon; the narration may not change it"
    ]
    assert set(outcome.state["facts"]) == {"ice"}


def test_a_turn_proposes_a_bounded_number_of_events():
    events = [{"type": "open_thread", "text": f"Question {i}?"} for i in range(50)]
    outcome = apply_events(empty(), events)
    assert len(outcome.state["threads"]) == MAX_EVENTS_PER_TURN
    assert len(outcome.refused) == 50 - MAX_EVENTS_PER_TURN


def test_applying_never_changes_the_state_it_was_given():
    start = world({"type": "set_location", "entity": "mira", "place": "harbor"})
    frozen = repr(start)
    apply_events(start, [{"type": "set_location", "entity": "mira", "place": None}])
    assert repr(start) == frozen


def test_the_block_hands_the_story_list_out_apart_from_the_delta():
    reply = (
        "Mira slips the lantern to Tomas.\n\n```state\n"
        '{"player": {"hp": -5}, "story": [{"type": "set_possession", "item": "lantern",'
        ' "holder": "tomas_reed"},],}\n```'
    )
    found = extract_state(reply)
    assert found.prose == "Mira slips the lantern to Tomas."
    assert found.delta == {"player.hp": -5}
    assert found.story == ({"type": "set_possession", "item": "lantern", "holder": "tomas_reed"},)
    # A "story" that is not a list is no reserved list: the block is not a delta.
    assert extract_state('Prose.\n\n```json\n{"story": "x"}\n```').story == ()


def test_without_a_schema_the_block_is_read_only_while_a_feature_holds_it():
    reply = 'Mira waits.\n\n```state\n{"story": [{"type": "open_thread", "text": "Why?"}]}\n```'
    plain = settle(None, {}, reply, turn_index=3)
    assert plain.prose == reply and plain.story == ()
    held = settle(None, {}, reply, turn_index=3, hold=True)
    assert held.prose == "Mira waits." and held.story == ({"type": "open_thread", "text": "Why?"},)
    assert settle_story({}, held.story, tracking=False) is None
    outcome = settle_story({}, held.story, tracking=True)
    assert outcome is not None and outcome.state == {"threads": {"why": {"text": "Why?"}}}


def test_the_prompt_shows_the_scene_and_open_threads_within_its_budget():
    state = world(
        {"type": "add_entity", "name": "Vell", "kind": "person"},
        {"type": "set_location", "entity": "mira", "place": "harbor"},
        {"type": "set_possession", "item": "lantern", "holder": "mira"},
        {"type": "relate", "a": "mira", "b": "tomas_reed", "relation": "owes money to"},
        {"type": "add_fact", "text": "Vell hates the sea.", "about": "vell"},
        {"type": "add_fact", "text": "Mira cannot swim."},
        {"type": "open_thread", "id": "key", "text": "Who stole the brass key?"},
    )
    section = prompt_section(state, "> You ask Mira and Tomas Reed about the storm.", 400)
    text = section.text
    assert "Mira (person): at The Harbor; holds brass lantern" in text
    assert "Mira → Tomas Reed: owes money to" in text
    assert "Mira cannot swim." in text  # names someone in the scene
    assert "Who stole the brass key?" in text
    # Vell is not in the scene: neither Vell nor the fact about Vell.
    assert "Vell" not in text
    # Mira and Tomas Reed are named; The Harbor only through Mira, Vell not at all.
    assert section.reason.startswith("2 of 5 entities named in the scene, 1 open threads")

    # A small budget keeps what fits and says what it left out.
    small = prompt_section(state, "Mira and Tomas Reed", 30)
    assert count_tokens(small.text) <= 30
    assert "left out" in small.reason
    # An unrelated scene and no threads: nothing at all.
    quiet = world()
    assert prompt_section(quiet, "The wind howls.", 400).text == ""


def test_the_whole_state_in_words_and_stored_compactly():
    state = world({"type": "set_location", "entity": "mira", "place": "harbor"})
    text = describe(state)
    assert "**Who and what**" in text and "Mira (person): at The Harbor" in text
    assert describe(empty()) == "Nothing is tracked yet."
    assert stored(empty()) == {} and set(stored(state)) == {"entities", "locations"}


def test_the_rules_example_is_a_block_the_validator_accepts():
    from engine.prompt.held_block import instruction
    from engine.story.narrative.render import STORY_PART

    rule = instruction([STORY_PART])
    example = rule[rule.rindex("```state") : rule.rindex("```") + 3]
    found = extract_state(f"Mira stumbles.\n\n{example}")
    outcome = apply_events(empty(), found.story)
    assert found.prose == "Mira stumbles." and found.story
    assert not outcome.refused and len(outcome.changes) == len(found.story)


def test_only_the_host_corrects_a_server_adventure_and_only_its_player_a_dm():
    from engine.people.access.rules import Actor, may_correct_story
    from engine.storage.models import Adventure

    served = Adventure(title="t", prompt="p", server_id=9, host_id=1)
    assert may_correct_story(served, Actor(user_id=1, server_id=9))
    # Managing the server is not enough: the host's word is what outranks the narration.
    manager = Actor(user_id=2, server_id=9, manages_server=True, manages_messages=True)
    assert not may_correct_story(served, manager)
    private = Adventure(title="t", prompt="p", owner_id=3, host_id=3)
    assert may_correct_story(private, Actor(user_id=3))
    assert not may_correct_story(private, Actor(user_id=4))
