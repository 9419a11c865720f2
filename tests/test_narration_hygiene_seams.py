"""The seams a narration shows (issue 39, "the prose shows its seams"): the prompt read back as
narration, remarks about the story, slips into "I". Each rule on the text that showed it, on
what must stay (speech in quotes, a letter in italics, a first-person story the scenario asks
for), and through a turn with the fake model server on the shipped *Lantern Road*, whose
prompt the model echoed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.llm.providers.resolver import OperatorDefault
from engine.prompt.narrator import Voice
from engine.storage.models import ActionType, Adventure, StoryNode
from engine.story.narration_hygiene import tidy_narration
from engine.story.narration_seams import Seams, story_voice
from engine.turns.engine import TurnEngine
from engine.turns.events import TurnDone
from tests.helpers import new_adventure, play

LANTERN_ROAD = json.loads(
    (Path(__file__).parents[1] / "data/scenarios/lantern-road.json").read_text(encoding="utf-8")
)
#: What the Lantern Road's prompt stands on: the texts its narration was seen reading back.
STANDING = Seams(
    standing=(
        LANTERN_ROAD["plot_essentials"],
        LANTERN_ROAD["ai_instructions"],
        LANTERN_ROAD["authors_note"],
    )
)


@pytest.mark.parametrize(
    ("written", "kept"),
    [
        # The plot essentials as narration, word for word (the embedded model, issue 39).
        (
            "The player is the lamplighter of the Lantern Road, a quiet valley road between the "
            "village of Brindle and the old abbey. You lift the warm glass and listen.",
            "You lift the warm glass and listen.",
        ),
        # … and read back in part, or said in the prompt's own words for the player.
        (
            "The lanterns were blessed long ago to keep the marsh-lights away. The reeds hum.",
            "The reeds hum.",
        ),
        ("The player is the lamplighter of the old road. Dusk falls.", "Dusk falls."),
        # The instructions and the author's note read back.
        (
            "Write in second person, present tense, two or three short paragraphs. The wind "
            "rises.\n\nKeep the tone warm and eerie at once. A bell rings.",
            "The wind rises.\n\nA bell rings.",
        ),
    ],
)
def test_the_prompt_read_back_goes(written, kept):
    assert tidy_narration(written, STANDING) == kept


@pytest.mark.parametrize(
    ("written", "kept"),
    [
        # The remark the embedded model made (issue 39).
        (
            "I love how you've woven in the details of the lanterns! The reeds hum your tune.",
            "The reeds hum your tune.",
        ),
        ("What a wonderful story! The bell rings twice.", "The bell rings twice."),
        (
            "The door creaks open. Let me know if you'd like me to continue.",
            "The door creaks open.",
        ),
        ("You've crafted such a vivid atmosphere. Fog rolls in.", "Fog rolls in."),
        ("The lamp gutters. I hope you enjoy the story so far.", "The lamp gutters."),
        ("Shall I continue the story? The reeds sway.", "The reeds sway."),
    ],
)
def test_remarks_about_the_story_go(written, kept):
    assert tidy_narration(written, STANDING) == kept


@pytest.mark.parametrize(
    ("written", "kept"),
    [
        # The player's character slipping into "I": back into the second person.
        (
            "I shoulder my ladder and climb. The glass is warm. I'm uneasy; I was never uneasy "
            "here before.",
            "You shoulder your ladder and climb. The glass is warm. You're uneasy; you were "
            "never uneasy here before.",
        ),
        ("Wenna hands me the lamp, and I walk on.", "Wenna hands you the lamp, and you walk on."),
        # The narrator speaking to the player as "I": it goes.
        ("I watch as you climb the steps. The lantern flickers.", "The lantern flickers."),
        # Quoted words in a rewritten sentence are the character's own.
        (
            'I say "I will come back," and Wenna nods.',
            'You say "I will come back," and Wenna nods.',
        ),
    ],
)
def test_a_slip_into_the_first_person_in_a_story_told_as_you(written, kept):
    assert tidy_narration(written, STANDING) == kept


@pytest.mark.parametrize(
    "story",
    [
        '"I will," she said. You nod.',
        "'I'm coming,' Wenna calls. You wait by the milestone.",
        'She said, "Go now. I will follow me later, my friend." Then she left.',
        "*I have gone to the abbey,* the note reads. You fold it.",
        "You climb down into the old mine. The lantern is yours now.",
        "The player lowers his flute and bows to the crowd.",
        # Its words from the plot essentials, but a sentence of the story's own.
        "You walk the quiet valley road between the village of Brindle and the old abbey, "
        "ladder on your shoulder.",
        "What a night. The rain will not stop.",
        "You continue the story of the lanterns, and the children listen.",
    ],
)
def test_story_is_kept_byte_for_byte(story):
    assert tidy_narration(story, STANDING) == story


def test_a_first_person_story_keeps_its_i():
    """Asked for by the scenario (the voice the prompt tells), or told so from the start."""
    told = "I shoulder my ladder. I watch the reeds, and I wait for you, Wenna."
    assert tidy_narration(told, Seams(voice=Voice.FIRST)) == told
    so_far = ["I light the first lantern. My hands are cold.", "I walk on; I hear the reeds."]
    assert story_voice(Voice.SECOND, so_far) is Voice.FIRST
    assert story_voice(Voice.SECOND, ["You walk on. I hear you, says Wenna."]) is Voice.SECOND


def test_in_a_story_told_in_the_third_person_the_narrators_i_goes():
    seams = Seams(voice=Voice.THIRD)
    assert tidy_narration("Ann climbs. I think she is afraid.", seams) == "Ann climbs."
    assert tidy_narration('"I am not," Ann says.', seams) == '"I am not," Ann says.'


async def test_a_turn_on_the_lantern_road_stores_the_story_without_its_seams(
    db, provider, fake_model
):
    engine = TurnEngine(db, OperatorDefault(provider))
    adventure_id = await new_adventure(db)
    fake_model.queue(
        "The player is the lamplighter of the Lantern Road, a quiet valley road between the "
        "village of Brindle and the old abbey. I love how you've woven in the details. I climb "
        'the ladder, and Wenna calls up, "I see you!"'
    )
    done = (await play(engine, adventure_id, ActionType.DO, "climb the ladder"))[-1]
    assert isinstance(done, TurnDone), done
    kept = 'You climb the ladder, and Wenna calls up, "I see you!"'
    assert done.result.text == kept
    # What it read back was the prompt's: the plot essentials it was sent.
    sent = json.dumps(fake_model.requests[0]["messages"])
    assert "The player is the lamplighter of the Lantern Road" in sent
    async with db.session() as session:
        node = await session.get(StoryNode, done.result.narrator_node_id)
        adventure = await session.get(Adventure, adventure_id)
    assert node is not None and node.text == kept
    assert adventure is not None


async def test_a_first_person_scenario_keeps_the_narrations_i(db, provider, fake_model):
    engine = TurnEngine(db, OperatorDefault(provider))
    adventure_id = await new_adventure(db)
    async with db.transaction() as session:
        adventure = await session.get(Adventure, adventure_id)
        assert adventure is not None
        adventure.ai_instructions = "Write in first person, past tense."
    fake_model.queue("I climbed the ladder. My hands were cold.")
    done = (await play(engine, adventure_id, ActionType.DO, "climb the ladder"))[-1]
    assert isinstance(done, TurnDone), done
    assert done.result.text == "I climbed the ladder. My hands were cold."
    system = fake_model.requests[0]["messages"][0]["content"]
    assert "Write in first person" in system and "second person" not in system
