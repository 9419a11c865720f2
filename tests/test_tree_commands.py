"""The story tree through Discord: the turn's buttons, the take pager, undo and redo marks,
stale and double presses, /edit's form, branches, save points and /tree. Real discord.py over
the local stand-in, the fake model server behind the bot."""

from __future__ import annotations

import asyncio

from sqlalchemy import select

from bot.standin.interactions import StandinFile
from engine.storage.models import Adventure, AdventureScript, StoryNode
from tests.discord_env import DiscordEnv, answered
from tests.fakes.openai_server import Reply
from tests.helpers import forget_where_buttons_are

#: The buttons that open a form for an action, last under every newest turn.
ACT = ["Do", "Say", "Story"]


async def adventure_here(env: DiscordEnv, channel_id: int) -> Adventure:
    async with env.bot.services.db.session() as session:
        return (
            await session.scalars(select(Adventure).where(Adventure.channel_id == channel_id))
        ).one()


def labels(message) -> list[str]:
    return [label for label, _, _ in message.buttons]


def answer(env: DiscordEnv, record):
    """What the player was answered: the response or, after a deferral, its last private
    follow-up (a refusal after a public "thinking…" replaces it privately); a turn's narration
    is a public follow-up, not the answer."""
    private = [f for f in record.followups if env.fake.message(f).visible_to is not None]
    return env.fake.message(private[-1] if private else record.original_message_id)


def said(env: DiscordEnv, record) -> tuple[bool, str]:
    """Whether only the presser sees the bot's answer to an interaction, and its text: the
    response, or for a press acknowledged silently (a deferred update, as head moves are
    before they write) its follow-up."""
    if record.response_type == 6 and not record.followups:
        return False, answer(env, record).content  # the pressed message, edited in place
    if record.response_type == 6:
        (followup,) = record.followups
        message = env.fake.message(followup)
        return message.ephemeral, message.content
    return record.ephemeral, answer(env, record).content


async def refusal(env: DiscordEnv, record) -> str:
    """The text of a refusal, checked to be for the player alone: head moves and retries are
    acknowledged before the database is asked, so their refusal is a private follow-up."""
    await env.done()
    message = await answered(env, record)
    assert message.visible_to == record.user_id, f"shown to the channel: {message.content!r}"
    return message.content


async def act(env: DiscordEnv, thread: int, user: int, text: str):
    record = await env.fake.slash(user, thread, "do", action=text)
    await env.done()
    return env.fake.last_message(thread), record


async def test_retry_adds_a_take_and_the_pager_shows_each_in_place(env, fake_model):
    thread = await env.start_thread()
    fake_model.queue("The first telling.", Reply(text="The second telling.", delay=0.005))
    first, _ = await act(env, thread, env.alice, "listen")
    assert labels(first) == ["Continue", "Retry", "Undo", "Insights", *ACT]

    pressed = await env.fake.press(env.alice, first.id, label="Retry")
    await env.done()
    assert "another take" in answer(env, pressed).content
    newest = env.fake.last_message(thread)
    assert newest.content == "The second telling."
    assert labels(newest) == ["Continue", "Retry", "Undo", "Insights", "‹", "2/2", "›", *ACT]
    # The earlier take's message says where the story went and loses its buttons.
    first = env.fake.message(first.id)
    assert first.buttons == [] and "Retried" in first.embeds[0]["description"]

    # Choosing a take makes it live: for the same people who may retry.
    refused = await env.fake.press(env.bob, newest.id, label="‹")
    assert "Only the player" in await refusal(env, refused)
    await env.fake.press(env.alice, newest.id, label="‹")
    await env.done()
    paged = env.fake.message(newest.id)
    assert paged.content == "The first telling."  # edited in place
    assert "1/2" in labels(paged)
    adventure = await adventure_here(env, thread)
    async with env.bot.services.db.session() as session:
        node = await session.get(StoryNode, adventure.head_node_id)
    assert (node.text, node.live_take, node.take_count) == ("The first telling.", 1, 2)

    # A double click on › shows take 2 once; the other press changes nothing.
    first, second = await asyncio.gather(
        env.fake.press(env.alice, newest.id, label="›"),
        env.fake.press(env.alice, newest.id, label="›"),
    )
    await env.done()
    told = sorted([said(env, first), said(env, second)])
    assert [private for private, _ in told] == [False, True]
    assert "moved on" in told[1][1]
    assert env.fake.message(newest.id).content == "The second telling."
    assert (await adventure_here(env, thread)).version == adventure.version + 1


