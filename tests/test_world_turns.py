"""World state in play: the block is hidden from the stream, refereed, stored, shown as a chip,
fed back into the next context, and /state shows and corrects it."""

from __future__ import annotations

import json

from sqlalchemy import select

from engine.library.scenarios.start import start_adventure
from engine.llm.providers.resolver import OperatorDefault
from engine.platform.events import TextDelta
from engine.storage.models import ActionType, Adventure, Scenario, StoryNode
from engine.story.actions import PlayerAction
from engine.turns.engine import TurnEngine
from engine.turns.events import TurnDone
from tests.discord_env import answered
from tests.fakes.openai_server import Reply

PROSE = "An arrow grazes your arm. Gwen pulls you behind the wagon, eyes on the camp."
BLOCK = (
    '```state\n{"player": {"hp": -15, "mana": "+5"}, "flags": {"alarm_raised": true},'
    ' "npcs": {"gwen": {"trust": 5}}, "player.luck": 3,}\n```'
)


async def bandit_camp(db, channel_id: int = 1) -> int:
    async with db.session() as session, session.begin():
        scenario_id = await session.scalar(
            select(Scenario.id).where(Scenario.builtin_key == "bandit-camp")
        )
        adventure = await start_adventure(session, scenario_id, channel_id=channel_id)
        return adventure.id


async def test_a_turn_applies_its_block_and_hides_it(db, provider, fake_model):
    engine = TurnEngine(db, OperatorDefault(provider))
    adventure_id = await bandit_camp(db)
    async with db.session() as session:
        start = await session.get(Adventure, adventure_id)
        assert start.world_state["values"]["player.hp"] == 100

    fake_model.queue(Reply(text=f"{PROSE}\n\n{BLOCK}"))
    events = [
        e async for e in engine.play(adventure_id, PlayerAction(ActionType.DO, "creep closer"))
    ]
    streamed = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert "```" not in streamed and "hp" not in streamed
    done = events[-1]
    assert isinstance(done, TurnDone)
    assert done.result.text == PROSE
    assert "hp 100 → 85" in done.result.state_chip
    assert "trust" in done.result.state_chip

    async with db.session() as session:
        adventure = await session.get(Adventure, adventure_id)
        values = adventure.world_state["values"]
        assert values["player.hp"] == 85
        assert values["player.mana"] == 35
        assert values["flags.alarm_raised"] is True
        assert values["npcs.gwen.trust"] == 25
        node = await session.get(StoryNode, done.result.narrator_node_id)
        assert node.text == PROSE
        assert node.state_block
    # The unknown path was rejected and reported, the rest applied.
    async with db.session() as session:
        report = (
            await session.execute(
                select(StoryNode.state_report).where(StoryNode.id == done.result.narrator_node_id)
            )
        ).scalar_one()
    assert any(r["path"] == "player.luck" for r in report["rejected"])

    # The next context carries the guide, the live state with bands, the past block and the
    # reminder as its very last line.
    fake_model.queue("Gwen nods.")
    await anext_done(engine, adventure_id, "wait")
    sent = fake_model.requests[-1]["messages"]
    system, user = sent[0]["content"], sent[-1]["content"]
    assert "hp" in system  # the guide, with its bands
    assert "85/100" in user
    assert PROSE in user and node.state_block.strip() in user
    assert user.rstrip().splitlines()[-1].lower().startswith("remember")


async def anext_done(engine, adventure_id, text):
    events = [e async for e in engine.play(adventure_id, PlayerAction(ActionType.DO, text))]
    assert isinstance(events[-1], TurnDone), events[-1]
    return events[-1]


async def test_a_malformed_block_changes_nothing_and_the_turn_goes_on(db, provider, fake_model):
    engine = TurnEngine(db, OperatorDefault(provider))
    adventure_id = await bandit_camp(db)
    fake_model.queue(Reply(text=f"{PROSE}\n\n```state\n{{hp: lots\n```"))
    done = await anext_done(engine, adventure_id, "creep closer")
    assert done.result.text == PROSE
    async with db.session() as session:
        adventure = await session.get(Adventure, adventure_id)
        assert adventure.world_state["values"]["player.hp"] == 100


async def test_the_chip_and_state_commands_in_discord(env, fake_model):
    await env.fake.slash(env.alice, env.channel, "start", scenario="bandit")
    await env.done()
    (thread,) = env.fake.threads(env.channel)
    fake_model.queue(Reply(text=f"{PROSE}\n\n{BLOCK}", delay=0.005))
    await env.fake.slash(env.alice, thread, "do", action="creep closer")
    await env.done()
    narration = env.narration(thread)[-1]
    assert narration.startswith(PROSE)
    assert "\n-# " in narration and "hp 100 → 85" in narration
    assert "```" not in narration

    shown = await env.fake.slash(env.bob, thread, "state show")
    assert shown.ephemeral
    embed = env.fake.message(shown.original_message_id).embeds[0]
    assert "85" in embed["description"]

    refused = await env.fake.slash(env.bob, thread, "state set", path="player.hp", value="50")
    # Answered after the defer that comes before any write, and to bob alone.
    answer = await answered(env, refused)
    assert "host" in answer.content and answer.ephemeral

    fixed = await env.fake.slash(env.alice, thread, "state set", path="player.hp", value="500")
    await env.done()
    assert "100" in env.fake.message(fixed.original_message_id).content
    db = env.bot.services.db
    async with db.session() as session:
        adventure = (
            await session.scalars(select(Adventure).where(Adventure.channel_id == thread))
        ).one()
        assert adventure.world_state["values"]["player.hp"] == 100  # clamped to the range
    assert json.dumps(adventure.world_state)


async def test_a_stray_fence_in_the_narration_does_not_hide_the_block(env, fake_model):
    """The model's prose holds an unpaired ``` before its state block: the players never see
    the raw block, and the state is applied."""
    await env.fake.slash(env.alice, env.channel, "start", scenario="bandit")
    await env.done()
    (thread,) = env.fake.threads(env.channel)
    prose = "Gwen scratches ``` into the dirt, a sign only bandits read. The camp sleeps."
    fake_model.queue(Reply(text=f"{prose}\n\n{BLOCK}", delay=0.005))
    await env.fake.slash(env.alice, thread, "do", action="creep closer")
    await env.done()
    narration = env.narration(thread)[-1]
    assert narration.startswith(prose)
    assert "```state" not in narration and '"hp"' not in narration
    assert "hp 100 → 85" in narration
    async with env.bot.services.db.session() as session:
        adventure = (
            await session.scalars(select(Adventure).where(Adventure.channel_id == thread))
        ).one()
        assert adventure.world_state["values"]["player.hp"] == 85
        node = await session.get(StoryNode, adventure.head_node_id)
        assert node.text == prose
