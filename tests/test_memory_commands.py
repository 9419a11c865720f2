"""/memory, /summary and /profile through the local Discord stand-in, and the memory job the
bot schedules after a turn."""

from __future__ import annotations

import asyncio

from sqlalchemy import func, select

from engine.storage.coordination_models import RequestRecord
from engine.storage.memory_models import Memory
from engine.storage.models import StoryNode, User
from engine.story.memory.cadence import Cadence
from tests.discord_env import DiscordEnv
from tests.fakes.openai_server import Reply
from tests.helpers import until
from tests.test_steering_commands import adventure_here, answer, form


async def bank(env: DiscordEnv, channel_id: int) -> list[Memory]:
    adventure = await adventure_here(env, channel_id)
    async with env.bot.services.db.session() as session:
        rows = await session.scalars(
            select(Memory).where(Memory.adventure_id == adventure.id).order_by(Memory.id)
        )
        return list(rows)


async def test_memory_add_list_pin_forget_restore_and_edit(env):
    thread = await env.start_thread()
    added = await answer(
        env, await env.fake.slash(env.alice, thread, "memory add", text="Mira owes a debt.")
    )
    assert added.content == "Memory added; it applies from the next turn."
    [memory] = await bank(env, thread)
    assert memory.origin == "player" and memory.text == "Mira owes a debt."

    listed = await answer(env, await env.fake.slash(env.bob, thread, "memory list"))  # anyone reads
    assert f"**#{memory.id}**" in listed.embeds[0]["description"]
    assert "added by a player" in listed.embeds[0]["description"]
    assert "1 of 200 kept" in listed.embeds[0]["footer"]["text"]

    choices = await env.fake.autocomplete(
        env.alice, thread, "memory pin", focused="memory", value="debt"
    )
    assert [c["value"] for c in choices] == [memory.id]

    await answer(env, await env.fake.slash(env.alice, thread, "memory pin", memory=memory.id))
    assert (await bank(env, thread))[0].pinned
    await answer(env, await env.fake.slash(env.alice, thread, "memory forget", memory=memory.id))
    [gone] = await bank(env, thread)
    assert gone.forgotten and not gone.pinned  # kept, not deleted
    forgotten = await answer(
        env, await env.fake.slash(env.alice, thread, "memory list", forgotten=True)
    )
    assert "Mira owes a debt." in forgotten.embeds[0]["description"]
    await answer(env, await env.fake.slash(env.alice, thread, "memory restore", memory=memory.id))
    edited = await answer(
        env,
        await env.fake.slash(
            env.alice, thread, "memory edit", memory=memory.id, text="Mira repaid the debt."
        ),
    )
    assert edited.content == "Memory saved."
    [back] = await bank(env, thread)
    assert (back.forgotten, back.text) == (False, "Mira repaid the debt.")


async def test_memory_changes_are_for_the_host_and_bad_input_is_named(env):
    thread = await env.start_thread()
    refused = await answer(
        env, await env.fake.slash(env.bob, thread, "memory add", text="Bob rules.")
    )
    assert refused.content.startswith("⚠ Only alice (this adventure's host)")
    assert await bank(env, thread) == []
    missing = await answer(env, await env.fake.slash(env.alice, thread, "memory pin", memory=999))
    assert (
        missing.content == "⚠ This adventure has no memory #999. /memory list shows their numbers."
    )
    blank = await answer(env, await env.fake.slash(env.alice, thread, "memory add", text="   "))
    assert blank.content == "⚠ A memory cannot be empty."
    page = await answer(env, await env.fake.slash(env.alice, thread, "memory list", page=3))
    assert page.content == "⚠ There is no page 3: choose a page from 1 to 1."
    nowhere = await answer(env, await env.fake.slash(env.alice, env.channel, "memory list"))
    assert nowhere.content == "⚠ There is no adventure running here. Start one with /start."


async def test_summary_view_and_edit_in_a_prefilled_form(env):
    thread = await env.start_thread()
    empty = await answer(env, await env.fake.slash(env.bob, thread, "summary view"))
    assert "No summary yet" in empty.embeds[0]["description"]
    assert (
        await answer(env, await env.fake.slash(env.bob, thread, "summary edit"))
    ).content.startswith("⚠ Only alice")
    record = await env.fake.slash(env.alice, thread, "summary edit")
    assert form(record) == {"text": ""}
    saved = await answer(
        env, await env.fake.submit_modal(env.alice, record, {"text": "Mira left Brindle."})
    )
    assert saved.content == "Story summary saved; it applies from the next turn."
    assert (await adventure_here(env, thread)).story_summary == "Mira left Brindle."
    again = await env.fake.slash(env.alice, thread, "summary edit")
    assert form(again) == {"text": "Mira left Brindle."}