async def test_stale_and_double_presses_change_nothing(env, fake_model):
    thread = await env.start_thread()
    fake_model.queue("One.", "Two.")
    one, _ = await act(env, thread, env.alice, "one")
    # The bot does not know which message carried the buttons (shown before it kept that),
    # so the old ones stay visible under a turn that is no
    # longer the newest.
    await forget_where_buttons_are(env.bot.services.db)
    two, _ = await act(env, thread, env.alice, "two")
    assert labels(env.fake.message(one.id))
    moved = await adventure_here(env, thread)
    requests = len(fake_model.requests)
    for label in ("Retry", "Undo"):
        press = await env.fake.press(env.alice, one.id, label=label)
        await env.done()
        assert press.ephemeral and "moved on" in answer(env, press).content
    after = await adventure_here(env, thread)
    assert (after.version, after.head_node_id) == (moved.version, moved.head_node_id)
    assert after.world_state == moved.world_state
    assert len(fake_model.requests) == requests

    # A double click on Undo: one press acts, the other is told the story moved on.
    first, second = await asyncio.gather(
        env.fake.press(env.alice, two.id, label="Undo"),
        env.fake.press(env.alice, two.id, label="Undo"),
    )
    await env.done()
    answers = sorted(said(env, r) for r in (first, second))
    assert answers[0][0] is False and "undid" in answers[0][1]
    assert answers[1][0] is True and "moved on" in answers[1][1]
    undone = await adventure_here(env, thread)
    assert undone.version == moved.version + 1

    # A double click on Retry writes one take, not two.
    fake_model.queue(Reply(text="One, again.", delay=0.02), "One, a third time.")
    one = env.fake.message(one.id)
    first, second = await asyncio.gather(
        env.fake.press(env.alice, one.id, label="Retry"),
        env.fake.press(env.alice, one.id, label="Retry"),
    )
    await env.done()
    assert len(fake_model.requests) == requests + 1
    contents = sorted(answer(env, r).content for r in (first, second))
    assert any("moved on" in c for c in contents)


async def test_undo_marks_the_turn_and_redo_brings_it_back(env, fake_model):
    thread = await env.start_thread()
    fake_model.queue("One.", "Two.")
    one, _ = await act(env, thread, env.alice, "one")
    two, two_action = await act(env, thread, env.alice, "two")

    record = await env.fake.slash(env.alice, thread, "undo")
    await env.done()
    assert "undid" in answer(env, record).content and not record.ephemeral
    two = env.fake.message(two.id)
    assert "Undone" in two.embeds[0]["description"] and two.buttons == []
    # The player's action that the turn answered is marked too.
    action = env.fake.message(two_action.original_message_id)
    assert action.content == "> alice twos." and "Undone" in action.embeds[0]["description"]
    # The buttons moved to the turn the story stands on, with Redo.
    one = env.fake.message(one.id)
    assert labels(one) == ["Continue", "Retry", "Undo", "Redo", "Insights", *ACT]

    await env.fake.press(env.alice, one.id, label="Redo")
    await env.done()
    two = env.fake.message(two.id)
    assert two.embeds == [] and two.content == "Two."
    assert env.fake.message(two_action.original_message_id).embeds == []
    assert "Redo" not in labels(two)


async def test_only_the_author_the_host_or_a_manager_may_undo(env, fake_model):
    thread = await env.start_thread()  # alice hosts (and manages the server)
    fake_model.queue("Bob's turn.", "Alice's turn.")
    await act(env, thread, env.bob, "wave")
    await act(env, thread, env.alice, "nod")
    refused = await env.fake.slash(env.bob, thread, "undo")
    assert "Only the player who wrote that turn" in await refusal(env, refused)
    requests = len(fake_model.requests)
    newest = [m for m in env.fake.messages(thread) if m.buttons][-1]
    typed = await env.fake.slash(env.bob, thread, "retry")
    pressed = await env.fake.press(env.bob, newest.id, label="Retry")
    for refused in (typed, pressed):
        assert "Only the player" in await refusal(env, refused)
    assert len(fake_model.requests) == requests
    allowed = await env.fake.slash(env.alice, thread, "undo")
    await env.done()
    assert not allowed.ephemeral
    # Bob wrote the turn now at the head: he may undo his own.
    own = await env.fake.slash(env.bob, thread, "undo")
    await env.done()
    assert not own.ephemeral


async def test_a_moderator_may_undo_anyones_turn_but_not_change_scripts(env, fake_model):
    """Manage Messages without Manage Server: a story manager, not a script manager."""
    carol = env.fake.add_user("carol", member_of=[env.guild], manage_messages=True)
    await env.fake.flush()
    thread = await env.start_thread()  # alice hosts
    fake_model.queue("Bob's turn.")
    await act(env, thread, env.bob, "wave")
    undone = await env.fake.slash(carol, thread, "undo")
    await env.done()
    assert not undone.ephemeral and "carol undid the last turn" in answer(env, undone).content
    script = StandinFile("o.js", b"text", "text/javascript")
    refused = await env.fake.slash(carol, thread, "script upload", hook="output", file=script)
    await env.done()
    message = answer(env, refused)
    assert message.ephemeral and "only members with the Manage Server permission" in (
        message.content
    )
    async with env.bot.services.db.session() as session:
        scripts = await session.scalars(select(AdventureScript))
        assert list(scripts) == []


