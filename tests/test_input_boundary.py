"""Text at the engine's boundary, as a player meets it through Discord: characters no database or
HTTP request can carry are sanitised where they enter, numbers no row can have are "not found",
and a player's long text quoted back never pushes a reply over Discord's limits."""

from __future__ import annotations

from sqlalchemy import select

from bot.standin.limits import CONTENT_MAX
from engine.storage.models import Adventure, StoryNode
from tests.discord_env import DiscordEnv
from tests.fakes.openai_server import Reply

# Discord's largest integer option value (discord-api-docs, Application Commands: "Any integer
# between -2^53+1 and 2^53-1").
DISCORD_INTEGER_MAX = 2**53 - 1


async def stored_story(env: DiscordEnv, thread: int) -> list[str]:
    async with env.bot.services.db.session() as session:
        adventure_id = await session.scalar(
            select(Adventure.id).where(Adventure.channel_id == thread)
        )
        rows = await session.scalars(
            select(StoryNode.text)
            .where(StoryNode.adventure_id == adventure_id)
            .order_by(StoryNode.id)
        )
        return list(rows)


def answer(env: DiscordEnv, record) -> str:
    assert record.failed is None
    # A turn's narration is a public follow-up of its interaction: the answer is the response,
    # or a private follow-up after it.
    private = [f for f in record.followups if env.fake.message(f).visible_to is not None]
    message_id = private[-1] if private else record.original_message_id
    return env.fake.message(message_id).content


async def test_an_action_with_nul_plays(env, fake_model):
    """PostgreSQL text cannot hold NUL: stored as it came, every retry of the turn failed."""
    thread = await env.start_thread()
    fake_model.queue(Reply(text="The door groans open.", delay=0.005))
    record = await env.fake.slash(env.alice, thread, "do", action="open\x00 the door\x00")
    await env.done()
    assert answer(env, record) == "> alice opens the door."
    assert env.narration(thread)[-1] == "The door groans open."
    assert (await stored_story(env, thread))[-2:] == [
        "> alice opens the door.",
        "The door groans open.",
    ]


async def test_an_action_with_a_lone_surrogate_reaches_the_model_and_plays(env, fake_model):
    """Discord's JSON can carry an escaped lone surrogate (``\\ud800``), which is not text: it
    reaches the model (and the database) as U+FFFD instead of failing to encode."""
    thread = await env.start_thread()
    fake_model.queue(Reply(text="The rune flickers.", delay=0.005))
    record = await env.fake.slash(env.alice, thread, "do", action="trace the rune \ud800 twice")
    await env.done()
    assert answer(env, record) == "> alice traces the rune \ufffd twice."
    sent = fake_model.requests[-1]["messages"][-1]["content"]
    assert "traces the rune \ufffd twice" in sent
    assert env.narration(thread)[-1] == "The rune flickers."


async def test_a_model_reply_with_nul_and_a_lone_surrogate_is_stored_clean(env, fake_model):
    """A hostile endpoint may send anything: its words enter the story sanitised, reasoning
    too, so the turn is stored (on PostgreSQL as well) instead of failing."""
    thread = await env.start_thread()
    fake_model.queue(
        Reply(text="The door\x00 opens \ud800 slowly.", reasoning="Think\x00ing.", delay=0.005)
    )
    await env.fake.slash(env.alice, thread, "do", action="push the door")
    await env.done()
    assert env.narration(thread)[-1] == "The door opens \ufffd slowly."
    assert (await stored_story(env, thread))[-1] == "The door opens \ufffd slowly."
    async with env.bot.services.db.session() as session:
        reasoning = await session.scalar(
            select(StoryNode.reasoning).order_by(StoryNode.id.desc()).limit(1)
        )
    assert reasoning == "Thinking."


async def test_steering_text_with_nul_is_kept_clean(env, fake_model):
    thread = await env.start_thread()
    record = await env.fake.slash(env.alice, thread, "note", text="Keep\x00 it tense\x1b[0m.")
    await env.done()
    assert record.failed is None
    async with env.bot.services.db.session() as session:
        note = await session.scalar(
            select(Adventure.authors_note).where(Adventure.channel_id == thread)
        )
    assert note == "Keep it tense[0m."


async def test_a_scenario_number_beyond_any_id_is_not_found(env):
    """A number no row can have never reaches the id query (SQLite overflowed past 2**63,
    PostgreSQL refuses past 2**31): it is not found, like any unknown id."""
    for typed in ("9" * 30, str(2**31), "²"):
        record = await env.fake.slash(env.alice, env.channel, "scenario show", scenario=typed)
        await env.done()
        content = answer(env, record)
        assert content.startswith(f"⚠ No scenario matches “{typed}”. Scenarios: “"), typed
        assert "“The Lantern Road”" in content, content


async def test_a_long_query_gets_a_clear_reply_within_discords_limit(env):
    """A 6,000-character query (Discord's longest string option) is quoted back cut short: the
    whole reply stays under 2,000 characters, which Discord would otherwise refuse (50035)."""
    query = "lantern " * 750
    record = await env.fake.slash(env.alice, env.channel, "scenario show", scenario=query)
    await env.done()
    content = answer(env, record)
    assert len(content) <= CONTENT_MAX
    assert content.startswith("⚠ No scenario matches “lantern lantern")
    assert "…”. Scenarios: “" in content


async def test_a_memory_number_beyond_any_id_is_not_found(env, fake_model):
    thread = await env.start_thread()
    record = await env.fake.slash(env.alice, thread, "memory pin", memory=DISCORD_INTEGER_MAX)
    await env.done()
    assert answer(env, record).startswith(f"⚠ This adventure has no memory #{DISCORD_INTEGER_MAX}")


def test_memory_numbers_are_bounded_for_discord(env):
    """Discord refuses an integer option outside its bounds before the bot sees it."""
    definition, _ = env.fake._definition("memory", env.guild)
    pin = next(o for o in definition["options"] if o["name"] == "pin")
    (option,) = pin["options"]
    assert (option["min_value"], option["max_value"]) == (1, 2**31 - 1)
