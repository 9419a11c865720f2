"""Published AI Dungeon scripts (tests/data/corpus/scripts, sources in SOURCES.md) run through
real turns on the real QuickJS engine, each checked for the effect it is published for.

- MagicCards (magicoflolis/MagicCards): a library whose hook tabs end in `void 0`, keeping its
  settings in a story card it finds by the id it gave it; a player who edits that card changes
  the script's settings, and the script says so.
- MousAI Script Pack I (MousAIDungeon/script-pack-1, 2020): slash commands answered in
  `state.message`, the narration of a command's turn hidden with an output of ' '.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import update
from sqlmodel import col

from engine.llm.providers.resolver import OperatorDefault
from engine.storage.models import ActionType, AdventureCard
from engine.turns.engine import TurnEngine
from tests.helpers import new_adventure, node_count, play
from tests.test_scripting_turns import add_script, adventure, cards, done

CORPUS = Path(__file__).parent / "data" / "corpus" / "scripts"
MAGICCARDS = CORPUS / "magiccards"
MOUSAI = CORPUS / "mousai-script-pack-1"

#: The id MagicCards gives its settings card: `JSON.stringify({ id: 'settings', pin: true })`.
SETTINGS_ID = '{"id":"settings","pin":true}'


@pytest.fixture
def engine(db, provider) -> TurnEngine:
    return TurnEngine(db, OperatorDefault(provider))


async def settings_cards(db, adventure_id: int) -> list[AdventureCard]:
    return [card for card in await cards(db, adventure_id) if card.title == "SETTINGS"]


async def test_magiccards_keeps_one_settings_card_and_reads_a_players_edit(db, engine, fake_model):
    adventure_id = await new_adventure(db)
    await add_script(
        db,
        adventure_id,
        name="MagicCards",
        library=(MAGICCARDS / "Library.js").read_text(),
        on_input=(MAGICCARDS / "Input.js").read_text(),
        on_model_context=(MAGICCARDS / "Context.js").read_text(),
        on_output=(MAGICCARDS / "Output.js").read_text(),
    )
    for turn in range(4):
        fake_model.queue(f"Mira hammers at the forge in Ashford ({turn}).")
        done(await play(engine, adventure_id, ActionType.DO, "look around"))
    # The library installed itself: its settings card, made once, under the id it gave it.
    (settings,) = await settings_cards(db, adventure_id)
    assert settings.script_id == SETTINGS_ID
    assert "cooldown: 22" in settings.entry
    # It keeps in state only what differs from its defaults: nothing yet.
    assert "settings" not in (await adventure(db, adventure_id)).script_state["MagicCards"]

    # A player edits the card, as MagicCards' README asks: the script reads it and says so.
    async with db.session() as session, session.begin():
        await session.execute(
            update(AdventureCard)
            .where(col(AdventureCard.id) == settings.id)
            .values(entry=settings.entry.replace("cooldown: 22", "cooldown: 9"))
        )
    fake_model.queue("The bellows sigh.")
    result = done(await play(engine, adventure_id, ActionType.DO, "wait")).result
    assert result.script_message == "🎴 MagicCards => Updated settings."
    stored = (await adventure(db, adventure_id)).script_state["MagicCards"]["settings"]
    assert stored["cooldown"] == 9

    for turn in range(3):
        fake_model.queue(f"Sparks fly ({turn}).")
        done(await play(engine, adventure_id, ActionType.DO, "watch"))
    # Still one settings card, the same row, with the player's setting.
    (again,) = await settings_cards(db, adventure_id)
    assert again.id == settings.id and "cooldown: 9" in again.entry


async def test_mousai_commands_answer_in_the_message_and_hide_their_turn(db, engine, fake_model):
    adventure_id = await new_adventure(db)
    await add_script(
        db,
        adventure_id,
        name="MousAI Script Pack I",
        on_input=(MOUSAI / "InputModifier.js").read_text(),
        on_output=(MOUSAI / "OutputModifier.js").read_text(),
    )
    fake_model.queue("The reeds whisper.")
    first = done(await play(engine, adventure_id, ActionType.DO, "listen")).result
    assert first.text == "The reeds whisper."
    assert first.script_message == "⌨ Type /help for script info & special commands."

    # /help: the help menu in the message, the command's turn hidden, no action stored.
    before = await node_count(db, adventure_id)
    fake_model.queue("The narrator would have said this.")
    helped = done(await play(engine, adventure_id, ActionType.DO, "/help")).result
    assert helped.script_message.startswith("❓ MousAI Scripts Help Menu")
    assert "Type /focus to disable." in helped.script_message
    assert helped.text.strip() == "" and helped.action_node_id is None
    assert await node_count(db, adventure_id) == before + 1

    # A command typed as a Story action works too (it reaches the script after a space).
    fake_model.queue("Hidden again.")
    debug = done(await play(engine, adventure_id, ActionType.STORY, "/debug on")).result
    assert debug.script_message == "ℹ️ Debug Info is now ✔ ON"
    assert debug.text.strip() == ""

    # The next plain turn is shown, with the debug report the command turned on.
    fake_model.queue("You walk on toward the abbey.")
    walked = done(await play(engine, adventure_id, ActionType.DO, "walk on")).result
    assert walked.text == "You walk on toward the abbey."
    assert walked.script_message.startswith("ℹ️ Debug Info - Player Turns: 1")
