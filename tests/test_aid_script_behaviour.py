"""AI Dungeon scripts behave as in AI Dungeon (issue 19): the `modifier` convention of hook tabs
ending in `void 0`, card ids a script gives, whitespace that hides the narration, a story
action's form in onInput, an emptied input that keeps what the script recorded, a stopping
script's message on every stop, and no blank entry reported as left out of the context.

Each test cites where AI Dungeon's behaviour comes from; the engine's code cites it too."""

from __future__ import annotations

import pytest
from sqlalchemy import select
from sqlmodel import col

from engine.library.scripting.hooks import ScriptStopped
from engine.llm.providers.resolver import OperatorDefault
from engine.prompt.inputs import ContextInputs, HistoryEntry
from engine.storage.models import ActionType, AdventureCard, StoryNode
from engine.story.line.read import state_before_of
from engine.story.snapshots import restore
from engine.turns.context import ContextEngine
from engine.turns.engine import TurnEngine
from tests.helpers import new_adventure, node_count, play
from tests.test_scripting_turns import (
    add_script,
    adventure,
    cards,
    done,
    failed,
    narrator_node,
    prompt,
)


@pytest.fixture
def engine(db, provider) -> TurnEngine:
    return TurnEngine(db, OperatorDefault(provider))


# --- 1. hook tabs that end in `void 0` -----------------------------------------------------------
# Magic's Scripting Guidebook (magicoflolis/aidungeon.js, "Scripting Guidebook.md", "Custom
# Continue"): `const modifier = () => {...}` and then `void 0`, no call; MagicCards
# (magicoflolis/MagicCards dist/Library.js) assigns `globalThis.modifier`, its tabs end in `void 0`.


async def test_a_declared_modifier_is_called_when_the_tab_ends_in_void_0(db, engine, fake_model):
    adventure_id = await new_adventure(db)
    await add_script(
        db,
        adventure_id,
        on_output="const modifier = (text) => ({ text: text.toUpperCase() });\n\nvoid 0\n",
    )
    fake_model.queue("The gate opens.")
    assert done(await play(engine, adventure_id, ActionType.DO, "wait")).result.text == (
        "THE GATE OPENS."
    )


async def test_a_global_modifier_that_rewrites_the_globals_text_and_stop(db, engine, fake_model):
    # The library's modifier returns nothing: what it left in `text` and `stop` is the result.
    library = """
    globalThis.modifier = function () {
      state.calls = (state.calls || 0) + 1;
      if (/#halt/.test(text)) { stop = true; state.message = 'Halted by #halt.'; return; }
      text = text.replace('door', 'gate');
    };
    """
    adventure_id = await new_adventure(db)
    await add_script(db, adventure_id, library=library, on_input="void 0;")
    fake_model.queue("It swings wide.")
    result = done(await play(engine, adventure_id, ActionType.DO, "open the door")).result
    assert result.action_text == "> You open the gate."
    assert "> You open the gate." in prompt(fake_model)
    stopped = failed(await play(engine, adventure_id, ActionType.DO, "#halt"))
    assert isinstance(stopped.error, ScriptStopped)
    assert stopped.error.message == "Halted by #halt."
    assert (await adventure(db, adventure_id)).script_state["calls"] == 2


async def test_a_tab_calling_modifier_itself_runs_it_once(db, engine, fake_model):
    adventure_id = await new_adventure(db)
    await add_script(
        db,
        adventure_id,
        on_output=(
            "const modifier = (text) => { state.calls = (state.calls || 0) + 1; "
            "return { text: text + ' Again.' }; };\nmodifier(text)"
        ),
    )
    fake_model.queue("Once.")
    assert done(await play(engine, adventure_id, ActionType.DO, "wait")).result.text == (
        "Once. Again."
    )
    assert (await adventure(db, adventure_id)).script_state["calls"] == 1


# --- 2. card ids a script gives --------------------------------------------------------------
# Magic's Scripting Guidebook, addStoryCard "Alternatives": a script pushes a card with its own
# string id; MagicCards finds its settings card by the id `{"id":"settings","pin":true}`.

SETTINGS_CARD = """
const SETTINGS = JSON.stringify({ id: 'settings', pin: true });
let settings = storyCards.find((card) => card.id === SETTINGS);
if (!settings) {
  storyCards.push({ id: SETTINGS, keys: '', entry: 'enabled: true', type: 'internal',
                    title: 'SETTINGS', description: '' });
  state.created = (state.created || 0) + 1;
}
text
"""


