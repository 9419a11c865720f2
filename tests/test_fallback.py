"""Authored fallback (issue 22, Deliver 5): when the model fails, on each fault the fake model
server can produce, a scenario's authored line narrates the turn, marked as such, with the world
state untouched and Retry asking the model again; without lines a failure stays a failure; a
turn cut off with its process (an expired claim) spends no model call on its own. The engine on
both databases with the fake model server; the turn's look through real discord.py over the
stand-in."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select
from sqlmodel import col

from engine.errors import ModelError
from engine.library.formats.bundle import read_bundle, write_bundle
from engine.library.scenarios.play_options import keep_play_options, load_play_options
from engine.llm.providers.resolver import OperatorDefault
from engine.people.access.rules import Actor
from engine.platform.coordination.leases import TurnLeases
from engine.platform.queue import AdventureQueue
from engine.play.service import PlayService
from engine.storage.models import ActionType, Adventure, Scenario, StoryNode, utcnow
from engine.storage.play_models import ScenarioPlayOptions
from engine.story.fallback import FALLBACK_MODEL, choose_line, read_lines
from engine.turns.engine import TurnEngine
from engine.turns.events import TurnDone, TurnFailed
from tests.discord_env import DiscordEnv
from tests.fakes.openai_server import Reply
from tests.helpers import leave_dead_turn, new_adventure, node_count, play

LINES = ["The wind drops, and for a moment the world holds its breath.", "Somewhere, a bell."]

FAULTS = [
    Reply(fault="500"),
    Reply(fault="429", retry_after=7),
    Reply(fault="401"),
    Reply(fault="404"),
    Reply(fault="timeout"),
    Reply(fault="stall", text="One two three four five six seven eight."),
    Reply(fault="disconnect", text="One two three four five six seven eight."),
    Reply(fault="malformed", text="One two three four five six."),
    Reply(fault="empty"),
    Reply(reasoning="Hmm. " * 20, text="", finish_reason="length"),
]


def fault_id(reply: Reply) -> str:
    return reply.fault or "reasoning-exhausted"


@pytest.fixture
def engine(db, provider) -> TurnEngine:
    return TurnEngine(db, OperatorDefault(provider))


async def with_lines(db, adventure_id: int, lines: list[str]) -> None:
    async with db.transaction() as session:
        adventure = await session.get(Adventure, adventure_id)
        assert adventure is not None and adventure.scenario_id is not None
        session.add(ScenarioPlayOptions(scenario_id=adventure.scenario_id, fallback=lines))


@pytest.mark.parametrize("fault", FAULTS, ids=fault_id)
async def test_an_authored_line_narrates_a_turn_the_model_failed(db, engine, fake_model, fault):
    adventure_id = await new_adventure(db)
    await with_lines(db, adventure_id, LINES)
    before = await node_count(db, adventure_id)
    fake_model.queue(fault)
    events = await play(engine, adventure_id, ActionType.DO, "light the lantern")
    done = events[-1]
    assert isinstance(done, TurnDone), done
    result = done.result
    assert result.text == choose_line(LINES, 2)  # the narration's index on the line
    assert result.fallback_reason  # the model's failure, in words, for the note under it
    assert result.suggestions == ()
    assert len(fake_model.requests) == 1  # the model was asked once, and only once
    async with db.session() as session:
        node = await session.get(StoryNode, result.narrator_node_id)
        assert node is not None and node.model == FALLBACK_MODEL and node.text == result.text
    assert await node_count(db, adventure_id) == before + 2  # the action and the line

    # Retry asks the model again: its reply is another take of the same turn.
    fake_model.queue("The lantern catches at last.")
    retried = [e async for e in engine.retry(adventure_id)][-1]
    assert isinstance(retried, TurnDone), retried
    assert (retried.result.take, retried.result.text) == (2, "The lantern catches at last.")
    assert retried.result.fallback_reason == ""


async def test_without_lines_a_failure_stays_a_failure(db, engine, fake_model):
    adventure_id = await new_adventure(db)
    before = await node_count(db, adventure_id)
    fake_model.queue(Reply(fault="500"))
    failed = (await play(engine, adventure_id, ActionType.DO, "shout"))[-1]
    assert isinstance(failed, TurnFailed) and isinstance(failed.error, ModelError)
    assert await node_count(db, adventure_id) == before


async def test_a_failed_retry_keeps_the_take_it_would_replace(db, engine, fake_model):
    adventure_id = await new_adventure(db)
    await with_lines(db, adventure_id, LINES)
    fake_model.queue("The lantern catches.", Reply(fault="500"))
    first = (await play(engine, adventure_id, ActionType.DO, "light it"))[-1]
    assert isinstance(first, TurnDone)
    failed = [e async for e in engine.retry(adventure_id)][-1]
    assert isinstance(failed, TurnFailed)
    async with db.session() as session:
        node = await session.get(StoryNode, first.result.narrator_node_id)
        assert node is not None and (node.text, node.take_count) == ("The lantern catches.", 1)


async def test_the_world_state_stands_still_under_a_fallback_line(db, engine, fake_model):
    adventure_id = await new_adventure(db)
    async with db.transaction() as session:
        adventure = await session.get(Adventure, adventure_id)
        assert adventure is not None
        adventure.stat_schema = {"player": {"hp": {"min": 0, "max": 100, "initial": 80}}}
        adventure.world_state = {}
    await with_lines(db, adventure_id, LINES)
    fake_model.queue('You leap.\n```state\n{"player": {"hp": -20}}\n```', Reply(fault="500"))
    await play(engine, adventure_id, ActionType.DO, "jump")
    done = (await play(engine, adventure_id, ActionType.DO, "jump again"))[-1]
    assert isinstance(done, TurnDone), done
    assert done.result.text in LINES
    async with db.session() as session:
        adventure = await session.get(Adventure, adventure_id)
        assert adventure is not None
        assert adventure.world_state["values"]["player.hp"] == 60  # as the model's turn left it


async def test_an_expired_claim_spends_no_model_call_on_its_own(db, provider, fake_model):
    """A turn cut off with its process is found by the sweep and told to its channel; no
    fallback line and no model call is made for it, whatever lines the scenario has."""
    now = [utcnow()]
    turns = TurnEngine(db, OperatorDefault(provider))
    leases = TurnLeases(db, holder="sweeper", clock=lambda: now[0])
    service = PlayService(db, turns, leases, AdventureQueue(cap=5))
    actor = Actor(user_id=1, user_name="Alice", server_id=500, server_name="Hearth")
    started = await service.start(actor, channel_id=60, query=None)
    await with_lines(db, started.adventure_id, LINES)
    before = await node_count(db, started.adventure_id)
    await leave_dead_turn(
        db,
        started.adventure_id,
        request_id=901,
        user_id=1,
        action={"type": "do", "text": "cross the bridge"},
        clock=lambda: now[0],
    )
    now[0] = utcnow() + timedelta(minutes=5)
    found = await service.reap_interrupted()
    assert [channel for channel, _ in found] == [60]
    assert fake_model.requests == []
    assert await node_count(db, started.adventure_id) == before


# --- the bundle --------------------------------------------------------------------------------


async def test_a_bundle_carries_its_lines_and_switches_and_an_export_keeps_them(db):
    raw = {
        "campfire": "scenario",
        "version": 1,
        "title": "Lighthouse",
        "prompt": "The lamp is out.",
        "suggestions": False,
        "fallback": ["The sea sighs.", "", "  Gulls wheel overhead.  "],
    }
    draft = read_bundle(raw)
    assert draft.suggestions is False
    assert draft.fallback == ["The sea sighs.", "Gulls wheel overhead."]
    assert read_bundle({**raw, "fallback": "One line, with a comma."}).fallback == [
        "One line, with a comma."
    ]
    assert read_lines(["a" * 5000])[0] == "a" * 1000
    async with db.transaction() as session:
        scenario = Scenario(title="Lighthouse", prompt="The lamp is out.")
        session.add(scenario)
        await session.flush()
        assert scenario.id is not None
        await keep_play_options(session, scenario.id, draft)
        await session.flush()
        exported = read_bundle(raw | {"suggestions": True, "fallback": []})
        await load_play_options(session, scenario.id, exported)
    assert (exported.suggestions, exported.fallback) == (False, draft.fallback)
    written = write_bundle(exported)
    assert written["suggestions"] is False and written["fallback"] == draft.fallback
    assert "suggestions" not in write_bundle(read_bundle({**raw, "suggestions": True}))


# --- through Discord ---------------------------------------------------------------------------


async def test_players_see_the_line_marked_and_retry_asks_the_model_again(
    env: DiscordEnv, fake_model
):
    thread = await env.start_thread()
    async with env.bot.services.db.session() as session:
        adventure = (
            await session.scalars(select(Adventure).where(col(Adventure.channel_id) == thread))
        ).one()
    assert adventure.id is not None
    await with_lines(env.bot.services.db, adventure.id, LINES)
    fake_model.queue(Reply(fault="500"), "The storm breaks at last.")
    await env.fake.slash(env.alice, thread, "do", action="wait for the storm")
    await env.done()
    shown = env.narration(thread)[-1]
    assert shown.split("\n")[0] in LINES
    assert "authored line stands in" in shown and "Retry" in shown
    message = [m for m in env.fake.messages(thread) if m.buttons][-1]
    assert "Retry" in [label for label, _, _ in message.buttons]
    await env.fake.press(env.alice, message.id, label="Retry")
    await env.done()
    assert env.narration(thread)[-1] == "The storm breaks at last."


async def test_a_reply_stopped_at_its_limit_is_a_failure_an_authored_line_stands_in_for(
    db, fake_model
):
    """The fake server's last fault: a reply that never ends, stopped by Campfire's own limit
    on one reply (``ReplyLimits``) and then treated as any failure."""
    from engine.llm.providers.base import ReplyLimits
    from engine.llm.providers.openai_compat import OpenAICompatibleProvider

    provider = OpenAICompatibleProvider(
        fake_model.base_url, fake_model.model, timeout=2.0, limits=ReplyLimits(seconds=0.8)
    )
    try:
        engine = TurnEngine(db, OperatorDefault(provider))
        adventure_id = await new_adventure(db)
        await with_lines(db, adventure_id, LINES)
        fake_model.queue(Reply(fault="endless", delay=0.01))
        done = (await play(engine, adventure_id, ActionType.DO, "light the lantern"))[-1]
    finally:
        await provider.aclose()
    assert isinstance(done, TurnDone), done
    assert done.result.text in LINES and "0.8 seconds" in done.result.fallback_reason
