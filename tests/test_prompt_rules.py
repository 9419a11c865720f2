"""The narrator's prompt without contradictions (issue 39, Deliver 3): one place composes its
rules for solo and group play, one instruction asks for the held-back block, and suggested
actions are left out on a model that never writes them (Insights says so), kept in the
database. Turns played against the fake model server; the prompts read as it recorded them."""

from __future__ import annotations

import json

from engine.llm.providers.openai_compat import OpenAICompatibleProvider
from engine.llm.providers.resolver import OperatorDefault
from engine.people.accounts import touch_server
from engine.prompt.held_block import BlockPart, instruction
from engine.prompt.inputs import ContextInputs
from engine.prompt.narrator import GROUP_VOICE_LINE, Voice, narrator_rules
from engine.storage.models import ActionType, Adventure
from engine.storage.play_models import SuggestionFit
from engine.story.actions import PlayerAction
from engine.story.chapters.prompt import EVENTS_RULE
from engine.story.narrative.render import STORY_PART
from engine.story.suggestions import SUGGESTIONS_PART
from engine.story.suggestions.fit import MISSED_LIMIT, RETRY_EVERY
from engine.story.world.parser import extract_state
from engine.story.world.render import STATE_PART
from engine.turns.context import ContextEngine
from engine.turns.engine import TurnEngine
from engine.turns.events import TurnDone
from engine.turns.insights import Insights
from tests.fakes.openai_server import FakeModelServer
from tests.helpers import add_users, new_adventure, play

SERVER = 77
BLOCK = '\n```state\n{"suggestions": ["Knock again", "Call out to Wenna"]}\n```'


def system_of(request: dict) -> str:
    return request["messages"][0]["content"]


# --- the narrator's rules ----------------------------------------------------------------------


async def test_a_group_story_is_told_in_one_voice(db, provider, fake_model):
    """The Lantern Road asks for the second person; a group story names each character. The
    system message used to say both ("Write in second person" and "never as 'you'")."""
    adventure_id = await new_adventure(db, channel_id=5)
    async with db.transaction() as session:
        await touch_server(session, SERVER, "The Inn")
        adventure = await session.get(Adventure, adventure_id)
        assert adventure is not None
        adventure.server_id, adventure.host_id = SERVER, None
    await add_users(db, 1)
    engine = TurnEngine(db, OperatorDefault(provider))
    fake_model.queue("Ann raises the lantern.")
    action = PlayerAction(ActionType.DO, "raise my lantern", author_id=1, actor="Ann")
    events = [event async for event in engine.play(adventure_id, action)]
    assert isinstance(events[-1], TurnDone), events[-1]
    system = system_of(fake_model.requests[0])
    assert "second person" not in system.lower()
    assert GROUP_VOICE_LINE in system and system.count('never "you"') == 1
    assert "Write in third person, present tense" in system
    # Insights says why the scenario's instructions were sent otherwise.
    insights = await Insights(db).for_turn(5)
    assert insights.report is not None
    (section,) = [s for s in insights.report.sections if s.key == "ai_instructions"]
    assert '"second person" sent as "third person"' in section.reason


def test_a_solo_story_is_told_as_its_instructions_ask():
    asked = narrator_rules(group=False, instructions="Write in second person, present tense.")
    assert asked.voice is Voice.SECOND and "person" not in asked.text
    # Unsaid, the rules say nothing of it either (an imported story may be told as "I"), and
    # the tidying holds the narration to "you".
    told = narrator_rules(group=False)
    assert told.text == asked.text and told.voice is Voice.SECOND
    first = narrator_rules(group=False, instructions="Use first-person narration.")
    assert first.voice is Voice.FIRST and first.instructions == "Use first-person narration."
    # A group story keeps a first-person narrator (a storyteller's "I"), naming the characters.
    group = narrator_rules(group=True, instructions="Tell it in the first person.")
    assert group.voice is Voice.FIRST and group.note == "" and GROUP_VOICE_LINE in group.text


# --- one held-back block -----------------------------------------------------------------------