async def test_a_card_found_by_the_id_its_script_gave_is_not_made_again(db, engine, fake_model):
    adventure_id = await new_adventure(db)
    await add_script(db, adventure_id, on_output=SETTINGS_CARD)
    fake_model.queue("One.", "Two.", "Three.")
    for action in ("a", "b", "c"):
        done(await play(engine, adventure_id, ActionType.DO, action))
    settings = [c for c in await cards(db, adventure_id) if c.title == "SETTINGS"]
    assert len(settings) == 1
    assert settings[0].script_id == '{"id":"settings","pin":true}'
    assert (await adventure(db, adventure_id)).script_state["created"] == 1


async def test_a_script_that_renames_a_card_renames_that_card(db, engine, fake_model):
    # MagicCards' StoryCard(): `const card = storyCards.find(callback); if (id) card.id = id;`
    adventure_id = await new_adventure(db)
    first = (await cards(db, adventure_id))[0]
    assert first.id is not None
    await add_script(
        db,
        adventure_id,
        on_output=(
            f"const card = storyCards.find((c) => c.id === 'mine' || c.title === "
            f"{first.title!r});\n"
            "state.seen = card.id; card.id = 'mine'; text"
        ),
    )
    fake_model.queue("One.", "Two.")
    done(await play(engine, adventure_id, ActionType.DO, "a"))
    renamed = await card_row(db, first.id)
    assert renamed is not None and renamed.script_id == "mine"  # the same row, kept in place
    assert renamed.always_on == first.always_on and renamed.entry == first.entry
    second = done(await play(engine, adventure_id, ActionType.DO, "b")).result
    assert (await adventure(db, adventure_id)).script_state["seen"] == "mine"
    # Undo rewinds the id with the card.
    async with db.session() as session, session.begin():
        assert second.action_node_id is not None
        before = await state_before_of(session, second.action_node_id)
        assert before is not None
        await restore(session, adventure_id, before)
    rewound = await card_row(db, first.id)
    assert rewound is not None and rewound.script_id == "mine"


async def card_row(db, card_id: int) -> AdventureCard | None:
    async with db.session() as session:
        return await session.get(AdventureCard, card_id)


# --- 3. whitespace from onOutput hides the narration ---------------------------------------------
# Magic's Scripting Guidebook, "Prevent the AI from generating a starting message": "suppress it
# entirely with a single space. Do not return an empty string"; Auto-Cards (LewdLeah/Auto-Cards,
# src/library.js) answers its /AC commands with an output of "\n".

HIDE_AFTER_COMMAND_INPUT = """
const command = text.match(/#(\\w+)/);
state.hide = !!command;
if (command) state.message = 'Inventory: a lantern, a rope.';
text
"""
HIDE_AFTER_COMMAND_OUTPUT = "state.hide ? { text: ' ' } : { text }"


async def test_whitespace_from_on_output_hides_the_narration(db, engine, fake_model):
    adventure_id = await new_adventure(db)
    await add_script(
        db,
        adventure_id,
        on_input=HIDE_AFTER_COMMAND_INPUT,
        on_output=HIDE_AFTER_COMMAND_OUTPUT,
    )
    fake_model.queue("The narrator rambles on.", "Rain falls.")
    result = done(await play(engine, adventure_id, ActionType.DO, "#inventory")).result
    assert result.text.strip() == ""
    assert result.script_message == "Inventory: a lantern, a rope."
    async with db.session() as session:
        node = await session.get(StoryNode, result.narrator_node_id)
        assert "rambles" not in node.text
    shown = done(await play(engine, adventure_id, ActionType.DO, "wait")).result
    assert shown.text == "Rain falls."


async def test_a_hidden_narration_shows_only_the_scripts_message_in_discord(env, fake_model):
    thread = await env.start_thread()
    ref = await env.bot.services.play.adventure_in(thread)
    await add_script(
        env.bot.services.db,
        ref.adventure_id,
        on_input=HIDE_AFTER_COMMAND_INPUT,
        on_output=HIDE_AFTER_COMMAND_OUTPUT,
    )
    fake_model.queue("The narrator rambles on.")
    await env.fake.slash(env.bob, thread, "do", action="#inventory")
    await env.done()
    last = env.narration(thread)[-1]
    assert "rambles" not in last
    assert "Inventory: a lantern, a rope." in last


# --- 4. a story action in onInput --------------------------------------------------------------
# Auto-Cards' input hook knows "regular AID story actions" by `TEXT.startsWith(" ")`; the archived
# latitudegames/Scripting examples/commandParser.js reads story input with `\n? ?`.

FIRST_LINE_PARSER = """
const first = text.split('\\n')[0];
const words = first.match(/#(\\w+)/g);
words.forEach((word) => { state.commands = (state.commands || []).concat([word]); });
state.seen = text;
text
"""


