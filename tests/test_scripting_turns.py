"""Scripts in the turn: the three hooks, their contract, state and story cards kept with the
turn (and rewound with it), a broken or runaway script never breaking a turn, and Insights
showing what the scripts did. Real database, real fake model server over HTTP."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import undefer

from engine.library.scripting.hooks import ScriptStopped
from engine.library.scripting.sandbox import Limits
from engine.llm.providers.resolver import OperatorDefault
from engine.platform.events import TextDelta
from engine.storage.models import (
    ActionType,
    Adventure,
    AdventureCard,
    AdventureScript,
    Role,
    StoryNode,
)
from engine.story.line.read import state_before_of
from engine.story.snapshots import restore
from engine.turns.engine import TurnEngine
from engine.turns.events import ActionAccepted, TurnDone, TurnFailed
from engine.turns.insights import Insights
from tests.fakes.openai_server import Reply
from tests.helpers import new_adventure, node_count, play

SCRIPTS = Path(__file__).parent / "scripts"


@pytest.fixture
def engine(db, provider) -> TurnEngine:
    return TurnEngine(db, OperatorDefault(provider))


async def add_script(
    db,
    adventure_id: int,
    *,
    library: str = "",
    on_input: str = "",
    on_model_context: str = "",
    on_output: str = "",
    name: str = "test",
    position: int = 0,
    enabled: bool = True,
) -> None:
    async with db.session() as session, session.begin():
        session.add(
            AdventureScript(
                adventure_id=adventure_id,
                name=name,
                position=position,
                enabled=enabled,
                shared_library=library,
                on_input=on_input,
                on_model_context=on_model_context,
                on_output=on_output,
            )
        )


async def adventure(db, adventure_id: int) -> Adventure:
    async with db.session() as session:
        return await session.get(Adventure, adventure_id)


async def cards(db, adventure_id: int) -> list[AdventureCard]:
    async with db.session() as session:
        rows = await session.scalars(
            select(AdventureCard)
            .where(AdventureCard.adventure_id == adventure_id)
            .order_by(AdventureCard.position, AdventureCard.id)
        )
        return list(rows)


async def narrator_node(db, node_id: int) -> StoryNode:
    async with db.session() as session:
        return await session.get(
            StoryNode,
            node_id,
            options=[undefer(StoryNode.context_report), undefer(StoryNode.state_before)],
        )


def done(events) -> TurnDone:
    assert isinstance(events[-1], TurnDone), events[-1]
    return events[-1]


def failed(events) -> TurnFailed:
    assert isinstance(events[-1], TurnFailed), events[-1]
    return events[-1]


def prompt(fake_model) -> str:
    return "\n\n".join(m["content"] for m in fake_model.requests[-1]["messages"])


def state_log(name: str) -> str:
    """A hook that records what it saw in state.seen[name]."""
    return f"""
    state.seen = state.seen || {{}};
    state.seen.{name} = {{
      text: text, history: history.map(h => [h.type, h.text]), info: info,
      memory: memory, cards: storyCards.map(c => c.keys),
    }};
    ({{ text }})
    """


# --- onInput -------------------------------------------------------------------------------------


async def test_on_input_rewrites_the_action_before_it_is_stored_and_sent(db, engine, fake_model):
    adventure_id = await new_adventure(db)
    await add_script(db, adventure_id, on_input="text.replace('door', 'gate')")
    fake_model.queue("The gate swings wide.")
    events = await play(engine, adventure_id, ActionType.DO, "open the door")
    assert events[0] == ActionAccepted("> You open the gate.")
    result = done(events).result
    assert result.action_text == "> You open the gate."
    assert "> You open the gate." in prompt(fake_model)
    assert "door" not in prompt(fake_model).split("Recent Story:")[-1]


async def test_a_command_script_stops_the_action_and_keeps_its_state_and_message(
    db, engine, fake_model
):
    adventure_id = await new_adventure(db)
    await add_script(
        db,
        adventure_id,
        library=(SCRIPTS / "dice_library.js").read_text(),
        on_input=(SCRIPTS / "dice_input.js").read_text(),
    )
    before = await node_count(db, adventure_id)
    events = await play(engine, adventure_id, ActionType.DO, "/roll 2d6")
    stopped = failed(events).error
    assert isinstance(stopped, ScriptStopped)
    assert stopped.message == "🎲 roll 2d6: 6 + 6 = 12"
    assert not fake_model.requests  # the model was never asked
    assert await node_count(db, adventure_id) == before
    stored = await adventure(db, adventure_id)
    message = "🎲 roll 2d6: 6 + 6 = 12"
    assert stored.script_state == {"rolls": [12], "message": message}  # kept, as upstream
    assert stored.version == 0

    fake_model.queue("You walk on.")
    result = done(await play(engine, adventure_id, ActionType.DO, "walk on")).result
    assert result.script_message == ""  # unchanged since it was shown
    assert (await adventure(db, adventure_id)).script_state == {
        "rolls": [12],
        "message": message,
        "turns": 1,
    }


@pytest.mark.parametrize("source", ["''", "({ text: '   ' })", "text = ''; undefined"])
async def test_an_empty_input_drops_the_action_and_plays_a_continue(db, engine, fake_model, source):
    # As AI Dungeon: MousAI Script Pack I's command handling relies on it (see hooks.py).
    adventure_id = await new_adventure(db)
    await add_script(db, adventure_id, on_input=source)
    before = await node_count(db, adventure_id)
    fake_model.queue("The road goes on.")
    events = await play(engine, adventure_id, ActionType.DO, "open the door")
    assert events[0] == ActionAccepted("")
    result = done(events).result
    assert result.action_node_id is None and result.text == "The road goes on."
    assert await node_count(db, adventure_id) == before + 1  # the narration only
    assert "open the door" not in prompt(fake_model)


async def test_continue_skips_on_input(db, engine, fake_model):
    adventure_id = await new_adventure(db)
    await add_script(
        db,
        adventure_id,
        on_input="state.inputs = (state.inputs || 0) + 1; text",
        on_output="state.outputs = (state.outputs || 0) + 1; text",
    )
    fake_model.queue("One.", "Two.")
    done(await play(engine, adventure_id, ActionType.DO, "wait"))
    done(await play(engine, adventure_id, ActionType.CONTINUE))
    assert (await adventure(db, adventure_id)).script_state == {"inputs": 1, "outputs": 2}


# --- what each hook sees -------------------------------------------------------------------------


async def test_history_info_memory_and_cards_as_each_hook_sees_them(db, engine, fake_model):
    adventure_id = await new_adventure(db)
    await add_script(
        db,
        adventure_id,
        on_input=state_log("input"),
        on_model_context=state_log("context"),
        on_output=state_log("output"),
    )
    fake_model.queue("Mira waves.", "The rain stops.")
    done(await play(engine, adventure_id, ActionType.SAY, "Hello"))
    done(await play(engine, adventure_id, ActionType.STORY, "A bell rings far off."))
    fake_model.queue("Silence.")
    done(await play(engine, adventure_id, ActionType.DO, "listen"))
    stored = await adventure(db, adventure_id)
    seen = stored.script_state["seen"]

    # onInput: the action in AI Dungeon's form; history without it.
    assert seen["input"]["text"] == "\n> You listen.\n"
    types = [kind for kind, _ in seen["input"]["history"]]
    assert types == ["start", "say", "continue", "story", "continue"]
    assert seen["input"]["history"][1][1] == '\n> You say "Hello."\n'
    assert seen["input"]["info"]["actionCount"] == 5
    assert "maxChars" not in seen["input"]["info"]
    assert seen["input"]["info"]["characters"] == []
    assert seen["input"]["info"]["characterNames"] == []
    assert seen["input"]["memory"] == stored.plot_essentials

    # onModelContext: history with the current action; the context limits.
    context = seen["context"]
    assert [kind for kind, _ in context["history"]][-1] == "do"
    assert context["history"][-1][1] == "\n> You listen.\n"
    assert context["info"]["actionCount"] == 6
    assert context["info"]["maxChars"] == (4096 - 300) * 4
    assert 0 < context["info"]["memoryLength"] == context["text"].index("Recent Story:")
    # The whole text sent: the length hint closes the system message, the action comes last.
    assert context["text"].rstrip().endswith("> You listen.")
    assert "words." in context["text"][: context["info"]["memoryLength"]]
    assert "Recent Story:" in context["text"]

    # onOutput: the reply; history as in the context hook.
    assert seen["output"]["text"] == "Silence."
    assert seen["output"]["history"][-1] == ["do", "\n> You listen.\n"]
    assert "maxChars" not in seen["output"]["info"]
    assert seen["output"]["cards"] == [card.keys for card in await cards(db, adventure_id)]


async def test_character_names_come_from_the_actor(db, engine, fake_model):
    from engine.story.actions import PlayerAction

    adventure_id = await new_adventure(db)
    await add_script(db, adventure_id, on_input="state.info = info; text")
    fake_model.queue("Ok.")
    events = [
        e async for e in engine.play(adventure_id, PlayerAction(ActionType.DO, "wave", actor="Ann"))
    ]
    done(events)
    info = (await adventure(db, adventure_id)).script_state["info"]
    assert info["characters"] == ["Ann"]
    assert info["characterNames"] == ["Ann"]


# --- onModelContext ------------------------------------------------------------------------------


async def test_on_model_context_rewrites_what_the_model_reads(db, engine, fake_model):
    adventure_id = await new_adventure(db)
    await add_script(
        db,
        adventure_id,
        on_model_context=(
            "const secret = '[Secret: the inn is haunted]';"
            "({ text: text.replace('Recent Story:', 'Recent Story:\\n' + secret) })"
        ),
    )
    fake_model.queue("Noted.")
    result = done(await play(engine, adventure_id, ActionType.DO, "enter the inn")).result
    sent = fake_model.requests[-1]["messages"]
    assert sent[0]["role"] == "system"  # the script left the system part alone
    assert "[Secret: the inn is haunted]" in sent[-1]["content"]
    node = await narrator_node(db, result.narrator_node_id)
    (run,) = node.context_report["scripts"]
    assert run["hook"] == "onModelContext" and "rewrote the context" in run["note"]


@pytest.mark.parametrize("source", ["''", "({ text: '' })", "({ text: '  \\n' })"])
async def test_an_empty_context_means_the_context_as_built(db, engine, fake_model, source):
    adventure_id = await new_adventure(db)
    fake_model.queue("Plain.")
    done(await play(engine, adventure_id, ActionType.DO, "look"))
    plain = fake_model.requests[-1]["messages"]
    await add_script(db, adventure_id, on_model_context=f"state.ran = true; {source}")
    fake_model.queue("Plain again.", "Third.")
    done(await play(engine, adventure_id, ActionType.DO, "look"))
    scripted = fake_model.requests[-1]["messages"]
    assert scripted[0] == plain[0]
    assert (
        scripted[-1]["content"].split("Recent Story:")[0]
        == plain[-1]["content"].split("Recent Story:")[0]
    )
    assert (await adventure(db, adventure_id)).script_state == {"ran": True}


async def test_a_longer_context_is_cut_to_max_chars_from_its_start(db, engine, fake_model):
    adventure_id = await new_adventure(db)
    await add_script(
        db, adventure_id, on_model_context="'X'.repeat(info.maxChars * 2) + ' THE END'"
    )
    fake_model.queue("Ok.")
    done(await play(engine, adventure_id, ActionType.DO, "look"))
    (message,) = fake_model.requests[-1]["messages"]  # the system part was rewritten too
    assert message["role"] == "user"
    assert len(message["content"]) == (4096 - 300) * 4
    assert message["content"].endswith("X THE END")


async def test_stop_in_the_context_hook_stops_the_turn(db, engine, fake_model):
    adventure_id = await new_adventure(db)
    await add_script(
        db, adventure_id, on_model_context="state.message = 'Not now.'; ({ text, stop: true })"
    )
    before = await node_count(db, adventure_id)
    error = failed(await play(engine, adventure_id, ActionType.DO, "look")).error
    assert isinstance(error, ScriptStopped) and error.message == "Not now."
    assert not fake_model.requests
    assert await node_count(db, adventure_id) == before


# --- onOutput ------------------------------------------------------------------------------------


async def test_on_output_rewrites_the_reply_after_the_stream(db, engine, fake_model):
    adventure_id = await new_adventure(db)
    await add_script(db, adventure_id, on_output="({ text: text.replace(/wolf/g, 'fox') })")
    fake_model.queue("A wolf howls. The wolf comes closer.")
    events = await play(engine, adventure_id, ActionType.DO, "listen")
    streamed = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert streamed == "A wolf howls. The wolf comes closer."  # live: the model's text
    result = done(events).result
    assert result.text == "A fox howls. The fox comes closer."  # final: the script's
    node = await narrator_node(db, result.narrator_node_id)
    assert node.text == result.text


async def test_stop_in_on_output_makes_the_reply_the_word_stop(db, engine, fake_model):
    adventure_id = await new_adventure(db)
    await add_script(db, adventure_id, on_output="({ text: 'ignored', stop: true })")
    fake_model.queue("Something happens.")
    assert done(await play(engine, adventure_id, ActionType.DO, "wait")).result.text == "stop"


@pytest.mark.parametrize("source", ["''", "({ text: '' })", "text = ''; undefined"])
async def test_an_empty_output_leaves_the_reply_as_written(db, engine, fake_model, source):
    adventure_id = await new_adventure(db)
    await add_script(db, adventure_id, on_output=source)
    fake_model.queue("The wind rises.")
    result = done(await play(engine, adventure_id, ActionType.DO, "wait")).result
    assert result.text == "The wind rises."
    node = await narrator_node(db, result.narrator_node_id)
    assert node.context_report["scripts"][0]["note"] == "an empty result was ignored"


async def test_on_output_runs_before_the_state_block_is_settled(db, provider, fake_model):
    from engine.library.scenarios.start import start_adventure
    from engine.storage.models import Scenario

    async with db.session() as session, session.begin():
        scenario_id = await session.scalar(
            select(Scenario.id).where(Scenario.builtin_key == "bandit-camp")
        )
        adventure_id = (await start_adventure(session, scenario_id, channel_id=5)).id
    await add_script(db, adventure_id, on_output="state.raw = text; text")
    fake_model.queue('You rest.\n```state\n{"player": {"hp": -5}}\n```')
    result = done(
        await play(TurnEngine(db, OperatorDefault(provider)), adventure_id, ActionType.DO, "rest")
    ).result
    assert result.text == "You rest."
    assert "```state" in (await adventure(db, adventure_id)).script_state["raw"]


# --- state.memory and state.message --------------------------------------------------------------


async def test_state_memory_overrides_the_context_and_empty_falls_back(db, engine, fake_model):
    adventure_id = await new_adventure(db)
    original = await adventure(db, adventure_id)
    assert original.plot_essentials and original.authors_note is not None
    await add_script(
        db,
        adventure_id,
        on_input="""
        if (text.includes('set')) {
          state.memory.context = 'SCRIPT MEMORY';
          state.memory.authorsNote = 'SCRIPT NOTE';
          state.memory.frontMemory = 'SCRIPT FRONT';
        } else {
          state.memory = { context: '', authorsNote: '  ', frontMemory: '' };
        }
        text
        """,
    )
    fake_model.queue("One.", "Two.")
    done(await play(engine, adventure_id, ActionType.DO, "set the mood"))
    sent = prompt(fake_model)
    assert "SCRIPT MEMORY" in sent and original.plot_essentials not in sent
    assert "[Author's note: SCRIPT NOTE]" in sent
    story = sent.split("Recent Story:")[1]
    assert story.index("> You set the mood.") < story.index("SCRIPT FRONT")
    # The override holds for the next context too (the state is stored).
    done(await play(engine, adventure_id, ActionType.DO, "clear it"))
    sent = prompt(fake_model)
    assert "SCRIPT" not in sent
    assert original.plot_essentials in sent


@pytest.mark.parametrize(
    ("message", "shown"),
    [
        ("'Hello there.'", "Hello there."),
        ("{ text: 'For Ann only', visibleTo: ['Ann'] }", "For Ann only"),
        ("['one', { text: 'two' }, '']", "one\ntwo"),
    ],
)
async def test_state_message_is_shown_when_it_changes(db, engine, fake_model, message, shown):
    adventure_id = await new_adventure(db)
    await add_script(
        db,
        adventure_id,
        on_output=f"if (text.startsWith('New')) state.message = {message}; text",
    )
    fake_model.queue("New.", "Same.", "New again.")
    first = done(await play(engine, adventure_id, ActionType.DO, "wait")).result
    assert first.script_message == shown
    # The message stays in state (scripts read it back), and is not shown again while unchanged.
    stored = (await adventure(db, adventure_id)).script_state["message"]
    assert stored == json.loads(json.dumps(stored))
    assert done(await play(engine, adventure_id, ActionType.DO, "wait")).result.script_message == ""
    # Set again to the same value: unchanged, so not shown (upstream scripts vary it to repeat).
    assert done(await play(engine, adventure_id, ActionType.DO, "wait")).result.script_message == ""


async def test_a_changed_message_is_shown_again(db, engine, fake_model):
    adventure_id = await new_adventure(db)
    await add_script(
        db,
        adventure_id,
        on_output="state.n = (state.n || 0) + 1; state.message = 'Turn ' + state.n; text",
    )
    fake_model.queue("One.", "Two.")
    assert done(await play(engine, adventure_id, ActionType.DO, "a")).result.script_message == (
        "Turn 1"
    )
    assert done(await play(engine, adventure_id, ActionType.DO, "b")).result.script_message == (
        "Turn 2"
    )


# --- state and cards across turns, and undo ------------------------------------------------------


async def test_state_and_cards_persist_across_turns_and_rewind_with_undo(db, engine, fake_model):
    adventure_id = await new_adventure(db)
    start_cards = [(c.id, c.keys, c.entry) for c in await cards(db, adventure_id)]
    await add_script(db, adventure_id, on_output=(SCRIPTS / "lore_output.js").read_text())
    fake_model.queue(
        "You reach the Crossing. Wind tugs at the Banner.",
        "You camp by the Crossing, which is quiet now.",
    )
    first = done(await play(engine, adventure_id, ActionType.DO, "walk")).result
    after_first = await cards(db, adventure_id)
    learned = {c.keys: c for c in after_first if c.description == "learned by lore_output.js"}
    assert set(learned) == {"Crossing", "Banner"}
    assert learned["Crossing"].entry == "You reach the Crossing."
    assert learned["Crossing"].type == "location"
    assert (await adventure(db, adventure_id)).script_state == {"learned": 2}

    second = done(await play(engine, adventure_id, ActionType.DO, "camp")).result
    after_second = {c.keys: c for c in await cards(db, adventure_id)}
    assert after_second["Crossing"].id == learned["Crossing"].id  # updated in place
    assert after_second["Crossing"].entry == "You camp by the Crossing, which is quiet now."
    # The card the script added came into the second turn's context by its key.
    assert "You reach the Crossing." in prompt(fake_model).split("World Lore:", 1)[1]

    # Undo the second turn: the adventure goes back to the state before its player node (held
    # once, by the node before it).
    async with db.session() as session, session.begin():
        before = await state_before_of(session, second.action_node_id)
        assert before is not None and "cards" in before
        await restore(session, adventure_id, before)
    rewound = {c.keys: c for c in await cards(db, adventure_id)}
    assert rewound["Crossing"].entry == "You reach the Crossing."
    assert rewound["Crossing"].id == learned["Crossing"].id

    # And the first: back to the scenario's cards and no state.
    async with db.session() as session, session.begin():
        before = await state_before_of(session, first.action_node_id)
        assert before is not None
        await restore(session, adventure_id, before)
    assert [(c.id, c.keys, c.entry) for c in await cards(db, adventure_id)] == start_cards
    assert (await adventure(db, adventure_id)).script_state == {}


async def test_cards_a_script_adds_in_on_input_reach_this_turns_context(db, engine, fake_model):
    adventure_id = await new_adventure(db)
    await add_script(
        db,
        adventure_id,
        on_input="addStoryCard('gate', 'The gate is bronze and sings when touched.'); text",
    )
    fake_model.queue("It hums.")
    done(await play(engine, adventure_id, ActionType.DO, "touch the gate"))
    assert "The gate is bronze" in prompt(fake_model)
    (card,) = [c for c in await cards(db, adventure_id) if c.keys == "gate"]
    assert card.id is not None and card.type == "class" and not card.always_on


async def test_removed_and_reordered_cards_are_stored_as_left(db, engine, fake_model):
    adventure_id = await new_adventure(db)
    start = await cards(db, adventure_id)
    assert len(start) >= 2
    await add_script(
        db,
        adventure_id,
        on_output=(
            "const first = storyCards.shift(); removeStoryCard(0); storyCards.push(first); text"
        ),
    )
    fake_model.queue("Ok.")
    done(await play(engine, adventure_id, ActionType.DO, "wait"))
    expected = [c.id for c in start[2:]] + [start[0].id]
    assert [c.id for c in await cards(db, adventure_id)] == expected


async def test_a_failed_turn_leaves_state_and_cards_untouched(db, engine, fake_model):
    adventure_id = await new_adventure(db)
    before = [(c.id, c.entry) for c in await cards(db, adventure_id)]
    await add_script(
        db,
        adventure_id,
        on_input="state.n = 1; addStoryCard('x', 'y'); updateStoryCard(0, undefined, 'z'); text",
    )
    fake_model.queue(Reply(fault="500"))
    failed(await play(engine, adventure_id, ActionType.DO, "wait"))
    assert (await adventure(db, adventure_id)).script_state == {}
    assert [(c.id, c.entry) for c in await cards(db, adventure_id)] == before


# --- several scripts, disabled scripts -----------------------------------------------------------


async def test_scripts_run_in_order_each_on_the_last_ones_text(db, engine, fake_model):
    adventure_id = await new_adventure(db)
    await add_script(db, adventure_id, name="second", position=2, on_output="text + ' [2]'")
    await add_script(db, adventure_id, name="first", position=1, on_output="text + ' [1]'")
    await add_script(db, adventure_id, name="off", position=0, enabled=False, on_output="'OFF'")
    fake_model.queue("Story.")
    assert done(await play(engine, adventure_id, ActionType.DO, "go")).result.text == (
        "Story. [1] [2]"
    )


async def test_without_enabled_scripts_nothing_is_snapshotted_but_state(db, engine, fake_model):
    adventure_id = await new_adventure(db)
    await add_script(db, adventure_id, enabled=False, on_output="'OFF'")
    fake_model.queue("Story.")
    result = done(await play(engine, adventure_id, ActionType.DO, "go")).result
    assert result.text == "Story."
    async with db.session() as session:
        before = await state_before_of(session, result.action_node_id)
    assert before is not None and "cards" not in before


# --- a broken script never breaks a turn ---------------------------------------------------------


async def test_a_throwing_script_is_skipped_and_reported_in_insights(db, engine, fake_model):
    adventure_id = await new_adventure(db)
    await add_script(
        db,
        adventure_id,
        name="broken",
        on_input="log('about to fail'); state.lost = true; null.boom",
        on_output="text + ' (ok)'",
    )
    fake_model.queue("The door opens.")
    result = done(await play(engine, adventure_id, ActionType.DO, "open the door")).result
    assert result.action_text == "> You open the door."  # unmodified
    assert result.text == "The door opens. (ok)"
    assert "lost" not in (await adventure(db, adventure_id)).script_state
    node = await narrator_node(db, result.narrator_node_id)
    failed_run, ok_run = node.context_report["scripts"]
    assert failed_run["hook"] == "onInput" and failed_run["script"] == "broken"
    assert "TypeError" in failed_run["error"] and failed_run["logs"] == ["about to fail"]
    assert ok_run["hook"] == "onOutput" and ok_run["error"] is None

    insights = await Insights(db).for_turn(1)
    assert any(
        line.startswith("error: onInput · broken: TypeError") for line in insights.script_logs
    )
    assert "  about to fail" in insights.script_logs


@pytest.mark.parametrize(
    ("hook", "source", "words"),
    [
        ("on_input", "while (true) {}", "interrupted"),
        (
            "on_model_context",
            "const a = []; for (;;) a.push('x'.repeat(4096) + a.length)",
            "memory",
        ),
        ("on_output", "function f(n) { return f(n + 1) } f(0)", "stack"),
    ],
)
async def test_a_runaway_script_is_stopped_and_the_turn_completes(
    db, provider, fake_model, hook, source, words
):
    # A short limit: what is tested is that it holds and the turn goes on.
    limits = Limits(time_seconds=0.5)
    engine = TurnEngine(db, OperatorDefault(provider), script_limits=limits)
    adventure_id = await new_adventure(db)
    await add_script(db, adventure_id, **{hook: source})
    fake_model.queue("The story goes on.")
    started = time.perf_counter()
    result = done(await play(engine, adventure_id, ActionType.DO, "wait")).result
    took = time.perf_counter() - started
    node = await narrator_node(db, result.narrator_node_id)
    (run,) = node.context_report["scripts"]
    print(
        f"\n{run['hook']} runaway ({words}): script stopped after {run['ms']} ms "
        f"({run['cpu_ms']} ms CPU), turn took {took:.2f} s"
    )
    # A loop on a machine so loaded that CPU time comes slower than the wall clock allows for
    # is stopped by killing its worker instead of by QuickJS's CPU limit.
    assert words in run["error"].lower() or (
        words == "interrupted" and "did not finish within" in run["error"]
    )
    assert result.text == "The story goes on."
    # The CPU limit, with room for a loaded machine (see the sandbox test's note).
    assert run["cpu_ms"] <= 3000


async def test_a_script_leaving_too_many_cards_changes_nothing(db, provider, fake_model):
    engine = TurnEngine(db, OperatorDefault(provider), max_story_cards=5)
    adventure_id = await new_adventure(db)
    before = len(await cards(db, adventure_id))
    await add_script(
        db, adventure_id, on_output="for (let i = 0; i < 10; i++) addStoryCard('k' + i, 'e'); text"
    )
    fake_model.queue("Ok.")
    result = done(await play(engine, adventure_id, ActionType.DO, "wait")).result
    assert len(await cards(db, adventure_id)) == before
    node = await narrator_node(db, result.narrator_node_id)
    assert "at most 5" in node.context_report["scripts"][0]["error"]


async def test_the_report_is_json_and_readable_without_scripts(db, engine, fake_model):
    adventure_id = await new_adventure(db)
    fake_model.queue("Ok.")
    result = done(await play(engine, adventure_id, ActionType.DO, "wait")).result
    node = await narrator_node(db, result.narrator_node_id)
    assert node.context_report["scripts"] == []
    json.dumps(node.context_report)
    assert (await Insights(db).for_turn(1)).script_logs == []
    assert [n.role for n in [node]] == [Role.NARRATOR]


async def test_a_turns_state_is_stored_once(db, engine, fake_model):
    # A script keeping ~90 K characters in state: each turn stores it once (the state its turn
    # leaves, on the narration), not a second time as the next turn's state before.
    adventure_id = await new_adventure(db)
    await add_script(
        db, adventure_id, on_output="state.big = 'x'.repeat(90000) + info.actionCount; text"
    )
    fake_model.queue("One.", "Two.", "Three.", "Four.")
    for action in ("wait", "listen", "sleep", "wake"):
        done(await play(engine, adventure_id, ActionType.DO, action))
    async with db.session() as session:
        rows = await session.execute(
            select(StoryNode.state_before, StoryNode.state_after).where(
                StoryNode.adventure_id == adventure_id
            )
        )
        stored = [json.dumps(value) for row in rows for value in row if value is not None]
        copies = sum("x" * 90000 in text for text in stored)
        total = sum(len(text) for text in stored)
    print(f"\nfour turns with a 90 K state: {copies} copies, {total:,} characters stored")
    assert copies == 4
    assert total < 4 * 91_000 + 10_000
