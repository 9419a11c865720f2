"""Which messages show which turn, kept in the database: undo marks a turn and the buttons move
long after the turn's interaction expired, after a restart too; old messages Discord will no
longer edit are given up on quietly; many undone turns are not all marked at once; head moves
are acknowledged before they write; and turns played leave nothing in discord.py's view
store. Through the stand-in, with the fake model behind the bot."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import discord
import pytest

from bot.standin.faults import MISSING_PERMISSIONS
from bot.standin.interactions import StandinFile
from bot.standin.limits import OLD_MESSAGE_AGE_S
from cogs.ui import head_moves
from cogs.ui.earlier_messages import OLD_EDITS, OLD_EDITS_PERIOD_S, OldEdits, message_at
from engine.storage.models import StoryMessage
from tests.discord_env import DiscordEnv, campfire_on_standin, crash, restarted

#: The buttons that open a form for an action, last under every newest turn.
ACT = ["Do", "Say", "Story"]

# The interaction token lasts 15 minutes (discord-api-docs, "Receiving and Responding").
PAST_THE_TOKEN = 16 * 60
OLD_MESSAGE_EDITS = 30046


def labels(message) -> list[str]:
    return [label for label, _, _ in message.buttons]


def undone(message) -> bool:
    return any("Undone" in (embed.get("description") or "") for embed in message.embeds)


async def act(env: DiscordEnv, thread: int, text: str):
    """A /do in the thread: (the narration's message, the action line's message)."""
    record = await env.fake.slash(env.alice, thread, "do", action=text)
    await env.done()
    assert record.original_message_id is not None
    return env.fake.last_message(thread), env.fake.message(record.original_message_id)


async def test_undo_marks_a_turn_whose_interaction_token_expired(env, fake_model):
    thread = await env.start_thread()
    fake_model.queue("One.", "Two.")
    one, _ = await act(env, thread, "one")
    two, two_action = await act(env, thread, "two")
    env.fake.advance(PAST_THE_TOKEN)
    # The bot's clock has not moved with the stand-in's: it meets the narration's token
    # expired once (50027), then edits that turn's messages by its own token.
    env.expect(50027)

    await env.fake.slash(env.alice, thread, "undo")
    await env.done()
    # The action line was the /do's own response: marked by its id, not through its token.
    assert undone(env.fake.message(two_action.id))
    two = env.fake.message(two.id)
    assert undone(two) and two.buttons == []
    assert labels(env.fake.message(one.id)) == [
        "Continue",
        "Retry",
        "Undo",
        "Redo",
        "Insights",
        *ACT,
    ]

    await env.fake.press(env.alice, one.id, label="Redo")
    await env.done()
    assert env.fake.message(two_action.id).embeds == []
    assert env.fake.message(two.id).embeds == []


async def test_after_a_restart_undo_marks_the_turn_and_the_buttons_move(
    tmp_path, fake_model, caplog, database_url
):
    async with campfire_on_standin(tmp_path, fake_model, caplog, database_url) as first:
        thread = await first.start_thread()
        fake_model.queue("One.", "Two.", "Three.")
        one, _ = await act(first, thread, "one")
        two, two_action = await act(first, thread, "two")
        await crash(first)
        async with restarted(first) as second:
            await second.fake.slash(second.alice, thread, "undo")
            await second.done()
            assert undone(second.fake.message(two.id))
            assert undone(second.fake.message(two_action.id))
            assert "Redo" in labels(second.fake.message(one.id))

            # A turn played now takes the buttons off the message the last bot put them on.
            three, _ = await act(second, thread, "three")
            assert second.fake.message(one.id).buttons == []
            assert labels(three)[:3] == ["Continue", "Retry", "Undo"]
            assert sum(1 for m in second.fake.messages(thread) if m.buttons) == 1


async def test_an_imported_adventures_posted_turn_is_marked_when_undone(env, fake_model):
    thread = await env.start_thread()
    fake_model.queue("One.")
    await act(env, thread, "one")
    exported = await env.fake.slash(env.alice, thread, "adventure export")
    await env.done()
    file = env.fake.message(exported.followups[-1]).attachments[0]
    await env.import_anew(env.alice, thread, StandinFile(file.filename, file.content))
    posted = [m for m in env.fake.messages(thread) if m.content == "One."][-1]
    assert posted.content == "One." and posted.buttons

    await env.fake.slash(env.alice, thread, "undo")
    await env.done()
    posted = env.fake.message(posted.id)
    assert undone(posted) and posted.buttons == []


async def test_edits_of_hour_old_messages_past_discords_cap_are_given_up_at_once(env, fake_model):
    thread = await env.start_thread()
    fake_model.queue("One.", "Two.", "Three.")
    await act(env, thread, "one")
    two, two_action = await act(env, thread, "two")
    await act(env, thread, "three")
    # An hour later Discord takes three edits of old messages a minute in this channel (the
    # stand-in's count), and answers the fourth with a 429 carrying 30046 and the rate-limit
    # headers: discord.py would sleep its retry_after (a minute) and try again five times.
    env.fake.advance(OLD_MESSAGE_AGE_S + 1)
    await env.fake.slash(env.alice, thread, "undo")  # three's marks, two's buttons: 3 edits
    await env.done()
    # The narrations' tokens expired with the stand-in's clock, which the bot's has not followed:
    # met once each (50027), then the messages are edited by the bot's own token.
    env.expect(OLD_MESSAGE_EDITS, 50027)

    record = await env.fake.slash(env.alice, thread, "undo")
    await env.done()
    assert "undid" in env.fake.message(record.original_message_id).content
    # Asked once, then given up (no retry after discord.py's sleep, no other edit in this
    # channel this move), nothing logged as an error (the env fixture fails on one).
    refused = [r for r in env.fake.refused if r.code == OLD_MESSAGE_EDITS]
    assert len(refused) == 1
    # The story's buttons are on a new line saying where it stands and why, the only ones to
    # press; the undone turn keeps its look, and the player who undid it is told why.
    *_, newest, note = env.fake.messages(thread)
    assert "The story now stands here (Discord takes no more edits" in newest.content
    assert "Redo" in labels(newest)
    assert not undone(env.fake.message(two.id)) and not undone(env.fake.message(two_action.id))
    assert note.ephemeral and note.visible_to == env.alice
    assert "were left as they were" in note.content


def test_campfire_keeps_its_own_budget_for_edits_of_hour_old_messages():
    edits = OldEdits()
    now = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
    fresh = discord.utils.time_snowflake(now - timedelta(minutes=59))
    old = discord.utils.time_snowflake(now - timedelta(minutes=61))
    for _ in range(OLD_EDITS):
        assert edits.take(1, old, now, clock=100.0)
    assert not edits.take(1, old, now, clock=100.0)
    assert edits.take(1, fresh, now, clock=100.0)  # a message under an hour old: not counted
    assert edits.take(2, old, now, clock=100.0)  # counted per channel
    assert edits.take(1, old, now, clock=100.0 + OLD_EDITS_PERIOD_S)  # the window moved on


async def test_a_channel_that_refuses_the_bot_is_asked_once_a_move(env, fake_model):
    thread = await env.start_thread()
    fake_model.queue("One.", "Two.")
    await act(env, thread, "one")
    await act(env, thread, "two")
    count = len(env.fake.messages(thread))
    # The bot lost the right to edit there (403, 50013): a warning, not an error, and no
    # request more than the first of the move.
    env.expect(MISSING_PERMISSIONS.code)
    env.fake.faults.fail_edits(MISSING_PERMISSIONS, times=None, channel_id=thread)

    await env.fake.slash(env.alice, thread, "undo")
    await env.done()
    assert len([r for r in env.fake.refused if r.code == MISSING_PERMISSIONS.code]) == 1
    # The answer, and a note to alice alone that the story moved though Discord refused to
    # show it; no line with buttons.
    answer, note = env.fake.messages(thread)[count:]
    assert "undid" in answer.content
    assert note.ephemeral and note.visible_to == env.alice and "moved" in note.content


async def test_a_message_deleted_in_discord_is_forgotten(env, fake_model):
    thread = await env.start_thread()
    fake_model.queue("One.", "Two.")
    await act(env, thread, "one")
    two, two_action = await act(env, thread, "two")
    await message_at(env.bot, thread, two.id).delete()  # as a moderator would
    env.expect(10008)  # the bot learns it is gone when it tries to mark it

    await env.fake.slash(env.alice, thread, "undo")
    await env.done()
    assert undone(env.fake.message(two_action.id))
    async with env.bot.services.db.session() as session:
        assert await session.get(StoryMessage, two.id) is None
        assert await session.get(StoryMessage, two_action.id) is not None


async def test_many_undone_turns_are_not_all_marked_at_once(env, fake_model, monkeypatch):
    # Two messages a move here (a turn's worth), so that three turns undone at once are more.
    monkeypatch.setattr(head_moves, "EDITS_PER_MOVE", 2)
    thread = await env.start_thread()
    fake_model.queue("At camp.", "Turn 1.", "Turn 2.")
    await act(env, thread, "camp")
    await env.fake.slash(env.alice, thread, "savepoint add", name="camp")
    await env.done()
    older = await act(env, thread, "go on")
    newer = await act(env, thread, "go further")
    edits = len(env.fake.requests)

    record = await env.fake.slash(env.alice, thread, "savepoint restore", name="camp")
    await env.done()
    line = env.fake.message(record.original_message_id).content
    assert "went back to a save point" in line
    assert "2 older messages of these turns are left as they were" in line
    # The newest are marked, the older turn's are not.
    assert all(undone(env.fake.message(m.id)) for m in newer)
    assert not any(undone(env.fake.message(m.id)) for m in older)
    patches = [r for r in env.fake.requests[edits:] if r.method == "PATCH"]
    assert len(patches) <= 2 + 2  # the marks, the buttons, the answer


async def test_turns_played_leave_nothing_in_the_view_store(env, fake_model):
    thread = await env.start_thread()
    fake_model.queue("One.", "One again.", "Two.", "Two again.")
    stored = len(env.bot.persistent_views)
    for text in ("one", "two"):
        narration, _ = await act(env, thread, text)
        await env.fake.press(env.alice, narration.id, label="Retry")
        await env.done()
        # The take pager, with its n/m counter, is under the newest turn.
        assert "2/2" in labels(env.fake.last_message(thread))
    assert len(env.bot.persistent_views) == stored


async def test_an_interaction_response_is_edited_by_id_unless_ephemeral(env, fake_model):
    """Edit Message lets "the original message author" edit content, embeds and components
    (discord-api-docs, Message); an interaction's response is the bot user's message, so the
    bot edits it by id once its token has expired, but an ephemeral one is unknown there."""
    thread = await env.start_thread()
    fake_model.queue("One.")
    _, action = await act(env, thread, "one")
    private = await env.fake.slash(env.bob, thread, "help")
    env.fake.advance(PAST_THE_TOKEN)
    await message_at(env.bot, thread, action.id).edit(content="> You one, edited.")
    assert env.fake.message(action.id).content == "> You one, edited."
    env.expect(10008)
    with pytest.raises(discord.NotFound) as refused:
        await message_at(env.bot, thread, private.original_message_id).edit(content="x")
    assert refused.value.code == 10008