async def test_a_story_action_reaches_on_input_after_a_space_not_on_a_line(db, engine, fake_model):
    adventure_id = await new_adventure(db)
    await add_script(db, adventure_id, on_input=FIRST_LINE_PARSER)
    fake_model.queue("The bell answers.")
    done(await play(engine, adventure_id, ActionType.STORY, "#ring The bell rings."))
    state = (await adventure(db, adventure_id)).script_state
    assert state["seen"] == " #ring The bell rings."
    assert state["commands"] == ["#ring"]
    # And history shows the story action the same way.
    await add_script(
        db, adventure_id, name="history", position=1, on_input="state.h = history.at(-2); text"
    )
    fake_model.queue("Quiet.")
    done(await play(engine, adventure_id, ActionType.STORY, "#hush All is quiet."))
    history_entry = (await adventure(db, adventure_id)).script_state["h"]
    assert history_entry == {
        "text": " #ring The bell rings.",
        "rawText": " #ring The bell rings.",
        "type": "story",
    }


# --- 5. an input emptied after recording something ------------------------------------------------
# MousAI Script Pack I (MousAIDungeon/script-pack-1): its input modifier answers a command with
# {text: ''} and sets state.clearOutput, its output modifier then returns ' ' ("The input was
# still sent to the AI"): AI Dungeon plays the turn on, and what the script recorded stays.


async def test_an_emptied_input_keeps_what_the_script_recorded(db, engine, fake_model):
    adventure_id = await new_adventure(db)
    await add_script(
        db,
        adventure_id,
        on_input=(
            "state.notes = (state.notes || []).concat([text.trim()]);\n"
            "state.message = 'Noted.';\n"
            "addStoryCard('note', 'A note the player wrote.');\n"
            "({ text: '' })"
        ),
    )
    before = await node_count(db, adventure_id)
    fake_model.queue("The wind turns.")
    result = done(await play(engine, adventure_id, ActionType.DO, "remember the key")).result
    assert result.script_message == "Noted."
    assert result.action_node_id is None  # the emptied action is not stored
    assert await node_count(db, adventure_id) == before + 1
    stored = await adventure(db, adventure_id)
    assert stored.script_state["notes"] == ["> You remember the key."]
    assert [c.entry for c in await cards(db, adventure_id) if c.keys == "note"] == [
        "A note the player wrote."
    ]


# --- 7. a stopped /continue shows the script's message; Insights and blank entries ------------


async def test_every_stopped_continue_shows_the_scripts_message(db, engine, fake_model):
    adventure_id = await new_adventure(db)
    await add_script(
        db,
        adventure_id,
        on_model_context="state.message = 'The spell is still charging.'; ({ text, stop: true })",
    )
    for _ in range(2):
        stopped = failed(await play(engine, adventure_id, ActionType.CONTINUE)).error
        assert isinstance(stopped, ScriptStopped)
        assert stopped.message == "The spell is still charging."


async def test_a_stopped_continue_shows_the_message_in_discord(env, fake_model):
    thread = await env.start_thread()
    ref = await env.bot.services.play.adventure_in(thread)
    await add_script(
        env.bot.services.db,
        ref.adventure_id,
        on_model_context="state.message = 'The spell is still charging.'; ({ text, stop: true })",
    )
    for _ in range(2):
        seen = len(env.fake.messages(thread, visible_to=env.bob))
        await env.fake.slash(env.bob, thread, "continue")
        await env.done()
        new = [m.content for m in env.fake.messages(thread, visible_to=env.bob)[seen:]]
        assert any("The spell is still charging." in text for text in new), new
    assert not fake_model.requests


@pytest.mark.parametrize(
    "texts",
    [["   "], ["", "> You wait.", "It rains."], [" ", "> You wait.", " ", "It rains."]],
)
def test_blank_entries_are_never_reported_as_left_out(texts):
    history = tuple(
        HistoryEntry(index + 1, index, "narrator" if index % 2 == 0 else "player", text)
        for index, text in enumerate(texts)
    )
    built = ContextEngine().build(ContextInputs(history=history, line_length=len(history)))
    (story,) = [s for s in built.report.sections if s.key == "history"]
    assert built.report.used < built.report.available
    assert [item for item in story.items if not item.included] == []
    words = sum(1 for text in texts if text.strip())
    assert story.reason == f"{words} of {words} entries, newest first"


async def test_a_scenario_with_an_empty_opening_reports_nothing_left_out(db, engine, fake_model):
    adventure_id = await new_adventure(db)
    async with db.session() as session, session.begin():
        opening = await session.scalar(
            select(StoryNode).where(
                col(StoryNode.adventure_id) == adventure_id, col(StoryNode.index) == 0
            )
        )
        assert opening is not None
        opening.text = ""
    fake_model.queue("A road appears.")
    result = done(await play(engine, adventure_id, ActionType.CONTINUE)).result
    report = (await narrator_node(db, result.narrator_node_id)).context_report
    assert report is not None
    (story,) = [s for s in report["sections"] if s["key"] == "history"]
    assert all(item["included"] for item in story["items"]), story
