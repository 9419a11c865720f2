"""/card generate: the model writes a story card from the story, the player sees it privately and
adds it or not (issue: cards the story writes, as AI Dungeon's story-card generator does)."""

from __future__ import annotations

import json

from sqlalchemy import select

from engine.storage.limit_models import TokenUse
from engine.storage.models import AdventureCard
from engine.story.steering.card_writer import most_mentioned_uncovered, read_card
from tests.discord_env import DiscordEnv
from tests.fakes.openai_server import Reply
from tests.test_adventure_rights import answer

WREN_CARD = {
    "title": "Wren",
    "type": "character",
    "keys": ["Wren", "the reed girl"],
    "entry": "Wren is a girl of the reeds who hums the old lantern songs. She is wary of "
    "strangers but loves the lamplighter's stories.",
}


async def _cards(env: DiscordEnv) -> list[AdventureCard]:
    async with env.bot.services.db.session() as session:
        return list(await session.scalars(select(AdventureCard).order_by(AdventureCard.id)))


async def _tokens(env: DiscordEnv) -> int:
    async with env.bot.services.db.session() as session:
        return sum(row.tokens for row in await session.scalars(select(TokenUse)))


async def _play(env: DiscordEnv, thread: int, fake_model, *narrations: str) -> None:
    for number, text in enumerate(narrations):
        fake_model.queue(text)
        record = await env.fake.slash(env.alice, thread, "do", action=f"look around {number}")
        await env.done()
        assert record.failed is None


async def test_the_story_names_the_subject_and_the_card_is_added_on_confirm(
    env: DiscordEnv, fake_model
):
    thread = await env.start_thread()
    await _play(
        env,
        thread,
        fake_model,
        "A girl steps out of the reeds. They call her Wren, the reed girl.",
        "You follow Wren along the bank while the lanterns hum.",
    )
    cards_before = await _cards(env)
    tokens_before = await _tokens(env)
    asked = len(fake_model.requests)
    fake_model.queue(Reply(text="Here is the card:\n```json\n" + json.dumps(WREN_CARD) + "\n```"))

    record = await env.fake.slash(env.alice, thread, "card generate")
    await env.done()
    preview = answer(env, record)
    assert preview.visible_to == env.alice
    assert "mentions **Wren** most without a card" in preview.content
    assert preview.embeds[0]["title"] == "📇 Wren"
    assert "hums the old lantern songs" in preview.embeds[0]["description"]
    assert [label for label, _, _ in preview.buttons] == ["Add card", "Discard"]
    # The model read the story and was asked about the subject; nothing was stored yet.
    request = str(fake_model.requests[asked])
    assert "Write the card for: Wren" in request and "They call her Wren" in request
    assert len(await _cards(env)) == len(cards_before)
    # It is the model's work on the operator's model: counted against the day.
    assert await _tokens(env) > tokens_before

    added = await env.fake.press(env.alice, preview.id, label="Add card")
    await env.done()
    assert added.failed is None
    assert env.fake.message(preview.id).content.startswith("Story card “Wren” added")
    card = (await _cards(env))[-1]
    assert (card.title, card.type) == ("Wren", "character")
    assert card.keys == "Wren,the reed girl" and card.entry == WREN_CARD["entry"]

    # The next generation without a name finds nothing uncovered: Wren has her card now.
    record = await env.fake.slash(env.alice, thread, "card generate")
    await env.done()
    assert "has not yet named anyone or anything without a card" in answer(env, record).content


async def test_a_player_without_a_character_is_never_the_subject(env: DiscordEnv, fake_model):
    """A player with no character acts under their display name ("> Rowan listens."), said
    more often than anyone the narration names: never the card's subject."""
    rowan = env.fake.add_user("Rowan", member_of=[env.guild])
    thread = await env.start_thread()
    for number, text in enumerate(["A girl called Wren waves.", "You follow Wren.", "Wind."]):
        fake_model.queue(text)
        record = await env.fake.slash(rowan, thread, "do", action=f"listen {number}")
        await env.done()
        assert record.failed is None
    fake_model.queue(Reply(text=json.dumps(WREN_CARD)))
    record = await env.fake.slash(env.alice, thread, "card generate")
    await env.done()
    assert "mentions **Wren** most without a card" in answer(env, record).content


async def test_a_named_card_discarded_or_not_a_card_stores_nothing(env: DiscordEnv, fake_model):
    thread = await env.start_thread()
    cards_before = len(await _cards(env))

    fake_model.queue(json.dumps(WREN_CARD | {"title": "Brother Tomas", "keys": "Tomas, monk"}))
    record = await env.fake.slash(env.alice, thread, "card generate", name="Brother Tomas")
    await env.done()
    preview = answer(env, record)
    assert preview.content == "The model wrote this card. Add it?"
    dropped = await env.fake.press(env.alice, preview.id, label="Discard")
    await env.done()
    assert dropped.failed is None
    assert env.fake.message(preview.id).content == "Discarded: no card was added."
    assert len(await _cards(env)) == cards_before

    fake_model.queue("I would rather tell you a story about the moon.")
    record = await env.fake.slash(env.alice, thread, "card generate", name="the moon")
    await env.done()
    refusal = answer(env, record)
    assert "was not a story card. Try again." in refusal.content
    assert refusal.visible_to == env.alice
    assert len(await _cards(env)) == cards_before


async def test_a_member_who_may_not_steer_is_refused_before_the_model_is_asked(
    env: DiscordEnv, fake_model
):
    thread = await env.start_thread()
    asked = len(fake_model.requests)
    record = await env.fake.slash(env.bob, thread, "card generate", name="Wren")
    await env.done()
    refusal = answer(env, record)
    assert refusal.visible_to == env.bob and refusal.content.startswith("⚠")
    assert len(fake_model.requests) == asked


def test_the_subject_is_a_name_said_twice_mid_sentence_that_no_card_covers():
    story = (
        "The Lantern Road runs east. You meet Brother Tomas at the well, and Brother Tomas "
        "nods. Wren waves. Later you see Wren again by the Lantern Road."
    )
    covered = AdventureCard(adventure_id=1, title="Lantern Road", keys="lantern road,road")
    assert most_mentioned_uncovered(story, []) in ("Lantern Road", "Brother Tomas")
    assert most_mentioned_uncovered(story, [covered]) == "Brother Tomas"
    # A player's character is the party's, never a card the story chooses.
    assert most_mentioned_uncovered(story, [covered], besides=["Brother Tomas"]) == "Wren"
    # "Then" opens sentences only: never a name.
    assert most_mentioned_uncovered("Then you wait. Then you go.", []) is None


def test_a_reply_is_read_leniently_and_bounded():
    card = read_card('Sure! {"name": "Mira", "content": "A smith.", "keys": "smith"}', "Mira")
    assert (card.title, card.entry, card.keys, card.type) == (
        "Mira",
        "A smith.",
        "Mira,smith",
        "custom",
    )
    # The model's own title names the card, and brings it up.
    other = read_card('{"title": "Wren", "keys": ["reeds"], "entry": "A girl."}', "Ann")
    assert (other.title, other.keys) == ("Wren", "Wren,reeds")
    huge = read_card(
        json.dumps({"title": "X", "entry": "y" * 10_000, "keys": ["k" * 50] * 50}), "X"
    )
    assert len(huge.entry) == 4000 and len(huge.keys) <= 500
