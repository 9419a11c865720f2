"""The bot's own Discord permissions: a command or button that would need one the bot lacks
in that channel is answered privately with what is missing, and nothing is asked of Discord
that it would refuse; a refusal mid-turn (403) ends that narration at once, keeps the turn and
tells the player once; a private answer stays private after a public "thinking…"."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import func, select

from bot.standin import MISSING_PERMISSIONS, StandinFile
from bot.standin.permissions import P_CREATE_PUBLIC_THREADS, P_SEND_IN_THREADS, P_VIEW_CHANNEL
from cogs.ui.narration_routes import InteractionRoute
from engine.storage.models import Adventure
from tests.discord_env import DiscordEnv, campfire_on_standin, narration_under_way
from tests.fakes.openai_server import Reply
from tests.helpers import leave_dead_turn, until
from tests.trials.invariants import stored_actions


async def adventure_count(env: DiscordEnv) -> int:
    async with env.bot.services.db.session() as session:
        return int(await session.scalar(select(func.count()).select_from(Adventure)) or 0)


def private_answer(env: DiscordEnv, record) -> str:
    """What only the player who acted was shown in answer: the interaction's response or, after
    a deferral, its last follow-up."""
    mid = record.followups[-1] if record.followups else record.original_message_id
    message = env.fake.message(mid)
    assert message.visible_to == record.user_id, f"shown to the channel: {message.content!r}"
    return message.content


def private_notes(env: DiscordEnv, record) -> list:
    """The follow-ups only the player who acted sees (a turn's narration is a public one)."""
    return [m for m in map(env.fake.message, record.followups) if m.visible_to == record.user_id]


# --- the preflight -------------------------------------------------------------------------------


async def test_start_where_the_bot_cannot_open_threads_is_refused_privately(env: DiscordEnv):
    env.fake.set_permissions(env.channel, deny=P_CREATE_PUBLIC_THREADS)
    record = await env.fake.slash(env.alice, env.channel, "start")
    await env.done()
    assert record.ephemeral
    note = private_answer(env, record)
    assert "**Create Public Threads**" in note and "server admin" in note
    assert env.fake.threads(env.channel) == []
    assert await adventure_count(env) == 0  # nothing was written for it
    assert env.fake.refused == []  # and nothing asked of Discord that it refused


async def test_acting_where_the_bot_cannot_post_in_threads_is_refused_privately(
    env: DiscordEnv, fake_model
):
    thread = await env.start_thread()
    opening = env.fake.last_message(thread)
    # A server admin takes Send Messages in Threads from the bot in the thread's channel.
    env.fake.set_permissions(env.channel, deny=P_SEND_IN_THREADS)
    await env.fake.flush()
    before = await stored_actions(env.bot.services.db)
    record = await env.fake.slash(env.alice, thread, "do", action="open the door")
    press = await env.fake.press(env.bob, opening.id, label="Continue")
    await env.done()
    for refused in (record, press):
        assert refused.ephemeral
        assert "**Send Messages in Threads**" in private_answer(env, refused)
    assert fake_model.requests == []
    assert await stored_actions(env.bot.services.db) == before
    assert env.fake.refused == []

    # Given back, the same command plays.
    env.fake.set_permissions(env.channel)
    fake_model.queue("The door creaks open.")
    await env.fake.slash(env.alice, thread, "do", action="open the door")
    await env.done()
    assert env.narration(thread)[-1] == "The door creaks open."


async def test_a_channel_the_bot_cannot_see_is_named_as_such(env: DiscordEnv):
    env.fake.set_permissions(env.channel, deny=P_VIEW_CHANNEL)
    record = await env.fake.slash(env.alice, env.channel, "start")
    await env.done()
    assert "**View Channel**" in private_answer(env, record)
    assert env.fake.refused == []


async def test_commands_that_only_answer_need_no_channel_permission(env: DiscordEnv):
    env.fake.set_permissions(env.channel, deny=P_VIEW_CHANNEL)
    record = await env.fake.slash(env.alice, env.channel, "help")
    await env.done()
    assert record.ephemeral and record.response_type == 4
    assert [e["title"] for e in (record.response_data or {})["embeds"]] == ["How to play"]
    assert env.fake.refused == []


async def test_the_preflight_names_only_commands_that_exist(env: DiscordEnv):
    from cogs.ui.preflight import COMMANDS

    names = {c.qualified_name for c in env.bot.tree.walk_commands()}
    assert set(COMMANDS) <= names


# --- 403 mid-turn --------------------------------------------------------------------------------


async def test_losing_the_right_to_post_mid_turn_ends_the_narration_with_one_refusal(
    env: DiscordEnv, fake_model
):
    thread = await env.start_thread()
    env.expect(50013)  # provoked: the bot loses its permission while it narrates
    turn = await narration_under_way(env, fake_model, thread)
    # Once the narration is on its way, a server admin takes Send Messages in Threads away.
    env.fake.set_permissions(env.channel, deny=P_SEND_IN_THREADS)
    record = await turn
    await env.done()

    assert [r.code for r in env.fake.refused] == [50013]  # one refusal, never retried
    assert (await stored_actions(env.bot.services.db))["> alice goes down."] == 1
    notes = private_notes(env, record)
    assert len(notes) == 1, "the player is told once"
    assert notes[0].visible_to == env.alice
    assert "The turn is saved" in notes[0].content
    # Only what is missing is named, as the gateway told the bot of the change.
    assert "the bot **Send Messages in Threads** in this thread's channel" in notes[0].content


async def test_a_closed_dm_ends_a_channel_narration_with_one_refusal(
    env: DiscordEnv, fake_model, monkeypatch
):
    # The token too old to start a narration with: it goes by the bot's own DM messages.
    monkeypatch.setattr(InteractionRoute, "fresh", staticmethod(lambda interaction: False))
    dm = env.fake.dm_channel(env.alice)
    await env.fake.slash(env.alice, dm, "start")
    await env.done()
    env.expect(50007)  # provoked: alice closes her DMs to the bot
    env.fake.close_dms(env.alice)
    fake_model.queue(Reply(text="The wind rises over the moor, cold and wet.", delay=0.01))
    record = await env.fake.slash(env.alice, dm, "do", action="wait")
    await env.done()
    assert [r.code for r in env.fake.refused] == [50007]
    assert (await stored_actions(env.bot.services.db))["> You wait."] == 1
    (note,) = private_notes(env, record)
    assert note.visible_to == env.alice and "won't let Campfire message you" in note.content


async def test_a_closed_dm_does_not_stop_a_narration_through_the_interaction(
    env: DiscordEnv, fake_model
):
    # The narration of /do follows the interaction's response through its token: Discord
    # takes that from the app the player is talking to, whatever their DM settings.
    dm = env.fake.dm_channel(env.alice)
    await env.fake.slash(env.alice, dm, "start")
    await env.done()
    env.fake.close_dms(env.alice)
    text = "The wind rises over the moor, cold and wet."
    fake_model.queue(Reply(text=text, delay=0.01))
    record = await env.fake.slash(env.alice, dm, "do", action="wait")
    await env.done()
    assert env.fake.refused == []
    assert env.narration(dm)[-1] == text
    assert env.fake.message(record.followups[-1]).content == text
    assert private_notes(env, record) == []


# --- private after a public defer ----------------------------------------------------------------


async def test_a_private_refusal_stays_private_after_a_public_defer(env: DiscordEnv):
    # /adventure import answers publicly ("thinking…" for all), then finds the file broken.
    broken = StandinFile("broken.adventure.json", b"{ not json", "application/json")
    record = await env.fake.slash(env.alice, env.channel, "adventure import", file=broken)
    await env.done()
    assert not record.ephemeral  # the defer was public
    assert private_answer(env, record).startswith("⚠ ")
    # Nobody else sees anything of it: the public "thinking…" is gone.
    seen_by_bob = env.fake.messages(env.channel, visible_to=env.bob)
    assert [m for m in seen_by_bob if m.interaction_id == record.id] == []
    assert env.fake.refused == []


async def test_a_full_queue_is_told_to_the_player_alone(tmp_path, fake_model, caplog, database_url):
    async with campfire_on_standin(
        tmp_path, fake_model, caplog, database_url, max_queued_actions=1
    ) as env:
        thread = await env.start_thread()
        adventure = await env.bot.services.play.adventure_in(thread)
        assert adventure is not None
        fake_model.queue(
            Reply(text="The bridge sways, plank by plank, and holds.", delay=0.05), "Then calm."
        )
        await env.fake.slash(env.alice, thread, "do", action="cross")
        await until(lambda: fake_model.requests)
        await env.fake.slash(env.alice, thread, "do", action="wait")
        await until(lambda: env.bot.services.play.queue.waiting(adventure.adventure_id) == 1)
        refused = await env.fake.slash(env.bob, thread, "do", action="jump")
        await env.done()
        assert not refused.ephemeral  # "thinking…" was public
        assert "already waiting" in private_answer(env, refused)
        seen_by_alice = env.fake.messages(thread, visible_to=env.alice)
        assert [m for m in seen_by_alice if m.interaction_id == refused.id] == []
        assert env.fake.refused == []


async def test_an_interrupted_turn_in_a_closed_dm_is_not_announced_again(env: DiscordEnv):
    dm = env.fake.dm_channel(env.bob)
    await env.fake.slash(env.bob, dm, "start")
    await env.done()
    adventure = await env.bot.services.play.adventure_in(dm)
    assert adventure is not None
    # A process died mid-turn there a while ago; bob has since closed his DMs to the bot.
    await leave_dead_turn(
        env.bot.services.db,
        adventure.adventure_id,
        request_id=901,
        user_id=env.bob,
        action={"type": "do", "text": "knock"},
        clock=lambda: env.bot.services.leases.clock() - timedelta(minutes=5),
    )
    env.expect(50007)
    env.fake.close_dms(env.bob)
    for _ in range(3):  # sweep after sweep
        await env.bot.announce_interrupted_turns()
        await env.done()
    assert [r.code for r in env.fake.refused] == [50007]


async def test_a_head_move_stops_at_its_first_refusal(env: DiscordEnv, fake_model):
    thread = await env.start_thread()
    paragraphs = [f"Paragraph {n}: " + " ".join(f"w{n}-{i}" for i in range(60)) for n in range(8)]
    fake_model.queue("\n\n".join(paragraphs))
    await env.fake.slash(env.alice, thread, "do", action="walk on")
    await env.done()
    assert len(env.narration(thread)) >= 3  # the opening, and a turn over two messages
    # Discord refuses the bot every edit there now (as after a permission change the
    # interaction's app_permissions did not show yet).
    env.expect(50013)
    env.fake.faults.fail_edits(MISSING_PERMISSIONS, times=None, channel_id=thread)
    record = await env.fake.slash(env.alice, thread, "undo")
    await env.done()
    assert [r.code for r in env.fake.refused] == [50013]  # not one per message to mark
    (note,) = private_notes(env, record)
    assert note.visible_to == env.alice and note.content.startswith("⚠ The story moved")


# --- locked threads ------------------------------------------------------------------------------


async def test_a_thread_locked_without_archiving_is_refused_by_the_preflight(
    env: DiscordEnv, fake_model
):
    """Moderators usually lock a thread without archiving it; the bot, without Manage Threads,
    may no longer post there (Discord's 50083), so nothing is started that could not be shown."""
    thread = await env.start_thread()
    env.fake.lock_thread(thread)
    await env.fake.flush()
    asked = len(fake_model.requests)
    record = await env.fake.slash(env.alice, thread, "do", action="knock")
    await env.done()
    assert "🔒 This thread is locked" in private_answer(env, record)
    assert len(fake_model.requests) == asked
    assert "> alice knocks." not in await stored_actions(env.bot.services.db)


async def test_a_thread_locked_mid_turn_keeps_the_turn_and_tells_the_player_once(
    env: DiscordEnv, fake_model
):
    thread = await env.start_thread()
    env.expect(50083)  # provoked: a moderator locks the thread while the bot narrates
    turn = await narration_under_way(env, fake_model, thread)
    env.fake.lock_thread(thread)
    record = await turn
    await env.done()

    assert [r.code for r in env.fake.refused] == [50083]  # one refusal, never retried
    assert (await stored_actions(env.bot.services.db))["> alice goes down."] == 1
    notes = private_notes(env, record)
    assert len(notes) == 1 and notes[0].visible_to == env.alice
    assert "The turn is saved" in notes[0].content and "locked or archived" in notes[0].content
    # The turn's messages are recorded as its own, as for any turn.
    links = await env.bot.services.message_links.with_buttons(thread)
    assert links is not None


# --- private threads -----------------------------------------------------------------------------


async def test_a_private_thread_the_bot_was_not_added_to_is_named_as_such(
    env: DiscordEnv, fake_model
):
    """A private thread is only for those added to it (and Manage Threads, which the invite
    does not ask for): the bot cannot post there, and the fix is to add it, not a permission."""
    thread = env.fake.add_private_thread(env.channel, "whispers", env.alice)
    for command, options in (("start", {}), ("do", {"action": "knock"})):
        record = await env.fake.slash(env.alice, thread, command, **options)
        await env.done()
        assert "can't see this private thread" in private_answer(env, record)
    assert fake_model.requests == []
    assert await adventure_count(env) == 0
    # Added to it, as the note says, the bot sees the thread and plays there.
    env.fake.add_to_thread(thread, env.bot.user.id)
    await env.fake.flush()
    assert env.bot.get_channel(thread) is not None
    fake_model.queue("The whispers stop.")
    await env.fake.slash(env.alice, thread, "start")
    await env.done()
    await env.fake.slash(env.alice, thread, "do", action="knock")
    await env.done()
    assert await adventure_count(env) == 1
    assert env.narration(thread)[-1] == "The whispers stop."
