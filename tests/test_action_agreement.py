"""Every verb of a named character's action agrees with them, not only the first
(``engine.story.agreement``): each rule with the action that showed it, and what it must
leave as typed."""

from __future__ import annotations

import pytest

from engine.storage.models import ActionType
from engine.story.actions import PlayerAction, format_action
from engine.story.agreement import third_person


def written(typed: str, actor: str = "Ann") -> str:
    return format_action(PlayerAction(ActionType.DO, typed, actor=actor))


def test_the_reported_compound_action_agrees_as_a_whole():
    assert written("raise my lantern and climb the steps", actor="Brother Tomas") == (
        "> Brother Tomas raises their lantern and climbs the steps."
    )


@pytest.mark.parametrize(
    ("typed", "agreed"),
    [
        # A list of verbs, each alone before the next (rule 2b).
        ("draw, aim and fire", "> Ann draws, aims and fires."),
        ("duck and roll", "> Ann ducks and rolls."),
        ("nod, smile and say nothing", "> Ann nods, smiles and says nothing."),
        ("turn around and run", "> Ann turns around and runs."),
        ("fight or flee", "> Ann fights or flees."),
        # Typed agreed already: kept.
        ("draws, aims and fires", "> Ann draws, aims and fires."),
    ],
)
def test_a_list_of_verbs_agrees_throughout(typed, agreed):
    assert written(typed) == agreed


@pytest.mark.parametrize(
    ("typed", "agreed"),
    [
        ("open the door, then step inside", "> Ann opens the door, then steps inside."),
        ("open the door and then step inside", "> Ann opens the door and then steps inside."),
        ("open the door. Then step inside.", "> Ann opens the door. Then steps inside."),
        # "then" before a direction: no verb.
        ("go north and then east", "> Ann goes north and then east."),
    ],
)
def test_then_opens_a_verb(typed, agreed):
    assert written(typed) == agreed


@pytest.mark.parametrize(
    ("typed", "agreed"),
    [
        # Commas join clauses as "and" does.
        (
            "draw my sword, step forward and attack",
            "> Ann draws their sword, steps forward and attacks.",
        ),
        ("try the door but find it locked", "> Ann tries the door but finds it locked."),
        ("watch the door and wait", "> Ann watches the door and waits."),
        # A common action verb (rule 2c), or one an object follows (rule 2d).
        ("aim the bow and fire", "> Ann aims the bow and fires."),
        ("pick up the lamp and light it", "> Ann picks up the lamp and lights it."),
        ("whistle a tune and wave at Wren", "> Ann whistles a tune and waves at Wren."),
        ("light the torch and head north", "> Ann lights the torch and heads north."),
        ("I draw my sword and shield my eyes", "> Ann draws their sword and shields their eyes."),
        # Past adverbs, as at the opening.
        ("open the door and quickly hide", "> Ann opens the door and quickly hides."),
    ],
)
def test_each_coordinated_verb_agrees(typed, agreed):
    assert written(typed) == agreed


@pytest.mark.parametrize(
    ("typed", "kept"),
    [
        # Nouns after "and" stay nouns: what is drawn or taken too.
        ("draw my sword and shield", "> Ann draws their sword and shield."),
        ("take the bread and water", "> Ann takes the bread and water."),
        ("put the sword and shield back", "> Ann puts the sword and shield back."),
        (
            "take the sword and shield to the smith",
            "> Ann takes the sword and shield to the smith.",
        ),
        ("grab the rope, the lamp and the knife", "> Ann grabs the rope, the lamp and the knife."),
        ("grab rope, lamp and knife", "> Ann grabs rope, lamp and knife."),
        ("look at the black and white cat", "> Ann looks at the black and white cat."),
        # Names, and a clause with its own subject.
        ("ask Mira and Tom for help", "> Ann asks Mira and Tom for help."),
        ("give Mira the bread and Tom the water", "> Ann gives Mira the bread and Tom the water."),
        ("open the door and she follows", "> Ann opens the door and she follows."),
        ("Open the door. Mira follows.", "> Ann opens the door. Mira follows."),
        # Speech is the character's own words.
        ('shout "Run and hide!" and flee', '> Ann shouts "Run and hide!" and flees.'),
    ],
)
def test_what_is_no_verb_is_kept_as_typed(typed, kept):
    assert written(typed) == kept


def test_i_opening_a_coordinated_clause_is_its_subject():
    assert written("raise my lantern and I climb the steps") == (
        "> Ann raises their lantern and Ann climbs the steps."
    )


@pytest.mark.parametrize(
    ("typed", "agreed"),
    [
        # An opener before the verb ("never" was taken for the verb and kept as typed).
        ("never look back", "> Ann never looks back."),
        # A verb ending in "ly" is no adverb to pass over.
        ("reply to Mira", "> Ann replies to Mira."),
        # A base form ending in one "s", and "be".
        ("focus on the door", "> Ann focuses on the door."),
        ("be quiet and listen", "> Ann is quiet and listens."),
        # An adverb alone before a comma: the verb is still to come.
        ("slowly, open the door", "> Ann slowly, opens the door."),
    ],
)
def test_the_opening_verb_is_found_past_openers(typed, agreed):
    assert written(typed) == agreed


def test_solo_play_is_untouched():
    # "You" takes the base form: nothing to agree.
    assert format_action(PlayerAction(ActionType.DO, "draw, aim and fire")) == (
        "> You draw, aim and fire."
    )


def test_quotes_and_spacing_come_back_as_typed():
    typed = 'say "stop, and climb" then wait'
    assert third_person(typed) == 'says "stop, and climb" then waits'