async def test_edit_opens_a_prefilled_form_and_corrects_the_turn(env, fake_model):
    thread = await env.start_thread()
    fake_model.queue("The gaet creaks.")
    narration, _ = await act(env, thread, env.alice, "push")
    record = await env.fake.slash(env.alice, thread, "edit")
    assert record.modal is not None
    (box,) = [c for row in record.modal["components"] for c in row["components"]]
    assert box["value"] == "The gaet creaks."
    submitted = await env.fake.submit_modal(env.alice, record, {"text": "The gate creaks."})
    await env.done()
    assert "corrected" in answer(env, submitted).content
    shown = env.fake.message(narration.id)
    assert shown.content == "The gate creaks." and "2/2" in labels(shown)

    refused = await env.fake.slash(env.bob, thread, "edit")
    assert refused.modal is None and "Only the player" in answer(env, refused).content


async def test_edit_keeps_the_turns_paragraphs(env, fake_model):
    thread = await env.start_thread()
    fake_model.queue("The gate creaks.\n\nBeyond it, a lantern gutters.")
    narration, _ = await act(env, thread, env.alice, "push")
    record = await env.fake.slash(env.alice, thread, "edit")
    assert record.modal is not None
    (box,) = [c for row in record.modal["components"] for c in row["components"]]
    # A many-line box (TextStyle.paragraph), holding the turn as it is, blank line and all.
    assert box["style"] == 2
    assert box["value"] == "The gate creaks.\n\nBeyond it, a lantern gutters."
    corrected = "The gate creaks open.\n\nBeyond it, a lantern gutters.\nThen it goes out."
    await env.fake.submit_modal(env.alice, record, {"text": corrected})
    await env.done()
    adventure = await adventure_here(env, thread)
    async with env.bot.services.db.session() as session:
        head = await session.get(StoryNode, adventure.head_node_id)
    assert head is not None and head.text == corrected
    assert env.fake.message(narration.id).content == corrected


async def test_branches_save_points_and_the_tree(env, fake_model):
    thread = await env.start_thread()
    fake_model.queue("One.", "Two.", "Another two.")
    await act(env, thread, env.alice, "one")
    saved = await env.fake.slash(env.alice, thread, "savepoint add", name="camp")
    await env.done()  # answered after the write it defers for
    assert "camp" in answer(env, saved).content
    await act(env, thread, env.alice, "two")

    restored = await env.fake.slash(env.alice, thread, "savepoint restore", name="camp")
    await env.done()
    assert "save point" in answer(env, restored).content
    await act(env, thread, env.alice, "other")  # writing here forks a branch

    listing = await env.fake.slash(env.bob, thread, "branch list")
    content = answer(env, listing).embeds[0]["description"]
    assert "**main**" in content and "▶ **fork 2**" in content

    refused = await env.fake.slash(env.alice, thread, "branch delete", name="main")
    await env.done()  # answered after the write it defers for
    assert "save points on it" in answer(env, refused).content
    refused = await env.fake.slash(env.bob, thread, "branch switch", name="main")
    assert "Only" in await refusal(env, refused)

    switched = await env.fake.slash(env.alice, thread, "branch switch", name="main")
    await env.done()
    assert "switched" in answer(env, switched).content
    adventure = await adventure_here(env, thread)
    async with env.bot.services.db.session() as session:
        head = await session.get(StoryNode, adventure.head_node_id)
    assert head.text == "Two."

    picture = await env.fake.slash(env.bob, thread, "tree")
    await env.done()  # answered after the picture it defers for is drawn
    drawn = answer(env, picture).embeds[0]["description"]
    assert drawn.startswith("```") and "main" in drawn and "fork 2" in drawn and "⚑camp" in drawn


async def test_undoing_back_to_the_opening_puts_its_buttons_back(env, fake_model):
    thread = await env.start_thread()
    opening = env.fake.messages(thread)[0]
    fake_model.queue("One.")
    await act(env, thread, env.alice, "one")
    assert env.fake.message(opening.id).buttons == []
    await env.fake.slash(env.alice, thread, "undo")
    await env.done()
    # The opening cannot be retried or undone; the story can go on from it, or be redone.
    assert labels(env.fake.message(opening.id)) == ["Continue", "Redo", *ACT]
    refused = await env.fake.slash(env.alice, thread, "undo")
    assert "opening" in await refusal(env, refused)
    refused = await env.fake.slash(env.alice, thread, "retry")
    assert "opening" in await refusal(env, refused)
