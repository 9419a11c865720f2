"""Suggested actions (issue 22, Deliver 3): read from the model's held-back block, validated,
kept with the turn's take, switched off by a scenario or a server; as buttons under the newest
turn that play as the presser's own action, under the group's rules, refused when stale or
forged, and still there after a restart. The engine on both databases with the fake model
server; the buttons through real discord.py over the stand-in."""

from __future__ import annotations

import copy

import pytest
from sqlalchemy import select
from sqlmodel import col

from engine.llm.providers.resolver import OperatorDefault
from engine.people.servers import ServerSettings
from engine.platform.events import TextDelta
from engine.storage.models import ActionType, Adventure, Role, Server, StoryNode
from engine.storage.play_models import ScenarioPlayOptions
from engine.story.suggestions import MAX_LABEL, SUGGESTIONS_PART, offered, validate
from engine.story.world.parser import extract_state
from engine.turns.engine import TurnEngine
from engine.turns.events import TurnDone
from tests.discord_env import DiscordEnv, answered, crash, restarted
from tests.helpers import new_adventure, play

BLOCK = '```state\n{{"suggestions": {items}}}\n```'


def reply_with(prose: str, *items: str) -> str:
    import json

    return f"{prose}\n\n" + BLOCK.format(items=json.dumps(list(items)))


# --- what counts as a suggestion ------------------------------------------------------------------


def test_validation_keeps_short_distinct_in_world_actions_in_order():
    kept = validate(
        [
            "Open the iron door",
            "open the iron door!",  # the same, case and punctuation aside
            "x" * (MAX_LABEL + 1),  # no button label holds it
            "Ask the AI what to do",  # about the game, not in it
            "Click Continue",
            "Continue",  # a story button's own label
            "Use /do to act",
            "`rm -rf`",
            42,
            "",
            "- Search the beach",  # a list marker goes
            '"Call out to the keeper"',  # quotes go
            "Wait for the tide",
            "Climb the lighthouse",  # a fifth: at most four are kept
        ]
    )
    assert kept == (
        "Open the iron door",
        "Search the beach",
        "Call out to the keeper",
        "Wait for the tide",
    )
    assert all(len(text) <= MAX_LABEL for text in kept)
    assert validate("Open the door") == ()  # not a list
    assert validate(None) == ()


def test_the_block_hands_suggestions_apart_from_the_state_delta():
    found = extract_state(
        'The gulls cry.\n```state\n{"player": {"hp": -5}, "suggestions": ["Duck", "Run"]}\n```'
    )
    assert found.prose == "The gulls cry."
    assert found.delta == {"player.hp": -5}  # never a state path
    assert found.lists == {"suggestions": ["Duck", "Run"]}
    # A block with only suggestions is a block too, fenced or bare.
    assert extract_state('Waves.\n```json\n{"suggestions": ["Swim"]}\n```').prose == "Waves."
    assert extract_state('Waves.\n{"suggestions": ["Swim"]}').lists == {"suggestions": ["Swim"]}


# --- turns ----------------------------------------------------------------------------------------


@pytest.fixture
def engine(db, provider) -> TurnEngine:
    return TurnEngine(db, OperatorDefault(provider))


async def scenario_of(db, adventure_id: int) -> tuple[int, int | None]:
    async with db.session() as session:
        adventure = await session.get(Adventure, adventure_id)
        assert adventure is not None and adventure.scenario_id is not None
        return adventure.scenario_id, adventure.server_id


