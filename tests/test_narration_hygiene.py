"""What a model writes that is not story is left out of the stored narration; prose that is
all story is kept byte for byte."""

from __future__ import annotations

import pytest

from engine.llm.providers.resolver import OperatorDefault
from engine.storage.models import ActionType, StoryNode
from engine.story.narration_hygiene import tidy_narration
from engine.turns.engine import TurnEngine
from engine.turns.events import TurnDone
from tests.helpers import new_adventure, play


@pytest.mark.parametrize(
    ("written", "kept"),
    [
        # The action echoed before the story starts.
        (
            "> I look around.\nThe hall is empty. Dust hangs in the light.",
            "The hall is empty. Dust hangs in the light.",
        ),
        # The model writing the player's next action: the story stops there.
        ('Mira smiles.\n> You say "hi"\nShe waves back.', "Mira smiles."),
        # Talk about the task, a heading, a stop tag.
        (
            "The player's response is a bit more concise. Here it goes:\n# The Road\n"
            "You walk on, and the reeds close behind you. <MORE>",
            "The Road\nYou walk on, and the reeds close behind you.",
        ),
        ("The bell rings once.</s>", "The bell rings once."),
        # Stopped by the length limit mid-sentence: back to the last whole sentence.
        ("The door opens. Beyond it lies a corr", "The door opens."),
        ('She turns. "Wait—"', 'She turns. "Wait—"'),
        ('"Run!" he cries. *It is too late.*', '"Run!" he cries. *It is too late.*'),
        # An opening bracket never closed (seen from the embedded model, as a note's start).
        ("[Lantern Road, you say. The room is empty.", "Lantern Road, you say. The room is empty."),
        # The prompt read back (seen from the embedded model): the author's note, a heading.
        (
            "[Author's note: Keep the tone warm and eerie at once.]\nThe bell tolls.",
            "The bell tolls.",
        ),
        ("World Lore:\nThe bridge creaks under you.", "The bridge creaks under you."),
    ],
)
def test_what_is_not_story_goes(written, kept):
    assert tidy_narration(written) == kept


@pytest.mark.parametrize(
    "story",
    [
        "The lantern flares blue; the humming stops.",
        "Line one.\n\nLine two, after a blank line.",
        "Verse without an ending",  # nothing to cut back to: kept
        "> the only line",  # emptied by the rules: kept as written
    ],
)
def test_story_is_kept_as_written(story):
    assert tidy_narration(story) == story


async def test_a_turn_stores_the_tidied_prose(db, provider, fake_model):
    engine = TurnEngine(db, OperatorDefault(provider))
    adventure_id = await new_adventure(db)
    fake_model.queue("> You open the door.\nCold air spills out. Something wait")
    done = (await play(engine, adventure_id, ActionType.DO, "open the door"))[-1]
    assert isinstance(done, TurnDone)
    assert done.result.text == "Cold air spills out."
    async with db.session() as session:
        node = await session.get(StoryNode, done.result.narrator_node_id)
    assert node is not None and node.text == "Cold air spills out."
