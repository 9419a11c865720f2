"""Content rules (``engine.people.content``): the rating at each level (the operator's default
and ceiling, the server's, the channel's age restriction and a thread's parent's, a DM
player's own, a scenario's), told to the narrator; banned words refused in actions and masked in
narrations (streamed and stored) and suggestions. Through the stand-in, whose channels carry
Discord's ``nsfw`` flag, with the fake model server behind the bot, on both databases."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import func, select

from bot.standin.interactions import StandinFile
from engine.errors import InvalidInput
from engine.people.content import (
    MASK,
    BannedWords,
    ContentPolicy,
    Rating,
    check_scenario_rating,
    place_rating,
)
from engine.storage.models import StoryNode
from tests.discord_env import DiscordEnv, campfire_on_standin
from tests.fakes.openai_replies import Reply

# -- the levels, as pure rules ------------------------------------------------------------------


def test_the_strictest_level_applies() -> None:
    policy = ContentPolicy(default=Rating.MODERATE, ceiling=Rating.MATURE)
    # A server that chose mature: only where Discord marks the channel age-restricted.
    mature = place_rating(policy, in_dm=False, chosen=Rating.MATURE, age_restricted=True)
    assert mature.rating is Rating.MATURE
    held = place_rating(policy, in_dm=False, chosen=Rating.MATURE, age_restricted=False)
    assert held.rating is Rating.MODERATE and "age-restricted" in held.held_by
    # Nothing above the operator's ceiling, in a DM either.
    low = ContentPolicy(default=Rating.SAFE, ceiling=Rating.MODERATE)
    dm = place_rating(low, in_dm=True, chosen=Rating.MATURE, age_restricted=False)
    assert dm.rating is Rating.MODERATE and "ceiling" in dm.held_by
    # No choice: the operator's default.
    assert place_rating(low, in_dm=False, chosen=None, age_restricted=True).rating is Rating.SAFE


def test_a_scenario_rated_above_its_place_is_refused_with_who_can_change_what() -> None:
    here = place_rating(ContentPolicy(), in_dm=False, chosen=Rating.SAFE, age_restricted=False)
    check_scenario_rating(None, here)  # unrated: anywhere
    check_scenario_rating(Rating.SAFE, here)
    with pytest.raises(InvalidInput) as refused:
        check_scenario_rating(Rating.MATURE, here)
    assert "rated **mature**" in refused.value.message
    assert "/server rating" in refused.value.message


def test_banned_words_match_whole_words_and_phrases_whatever_their_case() -> None:
    banned = BannedWords.of(["ass", "grisly death"], ["Lich"])
    assert banned.found("a class of wizards") is None  # not inside another word
    assert banned.found("The ASS brays.") == "ASS"
    assert banned.found("a grisly\n death awaits") == "grisly\n death"
    assert (
        banned.mask("The lich laughs; the lich's tower.")
        == f"The {MASK} laughs; the {MASK}'s tower."
    )
    assert not BannedWords.of([], ())


@pytest.mark.parametrize("size", [1, 2, 3, 5, 8])
def test_a_streamed_narration_never_shows_a_banned_word(size: int) -> None:
    text = "The lich rises. A grisly death waits, said the lich, and the lichen glows."
    banned = BannedWords.of(["lich", "grisly death"])
    stream = banned.stream()
    shown = ""
    for at in range(0, len(text), size):
        shown += stream.feed(text[at : at + size])
        assert banned.found(shown) is None, shown
    # What was shown is the start of the masked text (the final edit shows the rest).
    assert banned.mask(text).startswith(shown)
    assert "lichen" in banned.mask(text)


# -- through Discord ----------------------------------------------------------------------------


def _age_restricted_channel(fake) -> None:
    (guild,) = fake.world.guilds
    fake.add_channel(guild, "after-dark", nsfw=True)


def _system(fake_model) -> str:
    return fake_model.requests[-1]["messages"][0]["content"]


def _answer(env: DiscordEnv, record) -> str:
    messages = [m for m in env.fake.messages(record.channel_id) if m.interaction_id == record.id]
    return "\n".join(m.content for m in messages)


async def _thread_in(env: DiscordEnv, channel: int, user: int | None = None, **options) -> int:
    record = await env.fake.slash(user or env.alice, channel, "start", **options)
    await env.done()
    assert record.failed is None
    return env.fake.threads(channel)[-1]


async def test_a_thread_of_an_age_restricted_channel_may_be_mature_and_others_not(
    tmp_path: Path, fake_model, caplog, database_url: str
):
    async with campfire_on_standin(
        tmp_path, fake_model, caplog, database_url, world=_age_restricted_channel
    ) as env:
        await env.fake.slash(env.alice, env.channel, "server rating", level="mature")
        await env.done()
        after_dark = next(c.id for c in env.fake.world.channels.values() if c.name == "after-dark")
        thread = await _thread_in(env, after_dark)
        fake_model.queue("The inn is loud.", "The road is quiet.")
        await env.fake.slash(env.bob, thread, "do", action="listen")
        await env.done()
        # A thread is marked as its parent is: the server's mature rating holds there.
        assert "Content rating: mature" in _system(fake_model)
        plain = await env.start_thread()
        await env.fake.slash(env.bob, plain, "do", action="listen")
        await env.done()
        assert "Content rating: moderate" in _system(fake_model)
        # Insights shows the section.
        insights = await env.fake.slash(env.bob, plain, "insights")
        await env.done()
        assert "Content rating" in str(env.fake.message(insights.original_message_id).embeds)


async def test_a_dm_follows_the_players_own_rating_within_the_ceiling(
    tmp_path: Path, fake_model, caplog, database_url: str
):
    async with campfire_on_standin(
        tmp_path, fake_model, caplog, database_url, content_ceiling="moderate"
    ) as env:
        dm = env.fake.dm_channel(env.bob)
        refused = await env.fake.slash(env.bob, dm, "profile rating", level="mature")
        await env.done()
        assert "up to **moderate**" in _answer(env, refused)
        await env.fake.slash(env.bob, dm, "profile rating", level="safe")
        await env.done()
        await env.fake.slash(env.bob, dm, "start", scenario="lantern")
        await env.done()
        fake_model.queue("The lamp glows.")
        await env.fake.slash(env.bob, dm, "do", action="wave")
        await env.done()
        assert "Content rating: safe" in _system(fake_model)


MATURE_SCENARIO = {
    "campfire": "scenario",
    "version": 1,
    "title": "The Red Hall",
    "content_rating": "mature",
    "prompt": "The doors of the red hall open.",
}


async def test_a_mature_scenario_does_not_start_in_a_safe_server(env: DiscordEnv, fake_model):
    await env.fake.slash(env.alice, env.channel, "server rating", level="safe")
    await env.done()
    data = json.dumps(MATURE_SCENARIO).encode()
    record = await env.fake.slash(
        env.alice, env.channel, "scenario import", file=StandinFile("red.json", data)
    )
    await env.done()
    preview = env.fake.message(record.followups[0]) if record.followups else None
    message = preview or env.fake.message(record.original_message_id)
    fields = {f["name"]: f["value"] for f in message.embeds[0]["fields"]}
    assert fields["Rated"] == "mature"
    await env.fake.press(env.alice, message.id, label="Confirm")
    await env.done()
    threads = len(env.fake.threads(env.channel))
    started = await env.fake.slash(env.bob, env.channel, "start", scenario="The Red Hall")
    await env.done()
    said = _answer(env, started)
    assert "rated **mature**" in said and "**safe**" in said and "/server rating" in said
    assert fake_model.requests == []
    # Refused before a thread was opened for it.
    assert len(env.fake.threads(env.channel)) == threads


async def test_a_banned_word_refuses_an_action_and_is_masked_in_the_narration(
    env: DiscordEnv, fake_model
):
    thread = await env.start_thread()
    await env.fake.slash(env.alice, thread, "host banned", words="lich, grisly death")
    await env.done()
    async with env.bot.services.db.session() as session:
        before = await session.scalar(select(func.count()).select_from(StoryNode))

    refused = await env.fake.slash(env.bob, thread, "do", action="fight the Lich")
    await env.done()
    assert "“Lich”, which is banned" in _answer(env, refused)
    assert fake_model.requests == []
    async with env.bot.services.db.session() as session:
        assert await session.scalar(select(func.count()).select_from(StoryNode)) == before

    # Written again once (tests/test_banned_bias.py), holding them still: masked.
    banned = Reply(text="A lich rises from the crypt. A grisly death waits.", delay=0.02)
    fake_model.queue(banned, banned)
    await env.fake.slash(env.bob, thread, "do", action="open the crypt")
    await env.done()
    narrated = env.narration(thread)[-1]
    assert narrated == f"A {MASK} rises from the crypt. A {MASK} waits."
    assert len(fake_model.requests) == 2
    # Never shown while it streamed either.
    message = next(m for m in env.fake.messages(thread) if m.content == narrated)
    assert all("lich" not in text.lower() for _, text in message.edits)
    async with env.bot.services.db.session() as session:
        texts = list(await session.scalars(select(StoryNode.text)))
    assert not any("lich" in text.lower() for text in texts)
