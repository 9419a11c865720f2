"""Cards the story proposes to the host every few turns (issue: cards the story writes, as AI
Dungeon's story-card generator and the Auto-Cards script do while the story goes): privately,
added only on the host's Add, decided once in the database, paid for like ``/card generate``."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import discord
import pytest
from sqlalchemy import select
from sqlmodel import col

from cogs.ui.recent_interactions import KEPT_S, MAX_KEPT, RecentInteractions
from engine.people.access.rules import Actor
from engine.people.limits import Charge
from engine.platform.events import Usage
from engine.storage.card_proposal_models import CardProposalRecord, CardProposalState
from engine.storage.limit_models import Cooldown
from engine.storage.models import Adventure, AdventureCard
from engine.story.steering.card_proposals import CardProposals
from tests.discord_env import DiscordEnv, campfire_on_standin
from tests.fakes.openai_server import FakeModelServer
from tests.test_adventure_rights import answer, press_forged

WREN_CARD = {
    "title": "Wren",
    "type": "character",
    "keys": ["Wren", "the reed girl"],
    "entry": "Wren is a girl of the reeds who hums the old lantern songs.",
}
#: Five turns that name Wren twice, mid-sentence (``most_mentioned_uncovered``).
NARRATIONS = (
    "A girl steps out of the reeds. They call her Wren, the reed girl.",
    "You follow Wren along the bank while the lanterns hum.",
    "The river bends.",
    "Night falls on the marsh.",
    "An owl calls twice.",
)


@pytest.fixture
async def quiet_env(
    tmp_path: Path,
    fake_model: FakeModelServer,
    caplog: pytest.LogCaptureFixture,
    database_url: str,
) -> AsyncIterator[DiscordEnv]:
    """The bot with the memory bank's background work off the model: every model call here
    is a turn's or a card's, in the order the test queues them."""
    async with campfire_on_standin(
        tmp_path, fake_model, caplog, database_url, background_model_use=False
    ) as environment:
        yield environment


async def _quiet(env: DiscordEnv) -> None:
    """Until the bot is done, the card proposal a turn scheduled included."""
    bot = env.bot
    for _ in range(1000):
        await env.done()
        pending = [j.id for j in bot.scheduler.get_jobs() if j.id.startswith("card-proposal-")]
        if not pending and not bot.background._running:
            await env.done()
            return
        await asyncio.sleep(0.01)
    raise AssertionError("a card proposal is still running")


async def _play(env: DiscordEnv, thread: int, fake_model, user: int, *texts: str, card=None):
    """Turns by ``user``; ``card``: the model's answer queued right after the last narration
    (the proposal's call comes next)."""
    for number, text in enumerate(texts):
        fake_model.queue(text)
        if card is not None and number == len(texts) - 1:
            fake_model.queue(json.dumps(card))
        record = await env.fake.slash(user, thread, "do", action=f"look around {number}")
        await _quiet(env)
        assert record.failed is None
    return record


async def _set_every(env: DiscordEnv, thread: int, every: int) -> None:
    record = await env.fake.slash(env.alice, thread, "adventure settings", card_proposals=every)
    await env.done()
    assert f"every **{every}** turns" in answer(env, record).content


async def _proposals(env: DiscordEnv) -> list[CardProposalRecord]:
    async with env.bot.services.db.session() as session:
        return list(await session.scalars(select(CardProposalRecord)))


async def _card_titles(env: DiscordEnv) -> list[str]:
    async with env.bot.services.db.session() as session:
        return [card.title for card in await session.scalars(select(AdventureCard))]


async def _adventure_id(env: DiscordEnv) -> int:
    async with env.bot.services.db.session() as session:
        adventure = await session.scalar(select(Adventure).where(col(Adventure.ended_at).is_(None)))
        assert adventure is not None and adventure.id is not None
        return adventure.id


async def test_after_n_turns_the_host_who_played_it_is_proposed_a_card_privately(
    quiet_env: DiscordEnv, fake_model
):
    env = quiet_env
    thread = await env.start_thread()
    await _set_every(env, thread, 5)
    titles = await _card_titles(env)
    await _play(env, thread, fake_model, env.alice, *NARRATIONS[:4])
    assert await _proposals(env) == []  # not at turn 4
    asked = len(fake_model.requests)
    record = await _play(env, thread, fake_model, env.alice, NARRATIONS[4], card=WREN_CARD)

    # The host's own /do played the turn: the proposal is its ephemeral follow-up.
    assert len(fake_model.requests) == asked + 2  # the turn, then the card
    assert "Write the card for: Wren" in str(fake_model.requests[-1])
    proposal = env.fake.message(record.followups[-1])
    assert proposal.visible_to == env.alice
    assert "mentions **Wren** most without a card" in proposal.content
    assert proposal.embeds[0]["title"] == "📇 Wren"
    assert [label for label, _, _ in proposal.buttons] == ["Add card", "Discard"]
    assert await _card_titles(env) == titles  # nothing added without the host's press

    added = await env.fake.press(env.alice, proposal.id, label="Add card")
    await env.done()
    assert added.failed is None
    assert env.fake.message(proposal.id).content.startswith("Story card “Wren” added")
    assert await _card_titles(env) == [*titles, "Wren"]
    [stored] = await _proposals(env)
    assert (stored.turn, stored.state) == (5, CardProposalState.ADDED)


async def test_a_turn_someone_else_played_reaches_the_host_by_dm_and_only_the_host_adds_it(
    quiet_env: DiscordEnv, fake_model
):
    env = quiet_env
    thread = await env.start_thread()
    await _set_every(env, thread, 5)
    await _play(env, thread, fake_model, env.alice, *NARRATIONS[:4])
    await _play(env, thread, fake_model, env.bob, NARRATIONS[4], card=WREN_CARD)

    dm = env.fake.dm_channel(env.alice)
    [proposal] = [m for m in env.fake.messages(dm) if m.buttons]
    assert f"in <#{thread}>" in proposal.content
    assert proposal.embeds[0]["title"] == "📇 Wren"
    # Nothing reached bob.
    assert not [m for m in env.fake.messages(env.fake.dm_channel(env.bob)) if m.buttons]

    # A press that is not the host's (a forged one) is refused to its presser, nothing added.
    custom_id = next(b[1] for b in proposal.buttons if b[0] == "Add card")
    assert custom_id is not None
    story = [m for m in env.fake.messages(thread) if m.buttons][-1]
    forged = await press_forged(env, env.bob, story, custom_id)
    assert "proposed to the adventure's host" in answer(env, forged).content
    assert answer(env, forged).visible_to == env.bob
    assert "Wren" not in await _card_titles(env)

    dropped = await env.fake.press(env.alice, proposal.id, label="Discard")
    await env.done()
    assert dropped.failed is None
    assert env.fake.message(proposal.id).content == "Discarded: no card was added."
    assert "Wren" not in await _card_titles(env)
    # Settled once: a second service (another process) cannot add it after all.
    with pytest.raises(Exception, match="it was already added or discarded"):
        await env.bot.services.card_proposals.settle(
            (await _proposals(env))[0].id or 0, Actor(env.alice), add=True
        )


async def test_none_when_off_and_a_closed_dm_is_dropped_once(
    quiet_env: DiscordEnv, fake_model, caplog
):
    env = quiet_env
    thread = await env.start_thread()
    asked = len(fake_model.requests)
    await _play(env, thread, fake_model, env.alice, *NARRATIONS)
    # Off (the default): five turns, five model calls, no proposal.
    assert len(fake_model.requests) == asked + 5
    assert await _proposals(env) == []

    await _set_every(env, thread, 5)
    env.fake.close_dms(env.alice)
    env.expect(50007)
    caplog.set_level(logging.INFO, logger="cogs.ui.card_proposals")
    await _play(env, thread, fake_model, env.bob, *NARRATIONS, card=WREN_CARD)
    [stored] = await _proposals(env)
    assert (stored.turn, stored.state) == (10, CardProposalState.READY)
    assert any("does not take DMs" in r.getMessage() for r in caplog.records)
    # Dropped, not retried: one card call, one refused DM.
    assert sum("Write the card for" in str(r) for r in fake_model.requests) == 1


async def test_two_processes_at_the_same_turn_propose_once(quiet_env: DiscordEnv, fake_model):
    env = quiet_env
    thread = await env.start_thread()
    await _play(env, thread, fake_model, env.alice, *NARRATIONS)
    await _set_every(env, thread, 5)
    adventure_id = await _adventure_id(env)
    services = env.bot.services
    # Another process's service over the same database.
    other = CardProposals(services.db, services.card_writer, services.story_cards)
    fake_model.queue(json.dumps(WREN_CARD), json.dumps(WREN_CARD))
    asked = len(fake_model.requests)
    here, there = await asyncio.gather(
        services.card_proposals.propose(adventure_id), other.propose(adventure_id)
    )
    assert [p for p in (here, there) if p is not None] != []
    assert (here is None) != (there is None)
    assert len(fake_model.requests) == asked + 1
    assert len(await _proposals(env)) == 1
    # And again later, at the same count: already claimed.
    assert await other.propose(adventure_id) is None


async def test_a_used_budget_or_rate_limit_skips_the_proposal_without_asking(
    quiet_env: DiscordEnv, fake_model
):
    env = quiet_env
    thread = await env.start_thread()
    await _set_every(env, thread, 5)
    # The host's day on the operator's model is used (background work is charged to them).
    limits = env.bot.services.limits
    await limits.count_background(
        Charge(env.alice, None), Usage(limits.rules.user_tokens_per_day, 0)
    )
    await _play(env, thread, fake_model, env.bob, *NARRATIONS)
    [stored] = await _proposals(env)
    assert stored.state == CardProposalState.SKIPPED
    assert not any("Write the card for" in str(r) for r in fake_model.requests)
    assert not [m for m in env.fake.messages(env.fake.dm_channel(env.alice)) if m.buttons]


async def test_the_setting_is_bounded_and_kept_by_reset(quiet_env: DiscordEnv):
    env = quiet_env
    thread = await env.start_thread()
    record = await env.fake.slash(env.alice, thread, "adventure settings", card_proposals=3)
    await env.done()
    assert "card_proposals must be 0 (off) or between 5 and 100" in answer(env, record).content
    await _set_every(env, thread, 20)
    record = await env.fake.slash(env.alice, thread, "adventure settings", reset=True)
    await env.done()
    assert "every **20** turns" in answer(env, record).content
    # Bob may not steer: he cannot switch it on.
    record = await env.fake.slash(env.bob, thread, "adventure settings", card_proposals=5)
    await env.done()
    assert answer(env, record).content.startswith("⚠")
    record = await env.fake.slash(env.alice, thread, "adventure settings", card_proposals=0)
    await env.done()
    assert "Card proposals to the host: **off**" in answer(env, record).content


async def test_the_hosts_rate_limit_skips_the_proposal_without_a_strike(
    tmp_path: Path, fake_model: FakeModelServer, caplog: pytest.LogCaptureFixture, database_url
):
    async with campfire_on_standin(
        tmp_path,
        fake_model,
        caplog,
        database_url,
        background_model_use=False,
        card_writes_per_minute=1,
    ) as env:
        thread = await env.start_thread()
        await _set_every(env, thread, 5)
        await _play(env, thread, fake_model, env.alice, *NARRATIONS[:4])
        # The host's one card a minute, used by hand just before the fifth turn.
        fake_model.queue(json.dumps(WREN_CARD | {"title": "Owl"}))
        record = await env.fake.slash(env.alice, thread, "card generate", name="Owl")
        await env.done()
        assert "Add it?" in answer(env, record).content
        asked = len(fake_model.requests)
        await _play(env, thread, fake_model, env.bob, NARRATIONS[4])
        [stored] = await _proposals(env)
        assert stored.state == CardProposalState.SKIPPED
        assert len(fake_model.requests) == asked + 1  # the turn alone
        # No strike: nothing on the host's cool-down, and they act on as before.
        async with env.bot.services.db.session() as session:
            assert await session.get(Cooldown, env.alice) is None
        fake_model.queue("The owl flies off.")
        record = await env.fake.slash(env.alice, thread, "do", action="watch the owl")
        await _quiet(env)
        assert record.failed is None
        assert "The owl flies off." in "".join(env.narration(thread))


def test_an_interaction_is_kept_for_its_tokens_lifetime_and_within_a_bound():
    """Discord: an interaction's token is valid for 15 minutes; kept 14, and so many at most."""
    now = [0.0]
    kept = RecentInteractions(clock=lambda: now[0])

    def interaction(number: int) -> discord.Interaction:
        # Only its id is read here: a real Interaction needs a gateway payload and a client.
        return cast(discord.Interaction, SimpleNamespace(id=number))

    kept.note(interaction(1))
    kept.note(interaction(2))
    now[0] = KEPT_S - 1
    assert getattr(kept.take(1), "id", None) == 1
    assert kept.take(1) is None  # taken once
    now[0] = KEPT_S + 1
    assert kept.take(2) is None  # its token is too old
    assert kept.take(None) is None
    for number in range(MAX_KEPT + 10):
        kept.note(interaction(100 + number))
    assert kept.take(100) is None and kept.take(100 + MAX_KEPT + 9) is not None
    assert len(kept._kept) <= MAX_KEPT
