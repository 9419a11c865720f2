"""Actions are written into the story the AI Dungeon way."""

from __future__ import annotations

import pytest

from engine.errors import InvalidInput
from engine.storage.models import ActionType
from engine.story.actions import PlayerAction, format_action

DO, SAY, STORY, CONTINUE = ActionType.DO, ActionType.SAY, ActionType.STORY, ActionType.CONTINUE


@pytest.mark.parametrize(
    ("kind", "typed", "written"),
    [
        (DO, "open the door", "> You open the door."),
        (DO, "Open the door!", "> You open the door!"),
        (DO, "I draw my sword", "> You draw your sword."),
        (DO, "light the lantern with my taper", "> You light the lantern with your taper."),
        (DO, "tell Mira I am sorry and hug her", "> You tell Mira you are sorry and hug her."),
        (DO, "look at myself in the water", "> You look at yourself in the water."),
        (DO, 'shout "I am here!" at the mist', '> You shout "I am here!" at the mist.'),
        (DO, "you   duck", "> You duck."),
        (DO, "I am ready", "> You are ready."),
        (DO, "ask NASA for help", "> You ask NASA for help."),
        (SAY, "Hello", '> You say "Hello."'),
        (SAY, '"who goes there?"', '> You say "Who goes there?"'),
        (STORY, "  A storm rolls in.\nThunder.  ", "A storm rolls in.\nThunder."),
        (CONTINUE, "ignored", ""),
    ],
)
def test_actions_read_like_ai_dungeon(kind, typed, written):
    assert format_action(PlayerAction(kind, typed)) == written


def test_a_named_character_acts_in_the_third_person():
    action = PlayerAction(SAY, "Stay close", actor="Gwen")
    assert format_action(action) == '> Gwen says "Stay close."'
    # A leading "I" is dropped; a verb that already agrees is kept as the player typed it.
    assert format_action(PlayerAction(DO, "I nocks an arrow", actor="Gwen")) == (
        "> Gwen nocks an arrow."
    )


@pytest.mark.parametrize(
    ("typed", "written"),
    [
        ("draw her sword", "> Ann draws her sword."),
        ("I draw my sword", "> Ann draws their sword."),
        (
            "ask Mira to follow me so I can show her",
            "> Ann asks Mira to follow them so Ann can show her.",
        ),
        ("I am ready", "> Ann is ready."),
        ("I'm ready", "> Ann is ready."),
        ("go north", "> Ann goes north."),
        ("try the door", "> Ann tries the door."),
        ("push the cart", "> Ann pushes the cart."),
        ("watch", "> Ann watches."),
        ("quickly hide", "> Ann quickly hides."),
        ("then run", "> Ann then runs."),
        ("can see the tower", "> Ann can see the tower."),
        ("have a look", "> Ann has a look."),
        ("don't move", "> Ann doesn't move."),
        ("play the lute", "> Ann plays the lute."),
    ],
)
def test_a_named_characters_verb_agrees_with_them(typed, written):
    assert format_action(PlayerAction(DO, typed, actor="Ann")) == written


@pytest.mark.parametrize("kind", [DO, SAY, STORY])
def test_an_empty_action_is_refused_with_a_reason(kind):
    with pytest.raises(InvalidInput, match="empty"):
        format_action(PlayerAction(kind, "   "))


def test_an_overlong_action_names_the_limit():
    with pytest.raises(InvalidInput, match="limit is 10"):
        format_action(PlayerAction(DO, "x" * 11), max_chars=10)