async def test_a_turn_keeps_its_suggestions_with_its_take_and_never_shows_the_block(
    db, engine, fake_model
):
    adventure_id = await new_adventure(db)
    fake_model.queue(
        reply_with("The keeper waves you in.", "Step inside", "Ask about the light", "Step inside"),
        reply_with("The keeper frowns.", "Apologise", "Leave quietly"),
    )
    events = await play(engine, adventure_id, ActionType.DO, "knock")
    done = events[-1]
    assert isinstance(done, TurnDone), done
    streamed = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert "suggestions" not in streamed and "```" not in streamed
    assert done.result.text == "The keeper waves you in."
    assert done.result.suggestions == ("Step inside", "Ask about the light")
    # The model was asked for them, in the system message.
    system = fake_model.requests[0]["messages"][0]["content"]
    # Once, in the held-back block's one instruction, with its one example.
    assert SUGGESTIONS_PART.rule in system and system.count("```state") == 2

    # A retry's take offers its own; the first take's are kept beside them.
    retried = [e async for e in engine.retry(adventure_id)][-1]
    assert isinstance(retried, TurnDone), retried
    assert retried.result.take == 2
    assert retried.result.suggestions == ("Apologise", "Leave quietly")
    node_id = done.result.narrator_node_id
    async with db.session() as session:
        assert await offered(session, node_id, 1) == ("Step inside", "Ask about the light")
        assert await offered(session, node_id, 2) == ("Apologise", "Leave quietly")
        node = await session.get(StoryNode, node_id)
        assert node is not None and node.text == "The keeper frowns."


@pytest.mark.parametrize("switched_off_by", ["scenario", "server"])
async def test_a_scenario_or_a_server_switches_them_off(db, engine, fake_model, switched_off_by):
    adventure_id = await new_adventure(db)
    scenario_id, _ = await scenario_of(db, adventure_id)
    async with db.transaction() as session:
        if switched_off_by == "scenario":
            session.add(ScenarioPlayOptions(scenario_id=scenario_id, suggestions=False))
        else:
            from engine.people.accounts import touch_server

            await touch_server(session, 555, "The Hearth")
            adventure = await session.get(Adventure, adventure_id)
            assert adventure is not None
            adventure.server_id = 555
            server = await session.get(Server, 555)
            assert server is not None
            server.suggestions = False
    fake_model.queue("The road runs on.")
    done = (await play(engine, adventure_id, ActionType.DO, "walk"))[-1]
    assert isinstance(done, TurnDone), done
    assert done.result.suggestions == ()
    system = fake_model.requests[0]["messages"][0]["content"]
    assert "suggestions" not in system
    async with db.session() as session:
        assert await offered(session, done.result.narrator_node_id, 1) == ()


# --- buttons through Discord ----------------------------------------------------------------------


def suggestion_buttons(env: DiscordEnv, thread: int) -> list[tuple[str, str]]:
    """The suggestion buttons of the message carrying the story's buttons now."""
    message = [m for m in env.fake.messages(thread) if m.buttons][-1]
    return [
        (label or "", cid or "")
        for label, cid, _ in message.buttons
        if (cid or "").startswith("cf:sg:")
    ]


async def line(env: DiscordEnv, thread: int) -> list[tuple[Role, int | None, str]]:
    async with env.bot.services.db.session() as session:
        adventure = (
            await session.scalars(select(Adventure).where(col(Adventure.channel_id) == thread))
        ).one()
        nodes = await session.scalars(
            select(StoryNode)
            .where(col(StoryNode.adventure_id) == adventure.id)
            .order_by(col(StoryNode.index), col(StoryNode.id))
        )
        return [(n.role, n.author_id, n.text) for n in nodes]


async def press(env: DiscordEnv, thread: int, user: int, label: str, message_id: int | None = None):
    if message_id is None:
        message_id = [m for m in env.fake.messages(thread) if m.buttons][-1].id
    record = await env.fake.press(user, message_id, label=label)
    await env.done()
    return record


