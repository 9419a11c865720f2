"""/adventure list, resume and end through Discord (the stand-in, a real database on each
backend): no adventure is lost silently, and only those who may start anew where it runs bring
one back or end one."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlmodel import col

from bot.standin.records import MessageRecord
from engine.storage.models import Adventure, StoryNode
from tests.discord_env import DiscordEnv, answered
from tests.fakes.openai_server import FakeModelServer


async def nodes_of(env: DiscordEnv, adventure_id: int) -> int:
    async with env.bot.services.db.session() as session:
        counted = select(func.count()).select_from(StoryNode)
        return await session.scalar(counted.where(col(StoryNode.adventure_id) == adventure_id)) or 0


async def adventure_row(env: DiscordEnv, adventure_id: int) -> Adventure:
    async with env.bot.services.db.session() as session:
        adventure = await session.get(Adventure, adventure_id)
        assert adventure is not None
        return adventure


async def listed(env: DiscordEnv, user: int, place: int) -> dict:
    record = await env.fake.slash(user, place, "adventure list")
    await env.done()
    answer = await answered(env, record)
    assert answer.visible_to == user
    (embed,) = answer.embeds
    return embed


async def asked(env: DiscordEnv, user: int, place: int, command: str, **options) -> MessageRecord:
    """The private answer to ``command``: a question with buttons, or a refusal."""
    record = await env.fake.slash(user, place, command, **options)
    await env.done()
    answer = await answered(env, record)
    assert answer.visible_to == user
    return answer


async def test_the_list_in_a_dm_is_the_players_own_newest_first(env: DiscordEnv, fake_model):
    dm = env.fake.dm_channel(env.bob)
    await env.fake.slash(env.bob, dm, "start", scenario="lantern")
    await env.done()
    first = await env.bot.services.play.adventure_in(dm)
    fake_model.queue("The lantern steadies.", "The road bends.")
    for action in ("light the lantern", "walk on"):
        await env.fake.slash(env.bob, dm, "do", action=action)
        await env.done()
    await env.start_anew(env.bob, dm, scenario="bandit")
    second = await env.bot.services.play.adventure_in(dm)
    assert first is not None and second is not None

    embed = await listed(env, env.bob, dm)
    lines = embed["description"].split("\n")
    assert len(lines) == 4  # two lines each, newest first
    assert lines[0].startswith(f"`#{second.adventure_id}` ") and "▶ running" in lines[0]
    assert lines[2].startswith(f"`#{first.adventure_id}` ") and "⏹ ended" in lines[2]
    assert "The Lantern Road" in lines[2] and lines[3].endswith("· 2 turns")
    assert lines[1].endswith("· 0 turns") and "started <t:" in lines[1]
    assert "/adventure resume" in embed["footer"]["text"]

    # Another player's DM holds none of them.
    other = await listed(env, env.alice, env.fake.dm_channel(env.alice))
    assert other["description"].startswith("No adventure was started here yet")


async def test_the_list_in_a_channel_shows_its_threads_and_a_thread_its_own(env: DiscordEnv):
    first = await env.start_thread()
    second = await env.start_thread(env.bob)

    embed = await listed(env, env.bob, env.channel)
    assert embed["title"] == "Adventures started from this channel"
    description = embed["description"]
    assert f"▶ running in <#{second}>" in description.split("\n")[0]
    assert f"▶ running in <#{first}>" in description.split("\n")[2]

    own = await listed(env, env.bob, first)
    assert own["title"] == "Adventures here"
    assert len(own["description"].split("\n")) == 2 and "<#" not in own["description"]


async def test_resume_in_a_dm_asks_first_and_the_replaced_story_is_kept(
    env: DiscordEnv, fake_model: FakeModelServer
):
    dm = env.fake.dm_channel(env.bob)
    await env.fake.slash(env.bob, dm, "start", scenario="lantern")
    await env.done()
    fake_model.queue("The lantern steadies.")
    await env.fake.slash(env.bob, dm, "do", action="light the lantern")
    await env.done()
    lantern = await env.bot.services.play.adventure_in(dm)
    await env.start_anew(env.bob, dm, scenario="bandit")
    bandit = await env.bot.services.play.adventure_in(dm)
    assert lantern is not None and bandit is not None
    lantern_nodes, bandit_nodes = (
        await nodes_of(env, lantern.adventure_id),
        await nodes_of(env, bandit.adventure_id),
    )

    # Autocomplete offers the ended one (not the running one), by its number.
    choices = await env.fake.autocomplete(
        env.bob, dm, "adventure resume", focused="adventure", value="lan"
    )
    assert [c["value"] for c in choices] == [str(lantern.adventure_id)]
    assert choices[0]["name"].startswith(f"#{lantern.adventure_id} ")

    question = await asked(env, env.bob, dm, "adventure resume", adventure=choices[0]["value"])
    assert "**The Bandit Camp (RPG world state)** is running there" in question.content
    assert [label for label, _, _ in question.buttons] == ["Resume it", "Keep playing"]
    await env.fake.press(env.bob, question.id, label="Keep playing")
    await env.done()
    assert "Nothing changed" in env.fake.message(question.id).content
    assert await env.bot.services.play.adventure_in(dm) == bandit

    question = await asked(env, env.bob, dm, "adventure resume", adventure="The Lantern Road")
    await env.fake.press(env.bob, question.id, label="Resume it")
    await env.done()
    assert "is back" in env.fake.message(question.id).content
    back = await env.bot.services.play.adventure_in(dm)
    assert back is not None and back.adventure_id == lantern.adventure_id
    # Shown again where it left off, with the buttons to go on.
    assert env.narration(dm)[-1] == "The lantern steadies."
    assert [label for label, _, _ in env.fake.last_message(dm).buttons][0] == "Continue"
    # Nothing lost: the ended one's story is all there, as is the resumed one's.
    assert (await adventure_row(env, bandit.adventure_id)).ended_at is not None
    assert await nodes_of(env, bandit.adventure_id) == bandit_nodes
    assert await nodes_of(env, lantern.adventure_id) == lantern_nodes

    fake_model.queue("The road bends west.")
    await env.fake.slash(env.bob, dm, "do", action="walk on")
    await env.done()
    assert env.narration(dm)[-1] == "The road bends west."
    assert await nodes_of(env, lantern.adventure_id) == lantern_nodes + 2


async def test_end_asks_first_then_is_announced_and_resume_reopens_the_thread(
    env: DiscordEnv, fake_model: FakeModelServer
):
    thread = await env.start_thread()
    running = await env.bot.services.play.adventure_in(thread)
    assert running is not None

    question = await asked(env, env.alice, thread, "adventure end")
    assert "End **The Lantern Road**?" in question.content
    await env.fake.press(env.alice, question.id, label="Keep playing")
    await env.done()
    assert await env.bot.services.play.adventure_in(thread) == running

    question = await asked(env, env.alice, thread, "adventure end")
    await env.fake.press(env.alice, question.id, label="End it")
    await env.done()
    assert "has ended" in env.fake.message(question.id).content
    assert await env.bot.services.play.adventure_in(thread) is None
    assert env.narration(thread)[-1] == (
        "⏹ alice ended the adventure **The Lantern Road**; `/adventure resume` brings it back."
    )
    refused = await asked(env, env.alice, thread, "adventure end")
    assert refused.content.startswith("⚠ There is no adventure running here")

    # A day of quiet: the thread archives. Resumed from the channel, it opens again.
    env.fake.archive_thread(thread)
    await env.done()
    embed = await listed(env, env.alice, env.channel)
    assert f"⏹ ended in <#{thread}>" in embed["description"]
    answer = await asked(
        env, env.alice, env.channel, "adventure resume", adventure=f"#{running.adventure_id}"
    )
    assert answer.content == (
        f"🏮 **The Lantern Road** is back in <#{thread}>; it goes on from where it was."
    )
    assert not env.fake.world.channels[thread].archived
    assert env.narration(thread)[-2].startswith("↩ alice brought back 🏮 **The Lantern Road**")
    assert env.narration(thread)[-1].startswith("Dusk settles over the valley")
    back = await env.bot.services.play.adventure_in(thread)
    assert back is not None and back.adventure_id == running.adventure_id

    fake_model.queue("The humming stops.")
    await env.fake.slash(env.bob, thread, "do", action="listen")
    await env.done()
    assert env.narration(thread)[-1] == "The humming stops."


async def test_a_plain_member_may_neither_resume_nor_end_and_ids_stay_in_their_place(
    env: DiscordEnv,
):
    thread = await env.start_thread()  # alice hosts it
    adventure = await env.bot.services.play.adventure_in(thread)
    assert adventure is not None

    refused = await asked(env, env.bob, thread, "adventure end")
    assert refused.content.startswith("⚠ Only alice (its host) and members who can manage")
    assert refused.buttons == []
    # The channel holds none itself: its adventures run in threads.
    refused = await asked(env, env.alice, env.channel, "adventure end")
    assert refused.content.startswith("⚠ Adventures here run in threads of this channel")
    question = await asked(env, env.alice, thread, "adventure end")
    await env.fake.press(env.alice, question.id, label="End it")
    await env.done()

    number = str(adventure.adventure_id)
    refused = await asked(env, env.bob, env.channel, "adventure resume", adventure=number)
    assert refused.content.startswith("⚠ Only alice (its host) and members who can manage")
    assert await env.bot.services.play.adventure_in(thread) is None
    # Its number means nothing in another place: bob's DM, another channel.
    dm = env.fake.dm_channel(env.bob)
    refused = await asked(env, env.bob, dm, "adventure resume", adventure=number)
    assert refused.content.startswith(f"⚠ No adventure #{number} ran here")
    other = env.fake.add_channel(env.guild, "elsewhere")
    await env.fake.flush()
    refused = await asked(env, env.alice, other, "adventure resume", adventure=number)
    assert refused.content.startswith(f"⚠ No adventure #{number} ran here")
    assert await env.bot.services.play.adventure_in(thread) is None


async def test_resume_says_so_when_the_thread_is_gone(env: DiscordEnv):
    thread = await env.start_thread()
    adventure = await env.bot.services.play.adventure_in(thread)
    assert adventure is not None
    question = await asked(env, env.alice, thread, "adventure end")
    await env.fake.press(env.alice, question.id, label="End it")
    await env.done()
    # Archived (out of the bot's cache), then deleted by a moderator.
    env.fake.archive_thread(thread)
    await env.done()
    env.fake.world.channels.pop(thread)
    env.expect(10003)  # Unknown Channel: the bot asks for the thread, which is gone

    refused = await asked(
        env, env.alice, env.channel, "adventure resume", adventure=str(adventure.adventure_id)
    )
    assert refused.content == (
        "⚠ The thread where “The Lantern Road” ran is gone (deleted, or I can no longer see "
        "it), so it cannot come back there. Nothing was changed."
    )
    assert (await adventure_row(env, adventure.adventure_id)).ended_at is not None
