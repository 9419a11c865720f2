"""Which model an adventure's work goes to (engine.llm.providers.resolver.ChosenModels): the
player's own for a DM adventure, the server's for a server adventure, else the operator's; its
background work (memories) the same; a change stored by another process seen at the next turn.
Real database (both backends), real turns, two real fake model servers. The chosen server
listens on 127.0.0.1, which the policy here trusts by name; the rule itself is tested in
``tests/test_endpoint_policy.py``."""

from __future__ import annotations

import ipaddress
import json
import logging
from collections.abc import Iterator

import pytest
from sqlalchemy import update

from engine.llm.ceilings import Ceilings
from engine.llm.model_settings import ModelSettings
from engine.llm.providers.base import GenerationParams
from engine.llm.providers.endpoint_policy import EndpointPolicy
from engine.llm.providers.resolver import ChosenModels, OperatorDefault
from engine.people.access.rules import Actor
from engine.people.accounts import touch_server, touch_user
from engine.people.limits import LimitRules, RateLimited, UsageLimits
from engine.platform.crypto import SecretBox
from engine.storage.database import Database
from engine.storage.models import ActionType, Adventure
from engine.story.memory.writer import MemoryWriter
from engine.turns.engine import TurnEngine
from engine.turns.events import TurnDone
from engine.turns.insights import Insights
from tests.fakes.openai_server import FakeModelServer
from tests.helpers import new_adventure, play

KEY = "sk-server-7e57c0ffee99"
SERVER, PLAYER, MANAGER = 9_001, 9_002, 9_003
POLICY = EndpointPolicy(trusted=frozenset({ipaddress.ip_address("127.0.0.1")}))
SECRETS = SecretBox(b"a test secret of enough length")


@pytest.fixture
def own_model() -> Iterator[FakeModelServer]:
    with FakeModelServer(model="own-model", api_key=KEY) as server:
        yield server


def process(db: Database, provider) -> tuple[ChosenModels, ModelSettings]:
    """One process's resolver and /model service over the shared database."""
    models = ChosenModels(OperatorDefault(provider), SECRETS, POLICY)
    return models, ModelSettings(db, SECRETS, POLICY, models)


async def adventure_in(
    db: Database, *, server: int | None, owner: int | None, channel_id: int = 1
) -> int:
    adventure_id = await new_adventure(db, channel_id=channel_id)
    async with db.transaction() as session:
        if server is not None:
            await touch_server(session, server)
        if owner is not None:
            await touch_user(session, owner)
        await session.execute(
            update(Adventure)
            .where(Adventure.id == adventure_id)  # type: ignore[arg-type]
            .values(server_id=server, owner_id=owner)
        )
    return adventure_id


def chats(server: FakeModelServer) -> int:
    return sum(1 for entry in server.requests if "messages" in json.dumps(entry))


async def test_a_server_adventure_uses_the_servers_model_and_sees_another_process_change(
    db, provider, fake_model, own_model, caplog
):
    caplog.set_level(logging.DEBUG)
    models, settings = process(db, provider)
    other_models, other_settings = process(db, provider)  # "another process"
    manager = Actor(MANAGER, server_id=SERVER, manages_server=True)
    adventure_id = await adventure_in(db, server=SERVER, owner=None)
    engine = TurnEngine(db, models)

    await play(engine, adventure_id, ActionType.DO, "look")
    assert chats(fake_model) == 1 and chats(own_model) == 0
    async with db.session() as session:
        adventure = await session.get(Adventure, adventure_id)
        assert adventure is not None
        await models.read(session, adventure)
    assert models.is_operator_default(adventure)

    await other_settings.set(manager, own_model.base_url, "own-model", KEY)
    own_model.queue("The server's model answers.")
    events = await play(engine, adventure_id, ActionType.DO, "listen")
    assert type(events[-1]).__name__ == "TurnDone", events[-1]
    assert chats(own_model) == 1 and chats(fake_model) == 1
    assert not models.is_operator_default(adventure)
    assert models.for_adventure(adventure) is not provider

    # The key changes elsewhere: the next turn here uses the new one (a new cached provider).
    own_model.api_key = "sk-server-rotated-0001"
    await other_settings.set(manager, own_model.base_url, "own-model", own_model.api_key)
    before = models.for_adventure(adventure)
    await play(engine, adventure_id, ActionType.DO, "wait")
    assert chats(own_model) == 2
    assert models.for_adventure(adventure) is not before

    # Cleared elsewhere: back to the operator's model at the next turn.
    assert await other_settings.clear(manager)
    await play(engine, adventure_id, ActionType.DO, "go on")
    assert chats(fake_model) == 2 and chats(own_model) == 2
    assert models.is_operator_default(adventure)
    await models.aclose()
    await other_models.aclose()
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert KEY not in logged and "sk-server-rotated-0001" not in logged


async def test_a_dm_adventure_uses_its_players_model_and_a_server_adventure_does_not(
    db, provider, fake_model, own_model
):
    models, settings = process(db, provider)
    await settings.set(Actor(PLAYER), own_model.base_url, "own-model", KEY)
    solo = await adventure_in(db, server=None, owner=PLAYER)
    hosted = await adventure_in(db, server=SERVER, owner=None)
    engine = TurnEngine(db, models)
    await play(engine, solo, ActionType.DO, "look")
    assert chats(own_model) == 1 and chats(fake_model) == 0
    await play(engine, hosted, ActionType.DO, "look")
    assert chats(own_model) == 1 and chats(fake_model) == 1
    await models.aclose()