async def test_a_pressed_suggestion_plays_as_the_pressers_action_once(env, fake_model):
    thread = await env.start_thread()
    fake_model.queue(
        reply_with("A gull lands on the rail.", "Feed the gull", "Shoo it away", "Watch the sea"),
        reply_with("The gull eats from your hand.", "Stroke the gull"),
        "The sea is calm.",
    )
    await env.fake.slash(env.alice, thread, "do", action="look out")
    await env.done()
    buttons = suggestion_buttons(env, thread)
    assert [label for label, _ in buttons] == ["Feed the gull", "Shoo it away", "Watch the sea"]
    assert all(len(cid) <= 100 for _, cid in buttons)  # Discord's custom_id limit
    message = [m for m in env.fake.messages(thread) if m.buttons][-1]
    rows = [row for row in message.components if row.get("type") == 1]
    assert len(rows) <= 5 and all(len(row["components"]) <= 5 for row in rows)
    under = message.id
    drawn = copy.deepcopy(message.components)

    # Bob presses one: it plays as his own Do, the model hears it as his.
    await press(env, thread, env.bob, "Feed the gull")
    assert env.narration(thread)[-1] == "The gull eats from your hand."
    played = [text for role, author, text in await line(env, thread) if author == env.bob]
    assert played == ["> bob feeds the gull."]
    assert "> bob feeds the gull." in fake_model.requests[1]["messages"][-1]["content"]
    # The new turn carries its own suggestions; the old message carries none any more.
    assert [label for label, _ in suggestion_buttons(env, thread)] == ["Stroke the gull"]
    assert not env.fake.message(under).buttons

    # A press under the older turn (a client that kept the old message) plays nothing.
    asked = len(fake_model.requests)
    env.fake.message(under).components = drawn
    stale = await env.fake.press(env.alice, under, custom_id=buttons[1][1])
    await env.done()
    message = await answered(env, stale)
    assert message.visible_to == env.alice and "moved on" in message.content
    assert len(fake_model.requests) == asked

    # A forged one: another index under the newest turn.
    newest = [m for m in env.fake.messages(thread) if m.buttons][-1]
    button = next(b for b in newest.button_components() if b["custom_id"].startswith("cf:sg:"))
    button["custom_id"] = button["custom_id"].rsplit(":", 1)[0] + ":3"
    record = await env.fake.press(env.alice, newest.id, custom_id=button["custom_id"])
    await env.done()
    message = await answered(env, record)
    assert message.visible_to == env.alice and "not offered" in message.content
    assert len(fake_model.requests) == asked


async def test_the_group_rules_hold_for_a_pressed_suggestion(env, fake_model):
    carol = env.fake.add_user("carol", member_of=[env.guild])
    await env.fake.flush()
    thread = await env.start_thread(host=env.bob)
    fake_model.queue(reply_with("Fog rolls in.", "Light the lamp", "Sound the horn"))
    await env.fake.slash(env.bob, thread, "do", action="climb the tower")
    await env.done()
    locked = await env.fake.slash(env.bob, thread, "host lock")
    await env.done()
    assert locked.failed is None
    asked = len(fake_model.requests)
    record = await press(env, thread, carol, "Light the lamp")
    message = await answered(env, record)
    assert message.visible_to == carol and "lock" in message.content.lower()
    assert len(fake_model.requests) == asked
    assert all(author != carol for _, author, _ in await line(env, thread))


async def test_rounds_take_a_pressed_suggestion_as_the_players_action_for_the_round(
    env, fake_model
):
    carol = env.fake.add_user("carol", member_of=[env.guild])
    await env.fake.flush()
    thread = await env.start_thread()
    fake_model.queue(reply_with("Night falls.", "Set up camp", "Keep walking"))
    await env.fake.slash(env.alice, thread, "do", action="walk on")
    await env.done()
    await env.fake.slash(carol, thread, "join")
    await env.done()
    moded = await env.fake.slash(env.alice, thread, "host mode", mode="rounds")
    await env.done()
    assert moded.failed is None
    asked = len(fake_model.requests)
    await press(env, thread, carol, "Set up camp")
    # Kept for the round, not narrated on its own: the round waits for alice.
    assert len(fake_model.requests) == asked
    from engine.storage.party_models import RoundAction

    async with env.bot.services.db.session() as session:
        waiting = list(await session.scalars(select(RoundAction)))
    assert [(w.user_id, "camp" in w.text.lower()) for w in waiting] == [(carol, True)]