async def test_profile_show_keep_and_delete(env):
    thread = await env.start_thread()
    shown = await answer(env, await env.fake.slash(env.bob, thread, "profile show"))
    assert "You are a guest" in shown.content  # bob's row exists: he interacted
    await answer(env, await env.fake.slash(env.bob, thread, "profile keep"))
    async with env.bot.services.db.session() as session:
        assert (await session.get(User, env.bob)).keep_data
    refused = await answer(
        env, await env.fake.slash(env.bob, thread, "profile delete", confirm="no")
    )
    assert refused.content.startswith("⚠ Nothing was deleted")
    done = await answer(
        env, await env.fake.slash(env.bob, thread, "profile delete", confirm="delete")
    )
    assert done.content.startswith("Everything Campfire stored about you is deleted")
    await env.done()
    async with env.bot.services.db.session() as session:
        # Gone, and not made again by the contact record of this very interaction.
        assert await session.get(User, env.bob) is None


async def test_profile_delete_during_turns_leaves_nothing_of_them(env, fake_model):
    thread = await env.start_thread()
    adventure = await adventure_here(env, thread)
    fake_model.queue(
        Reply(text="The bridge sways under Bob, plank by plank, and holds at last.", delay=0.2),
        "Alice looks on as the fog lifts.",
    )
    running = await env.fake.slash(env.bob, thread, "do", action="cross the bridge")
    await until(lambda: fake_model.requests)  # Bob's turn is being written …
    queued = await env.fake.slash(env.bob, thread, "do", action="jump")
    await env.fake.slash(env.alice, thread, "do", action="look on")
    await until(lambda: env.bot.services.play.queue.waiting(adventure.id) == 2)  # … two wait

    await answer(env, await env.fake.slash(env.bob, thread, "profile delete", confirm="delete"))
    await env.done()
    # Bob's turns were dropped, the running one before its reply was done; Alice's played.
    assert len(fake_model.requests) == 2
    assert env.narration(thread)[-1] == "Alice looks on as the fog lifts."
    for record in (running, queued):
        shown = env.fake.message(record.original_message_id).content
        assert shown.startswith("⚠ Not played: the player who sent this deleted")
        assert "bridge" not in shown and "jump" not in shown  # his words went too
    async with env.bot.services.db.session() as session:
        assert await session.get(User, env.bob) is None
        by_bob = select(func.count()).where(StoryNode.author_id == env.bob)
        assert await session.scalar(by_bob) == 0
        requests = select(func.count()).where(RequestRecord.user_id == env.bob)
        assert await session.scalar(requests) == 0


async def test_a_turn_schedules_the_memory_job(env, fake_model):
    env.bot.services.memory.memory_cadence = Cadence(first_at=2, every=1)
    thread = await env.start_thread()
    fake_model.queue("The reeds hum louder.")
    await env.fake.slash(env.alice, thread, "do", action="listen")
    await env.done()
    fake_model.queue("The humming stops.", "Mira listened to the humming reeds.")
    await env.fake.slash(env.alice, thread, "do", action="wait")
    await env.done()
    async with asyncio.timeout(5):
        while not await bank(env, thread):  # noqa: ASYNC110 - the job runs on the scheduler
            await asyncio.sleep(0.02)
    [memory] = await bank(env, thread)
    assert memory.text == "Mira listened to the humming reeds."


async def test_the_bot_schedules_the_sweep_the_cleanup_and_lease_reaping(env):
    jobs = {job.id: job for job in env.bot.scheduler.get_jobs()}
    assert {"memory-sweep", "cleanup", "lease-sweep"} <= set(jobs)
    assert jobs["memory-sweep"].trigger.interval.total_seconds() == 5 * 60
    assert env.bot.services.play.intake.after_turn is not None


async def test_recap_gives_a_latecomer_the_summary_and_the_latest_turns_privately(env, fake_model):
    thread = await env.start_thread()
    fake_model.queue("A heron lifts off the black water.", "The bell rings once.")
    for action in ("wade in", "listen"):
        await env.fake.slash(env.alice, thread, "do", action=action)
        await env.done()
    await env.fake.submit_modal(
        env.alice, await env.fake.slash(env.alice, thread, "summary edit"), {"text": "Mira left."}
    )
    await env.done()
    carol = env.fake.add_user("carol", member_of=[env.guild])
    await env.fake.flush()
    record = await env.fake.slash(carol, thread, "recap")
    recap = await answer(env, record)
    assert recap.visible_to == carol
    (embed,) = recap.embeds
    text = embed["description"]
    assert "**The story so far**\nMira left." in text
    newest = [
        "> alice wades in.",
        "A heron lifts off the black water.",
        "> alice listens.",
        "The bell rings once.",
    ]
    assert text.endswith("\n\n".join(newest))
    assert "2 turns so far" in embed["footer"]["text"]


async def test_recap_where_nothing_runs_says_so(env):
    record = await env.fake.slash(env.bob, env.channel, "recap")
    recap = await answer(env, record)
    assert recap.visible_to == env.bob and "/start" in recap.content