async def test_background_work_follows_the_adventures_model(db, provider, fake_model, own_model):
    """Memories of a server adventure are written by the server's model, even where the
    operator keeps their own model for narration only."""
    models = ChosenModels(OperatorDefault(provider, background=False), SECRETS, POLICY)
    settings = ModelSettings(db, SECRETS, POLICY, models)
    await settings.set(
        Actor(MANAGER, server_id=SERVER, manages_server=True), own_model.base_url, "own-model", KEY
    )
    adventure_id = await adventure_in(db, server=SERVER, owner=None)
    engine = TurnEngine(db, models)
    for n in range(1, 13):
        own_model.queue(f"Entry {n} of the story.")
        await play(engine, adventure_id, ActionType.DO, f"step ({n})")
    own_model.queue("Mira reached the drowned bell.")
    report = await MemoryWriter(db, models).catch_up(adventure_id)
    assert report.memories == 1, report
    assert "Passage:" in own_model.requests[-1]["messages"][-1]["content"]
    assert chats(fake_model) == 0
    await models.aclose()


async def test_an_adventures_settings_are_held_to_the_operators_ceilings_on_its_model_only(
    db, provider, fake_model, own_model
):
    """A host may set a context of 1,000,000 tokens and replies of 32,768: on the operator's
    model the turn keeps to the operator's budget and reply length, and Insights says so; on
    the player's own model the settings stand."""
    models, settings = process(db, provider)
    engine = TurnEngine(db, models, params=GenerationParams(max_tokens=300))
    assert engine.ceilings() == Ceilings(
        context_tokens=engine.context.budget, max_output_tokens=300
    )
    on_operator = await adventure_in(db, server=SERVER, owner=None, channel_id=7)
    own = await adventure_in(db, server=None, owner=PLAYER, channel_id=8)
    await settings.set(Actor(PLAYER), own_model.base_url, "own-model", KEY)
    async with db.transaction() as session:
        await session.execute(
            update(Adventure).values(context_tokens=1_000_000, max_output_tokens=32_768)
        )

    done = (await play(engine, on_operator, ActionType.DO, "look"))[-1]
    assert isinstance(done, TurnDone), done
    asked = next(entry for entry in fake_model.requests if "messages" in entry)
    assert asked["max_tokens"] == 300
    insights = await Insights(db).for_turn(7, node_id=done.result.narrator_node_id)
    report = insights.report
    assert report is not None and report.budget == engine.context.budget
    assert report.clamped == [
        f"context 1,000,000 tokens held to the operator's {engine.context.budget:,}",
        "replies of 32,768 tokens held to the operator's 300",
    ]

    own_model.queue("Your own model answers at length.")
    done = (await play(engine, own, ActionType.DO, "look"))[-1]
    assert isinstance(done, TurnDone), done
    asked = next(entry for entry in own_model.requests if "messages" in entry)
    assert asked["max_tokens"] == 32_768
    await models.aclose()


async def test_setting_and_testing_a_model_are_rate_limited(db, provider, own_model):
    """Each reaches an endpoint the player chose: a few a minute, then a refusal that says
    when (a strike, as every rate limit's)."""
    models = ChosenModels(OperatorDefault(provider), SECRETS, POLICY)
    limits = UsageLimits(db, LimitRules(model_checks_per_minute=2))
    settings = ModelSettings(db, SECRETS, POLICY, models, rate_limits=limits)
    player = Actor(PLAYER)
    await settings.set(player, own_model.base_url, "own-model", KEY)
    own_model.queue("ok")
    assert await settings.test(player) is not None
    with pytest.raises(RateLimited, match="set or test a model 2 times a minute"):
        await settings.test(player)
    with pytest.raises(RateLimited):
        await settings.set(player, own_model.base_url, "own-model", KEY)
    assert chats(own_model) == 1
    await models.aclose()


async def test_a_picked_model_no_longer_offered_falls_back_to_the_operators(
    db, provider, fake_model
):
    """/model pick stores a model on the operator's endpoint; the operator's whitelist is read
    at every turn, so a pick it no longer offers is the default again, and a pick is always
    the operator's to pay for (capped)."""
    offering = ChosenModels(OperatorDefault(provider), SECRETS, POLICY, whitelist=("qwen2.5",))
    settings = ModelSettings(db, SECRETS, POLICY, offering)
    await settings.pick(Actor(PLAYER), "qwen2.5")
    solo = await adventure_in(db, server=None, owner=PLAYER)
    async with db.session() as session:
        adventure = await session.get(Adventure, solo)
        assert adventure is not None
        await offering.read(session, adventure)
    assert offering.is_operator_default(adventure)
    assert offering.for_adventure(adventure).label == "qwen2.5"

    withdrawn = ChosenModels(OperatorDefault(provider), SECRETS, POLICY)  # a restart, no list
    async with db.session() as session:
        await withdrawn.read(session, adventure)
    assert withdrawn.is_operator_default(adventure)
    assert withdrawn.for_adventure(adventure) is provider
    await offering.aclose()