async def test_a_server_switch_by_a_manager_turns_them_off(env, fake_model):
    thread = await env.start_thread()
    refused = await env.fake.slash(env.bob, env.channel, "server suggestions", on=False)
    await env.done()
    message = await answered(env, refused)
    assert message.visible_to == env.bob and "Manage Server" in message.content
    switched = await env.fake.slash(env.alice, env.channel, "server suggestions", on=False)
    await env.done()
    assert "no suggested actions" in (await answered(env, switched)).content
    fake_model.queue(reply_with("Rain.", "Take shelter"))
    await env.fake.slash(env.alice, thread, "do", action="wait")
    await env.done()
    assert env.narration(thread)[-1].startswith("Rain.")
    assert suggestion_buttons(env, thread) == []
    assert "suggestions" not in fake_model.requests[-1]["messages"][0]["content"]


async def test_suggestions_are_still_offered_and_played_after_a_restart(env, fake_model):
    thread = await env.start_thread()
    fake_model.queue(reply_with("The bell tolls.", "Count the tolls"), "Seven tolls.")
    await env.fake.slash(env.alice, thread, "do", action="listen")
    await env.done()
    assert [label for label, _ in suggestion_buttons(env, thread)] == ["Count the tolls"]
    await crash(env)
    async with restarted(env) as again:
        await press(again, thread, env.bob, "Count the tolls")
        assert again.narration(thread)[-1] == "Seven tolls."


async def test_the_story_standing_on_a_turn_again_shows_that_takes_suggestions(env, fake_model):
    thread = await env.start_thread()
    fake_model.queue(
        reply_with("A door.", "Open the door"),
        reply_with("A second door.", "Knock twice"),
        reply_with("The door was a painting.", "Touch the paint"),
    )
    await env.fake.slash(env.alice, thread, "do", action="walk")
    await env.done()
    await env.fake.slash(env.alice, thread, "do", action="walk on")
    await env.done()
    assert [label for label, _ in suggestion_buttons(env, thread)] == ["Knock twice"]

    # Undo: the buttons go back to the first turn, with its suggestion, which plays from there.
    await press(env, thread, env.alice, "Undo")
    assert [label for label, _ in suggestion_buttons(env, thread)] == ["Open the door"]
    await press(env, thread, env.bob, "Open the door")
    assert env.narration(thread)[-1] == "The door was a painting."
    assert [label for label, _ in suggestion_buttons(env, thread)] == ["Touch the paint"]

    # A retried turn's pager: each take shows its own.
    fake_model.queue(reply_with("The paint is wet.", "Wipe your hand"))
    await press(env, thread, env.alice, "Retry")
    assert [label for label, _ in suggestion_buttons(env, thread)] == ["Wipe your hand"]
    await press(env, thread, env.alice, "‹")
    assert [label for label, _ in suggestion_buttons(env, thread)] == ["Touch the paint"]


async def test_only_a_servers_managers_switch_them_and_never_in_a_dm(db):
    from engine.errors import NotAllowed
    from engine.people.access.rules import Actor

    service = ServerSettings(db)
    manager = Actor(
        user_id=1, user_name="Ann", server_id=77, server_name="Hearth", manages_server=True
    )
    with pytest.raises(NotAllowed, match="Manage Server"):
        await service.switch_suggestions(
            Actor(user_id=2, user_name="Bo", server_id=77, server_name="Hearth"), on=False
        )
    with pytest.raises(NotAllowed, match="DM"):
        await service.switch_suggestions(Actor(user_id=1, user_name="Ann"), on=False)
    assert (await service.of(77)).suggestions
    assert not (await service.switch_suggestions(manager, on=False)).suggestions
    assert not (await service.of(77)).suggestions
    await service.switch_suggestions(manager, on=True)
    assert (await service.of(77)).suggestions