def test_one_instruction_and_one_example_carry_every_part_of_the_block():
    events = BlockPart("events", "Chapter events", EVENTS_RULE.format(example=""), {"events": []})
    parts = (SUGGESTIONS_PART, STORY_PART, events, STATE_PART)  # in the order features add them
    built = ContextEngine().build(ContextInputs(block_parts=parts, action_text="> You wait."))
    system = built.messages[0].content
    assert system.count("After your reply") == 1 and system.count("```state") == 2
    # In a fixed order, whatever order they were added in: the system message stays the same.
    assert system.index(STATE_PART.rule) < system.index(events.rule) < system.index(STORY_PART.rule)
    assert system.index(STORY_PART.rule) < system.index(SUGGESTIONS_PART.rule)
    example = instruction(parts).split("```state\n")[1].split("\n```")[0]
    assert list(json.loads(example)) == [
        "player",
        "npcs",
        "milestones",
        "events",
        "story",
        "suggestions",
    ]
    # The example is a block the engine reads: its lists handed out apart from the state.
    found = extract_state(f"The tide turns.\n```state\n{example}\n```")
    assert found.prose == "The tide turns."
    assert set(found.lists) >= {"suggestions", "events"} and found.story
    (section,) = [s for s in built.report.sections if s.key == "held_block"]
    assert [item.label for item in section.items] == [
        "World-state changes",
        "Chapter events",
        "Story-state events",
        "Suggested actions",
    ]


# --- suggestions on a model that never writes them ---------------------------------------------


async def test_suggestions_are_left_out_after_replies_without_them_and_insights_says_so(
    db, provider, fake_model
):
    engine = TurnEngine(db, OperatorDefault(provider))
    adventure_id = await new_adventure(db)
    for n in range(MISSED_LIMIT + 2):
        fake_model.queue(f"The lantern flickers, {n} times.")
        done = (await play(engine, adventure_id, ActionType.DO, "wait"))[-1]
        assert isinstance(done, TurnDone), done
    systems = [system_of(request) for request in fake_model.requests]
    asked = [SUGGESTIONS_PART.rule in system for system in systems]
    assert asked == [True] * MISSED_LIMIT + [False, False]
    # Left out once, the system message stays as it is from turn to turn (the cached prefix).
    assert systems[-1] == systems[-2] and len(systems[-1]) < len(systems[0])
    insights = await Insights(db).for_turn(1)
    assert insights.report is not None
    excluded = [item for item in insights.report.excluded if item.label == "Suggested actions"]
    (item,) = excluded
    assert item.reason.startswith(f"left out: the model's last {MISSED_LIMIT + 1} replies")
    assert "or at once on another model" in item.reason and item.tokens > 30
    async with db.session() as session:
        fit = await session.get(SuggestionFit, adventure_id)
    assert fit is not None and fit.missed == MISSED_LIMIT + 2 and fit.model == provider.label

    # A model that offers them anyway is asked again the next turn.
    fake_model.queue("Someone knocks." + BLOCK, "Wenna opens the door.")
    done = (await play(engine, adventure_id, ActionType.DO, "listen"))[-1]
    assert isinstance(done, TurnDone) and done.result.suggestions == (
        "Knock again",
        "Call out to Wenna",
    )
    await play(engine, adventure_id, ActionType.DO, "open the door")
    assert SUGGESTIONS_PART.rule in system_of(fake_model.requests[-1])


async def test_they_come_back_on_another_model_and_once_every_so_many_turns(
    db, provider, fake_model
):
    adventure_id = await new_adventure(db)
    async with db.transaction() as session:
        session.add(SuggestionFit(adventure_id=adventure_id, model=provider.label, missed=9))
    engine = TurnEngine(db, OperatorDefault(provider))
    fake_model.queue("The reeds hum.")
    await play(engine, adventure_id, ActionType.DO, "listen")
    assert SUGGESTIONS_PART.rule not in system_of(fake_model.requests[-1])
    # Another model (another label: a second server) is asked at once: its count starts again.
    with FakeModelServer() as second:
        other = OpenAICompatibleProvider(second.base_url, second.model, timeout=2.0)
        try:
            second.queue("The reeds hum for another.")
            turn = TurnEngine(db, OperatorDefault(other))
            done = (await play(turn, adventure_id, ActionType.DO, "hum"))[-1]
            assert isinstance(done, TurnDone), done
        finally:
            await other.aclose()
        assert SUGGESTIONS_PART.rule in system_of(second.requests[-1])
    assert other.label != provider.label
    async with db.session() as session:
        fit = await session.get(SuggestionFit, adventure_id)
    assert fit is not None and (fit.model, fit.missed) == (other.label, 1)
    # While left out, the same model is asked again once every RETRY_EVERY turns.
    async with db.transaction() as session:
        fit = await session.get(SuggestionFit, adventure_id)
        assert fit is not None
        fit.model, fit.missed = provider.label, MISSED_LIMIT + RETRY_EVERY - 1
    fake_model.queue("The reeds fall silent.")
    await play(engine, adventure_id, ActionType.DO, "wait")
    assert SUGGESTIONS_PART.rule in system_of(fake_model.requests[-1])
