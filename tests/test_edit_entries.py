"""/edit of any entry of the current line: an earlier action or narration, through Discord.

Real discord.py over the local stand-in, the fake model server behind the bot recording every
request, so the next turn's prompt shows what the model reads after an edit. Both tools the
players come from edit any entry, not only the newest: AI Dungeon's Edit "allows you to directly
edit previous inputs and outputs" (help.aidungeon.com/faq/how-to-play, "Edit"); SillyTavern has
an Edit button "on any message" (docs.sillytavern.app/usage/chatting). Campfire names the
entry by its number on the current line.
"""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select
from sqlmodel import col

from bot.standin.limits import OLD_MESSAGE_AGE_S
from cogs.ui.earlier_messages import OLD_MESSAGE_EDITS
from engine.errors import InvalidInput, NotFound
from engine.people.access.rules import Actor
from engine.storage.models import Adventure, Role, StoryNode, Take
from tests.discord_env import DiscordEnv, answered
from tests.fakes.openai_server import FakeModelServer
from tests.test_discord_rounds import party_of_three


async def _story(env: DiscordEnv, thread: int) -> tuple[Adventure, list[StoryNode]]:
    """The adventure in ``thread`` and its current line, oldest first."""
    async with env.bot.services.db.session() as session:
        adventure = (
            await session.scalars(select(Adventure).where(col(Adventure.channel_id) == thread))
        ).one()
        nodes = {n.id: n for n in await session.scalars(select(StoryNode))}
    line = []
    at = adventure.head_node_id
    while at is not None:
        line.append(nodes[at])
        at = nodes[at].parent_id
    return adventure, line[::-1]


async def _act(env: DiscordEnv, thread: int, text: str):
    """A /do by alice: its action's message and its narration's."""
    record = await env.fake.slash(env.alice, thread, "do", action=text)
    await env.done()
    assert record.original_message_id is not None
    action = env.fake.message(record.original_message_id)
    return action, env.fake.last_message(thread)


def _box(record) -> dict[str, Any]:
    assert record.modal is not None, "no form opened"
    (box,) = [c for row in record.modal["components"] for c in row["components"]]
    return box


async def _edit(env: DiscordEnv, user: int, thread: int, entry: int, text: str):
    """/edit entry: by ``user``, the form sent with ``text``: the form's submission."""
    opened = await env.fake.slash(user, thread, "edit", entry=entry)
    submitted = await env.fake.submit_modal(user, opened, {"text": text})
    await env.done()
    return submitted


def _prompt(fake_model: FakeModelServer) -> str:
    return "\n".join(str(m["content"]) for m in fake_model.requests[-1]["messages"])


async def test_an_old_action_and_narration_are_edited_and_the_next_prompt_reads_them(
    env: DiscordEnv, fake_model: FakeModelServer
):
    thread = await env.start_thread()
    fake_model.queue("The gate creaks open.\n\nA dog wakes.", "The yard is empty.", "Dawn.")
    first_action, first_narration = await _act(env, thread, "push the gate")
    await _act(env, thread, "look around")
    _, line = await _story(env, thread)
    action = line[1]  # the opening is entry 0
    assert action.text.startswith("> ") and "push" in action.text

    # The autocomplete lists the current line, newest first, each with an excerpt.
    choices = await env.fake.autocomplete(env.alice, thread, "edit", focused="entry", value="")
    assert [c["value"] for c in choices][:5] == [4, 3, 2, 1, 0]
    assert choices[2]["name"].startswith("2 · narration · The gate creaks open. A dog")
    assert choices[3]["name"].startswith("1 · action · > ")
    typed = await env.fake.autocomplete(env.alice, thread, "edit", focused="entry", value="dog")
    assert [c["value"] for c in typed] == [2]

    # An old narration: the form holds it whole, paragraphs and all.
    opened = await env.fake.slash(env.alice, thread, "edit", entry=2)
    assert (
        _box(opened)["value"] == "The gate creaks open.\n\nA dog wakes."
        and _box(opened)["style"] == 2
    )
    corrected = "The gate groans open.\n\nA hound wakes."
    submitted = await env.fake.submit_modal(env.alice, opened, {"text": corrected})
    await env.done()
    notice = await answered(env, submitted)
    assert "edited entry 2" in notice.content and notice.visible_to is None
    assert [label for label, _, _ in notice.buttons] == ["Undo edit"]
    # Its message shows the new words; the story after it stays.
    assert env.fake.message(first_narration.id).content == corrected
    _, after = await _story(env, thread)
    assert [n.id for n in after] == [n.id for n in line]
    assert after[2].text == corrected and after[2].live_take == 2

    # An old action, the player's own.
    await _edit(env, env.alice, thread, 1, "> You push the gate with your shoulder.")
    assert env.fake.message(first_action.id).content == "> You push the gate with your shoulder."

    # The next turn's prompt reads the new words, not the old.
    await _act(env, thread, "wait")
    prompt = _prompt(fake_model)
    assert "The gate groans open." in prompt and "A hound wakes." in prompt
    assert "with your shoulder" in prompt
    assert "creaks" not in prompt and "A dog wakes" not in prompt

    # Undo edit brings the words before back, in the story and its message.
    pressed = await env.fake.press(env.alice, notice.id, label="Undo edit")
    await env.done()
    _, line = await _story(env, thread)
    assert line[2].text == "The gate creaks open.\n\nA dog wakes." and line[2].live_take == 1
    assert env.fake.message(first_narration.id).content == "The gate creaks open.\n\nA dog wakes."
    assert "undid the edit of entry 2" in env.fake.last_message(thread).content
    assert env.fake.message(notice.id).buttons == []  # the button went with its edit
    assert pressed.failed is None
    async with env.bot.services.db.session() as session:
        takes = await session.execute(
            select(col(Take.number), col(Take.text)).where(col(Take.node_id) == line[2].id)
        )
        assert sorted(takes) == [(1, "The gate creaks open.\n\nA dog wakes."), (2, corrected)]
    fake_model.queue("Noon.")
    await _act(env, thread, "rest")
    assert "A dog wakes." in _prompt(fake_model) and "hound" not in _prompt(fake_model)


async def test_only_the_author_or_the_host_edits_an_entry(
    env: DiscordEnv, fake_model: FakeModelServer
):
    thread = await env.start_thread()
    fake_model.queue("The gate creaks.", "Bob's dog barks.")
    await _act(env, thread, "push the gate")
    record = await env.fake.slash(env.bob, thread, "do", action="whistle")
    await env.done()
    # Bob may not touch alice's action, nor the narration it asked for.
    for entry in (1, 2):
        refused = await env.fake.slash(env.bob, thread, "edit", entry=entry)
        assert refused.modal is None
        message = await answered(env, refused)
        assert "Only the player" in message.content and message.visible_to == env.bob
    # His own action is his to edit; alice, the host, may edit it too.
    submitted = await _edit(env, env.bob, thread, 3, "> Bob whistles a tune.")
    assert "edited entry 3" in (await answered(env, submitted)).content
    assert record.original_message_id is not None
    assert env.fake.message(record.original_message_id).content == "> Bob whistles a tune."
    notice = await answered(env, await _edit(env, env.alice, thread, 3, "> Bob whistles."))
    # Bob cannot take back alice's edit of narration either: an Undo edit is a rewrite too.
    await _edit(env, env.alice, thread, 2, "The gate groans.")
    alice_notice = env.fake.last_message(thread)
    pressed = await env.fake.press(env.bob, alice_notice.id, label="Undo edit")
    await env.done()
    message = await answered(env, pressed)
    assert "Only the player" in message.content and message.visible_to == env.bob
    _, line = await _story(env, thread)
    assert line[2].text == "The gate groans." and line[3].text == "> Bob whistles."
    assert notice.buttons  # alice's edit of bob's action can still be undone


async def test_an_entry_off_the_current_line_is_refused(
    env: DiscordEnv, fake_model: FakeModelServer
):
    thread = await env.start_thread()
    fake_model.queue("One.", "Two.")
    await _act(env, thread, "one")
    await _act(env, thread, "two")
    _, line = await _story(env, thread)
    undone = line[-2:]  # the second turn: its action and narration
    await env.fake.slash(env.alice, thread, "undo")
    await env.done()

    # By number: past the head there is nothing.
    refused = await env.fake.slash(env.alice, thread, "edit", entry=4)
    assert refused.modal is None
    assert "no entry 4" in (await answered(env, refused)).content

    # By node (a forged form or button): the undone turn's, another adventure's.
    tree = env.bot.services.tree
    adventure, _ = await _story(env, thread)
    alice = Actor(user_id=env.alice, server_id=env.guild, user_name="alice")
    for node in undone:
        assert node.id is not None
        with pytest.raises(InvalidInput, match="not on the story's current line"):
            await tree.edit(
                alice, thread, "Forged.", node_id=node.id, seen_version=adventure.version
            )
    other = await env.start_thread()
    _, other_line = await _story(env, other)
    assert other_line[0].id is not None
    with pytest.raises(NotFound, match="not in this adventure"):
        await tree.edit(
            alice, thread, "Forged.", node_id=other_line[0].id, seen_version=adventure.version
        )
    # A forged Undo edit button, naming another adventure's entry, changes nothing either.
    with pytest.raises(NotFound, match="not in this adventure"):
        await tree.undo_edit(
            alice,
            thread,
            adventure_id=adventure.id or 0,
            node_id=other_line[0].id,
            take=1,
            previous=1,
        )
    _, line = await _story(env, other)
    assert line[0].text == other_line[0].text and line[0].take_count == 1


async def test_an_action_of_a_round_is_edited_in_the_line_of_its_round(
    env: DiscordEnv, fake_model: FakeModelServer
):
    thread, carol = await party_of_three(env, "rounds")
    fake_model.queue("Three voices, one answer.", "Later.")
    # Each lands before the next is sent: a round keeps its actions in the order they were
    # written, which is not always the order they were acknowledged in.
    await env.fake.slash(env.bob, thread, "do", action="draw his axe")
    await env.done()
    await env.fake.slash(carol, thread, "say", words="stay close")
    await env.done()
    await env.fake.slash(env.alice, thread, "do", action="open the door")
    await env.done()
    _, line = await _story(env, thread)
    bram = next(n for n in line if n.text == "> Bram draws his axe.")
    # The round's actions are shown as one line of them, one a line.
    (shown,) = [m for m in env.fake.messages(thread) if "> Bram draws his axe." in m.content]

    await _edit(env, env.bob, thread, bram.index, "> Bram draws his axe and waits.")
    _, line = await _story(env, thread)
    assert [n.text for n in line if n.role == Role.PLAYER] == [
        "> Bram draws his axe and waits.",
        '> Cora says "Stay close."',
        "> Ann opens the door.",
    ]
    # That message shows the round's line again, Bram's new words in place.
    assert env.fake.message(shown.id).content == "\n".join(
        ["> Bram draws his axe and waits.", '> Cora says "Stay close."', "> Ann opens the door."]
    )

    await env.fake.slash(env.bob, thread, "do", action="wait")
    await env.fake.slash(carol, thread, "do", action="wait")
    await env.fake.slash(env.alice, thread, "do", action="wait")
    await env.done()
    assert "draws his axe and waits." in _prompt(fake_model)


async def test_edits_of_hour_old_entries_keep_to_the_budget_for_old_messages(
    env: DiscordEnv, fake_model: FakeModelServer
):
    thread = await env.start_thread()
    fake_model.queue("One.", "Two.", "Three.", "Four.", "Five.")
    words = ("one", "two", "three", "four", "five")
    narrations = [(await _act(env, thread, word))[1] for word in words]
    # An hour later, edits of these messages count against the budget for old messages
    # (``cogs.ui.earlier_messages``: three a minute in a channel), and Discord's own cap.
    env.fake.advance(OLD_MESSAGE_AGE_S + 1)
    # The narrations' tokens expired with the stand-in's clock, which the bot's has not followed:
    # met once each (50027), then the messages are edited by the bot's own token.
    env.expect(OLD_MESSAGE_EDITS, 50027)
    for index, word, message in zip((2, 4, 6), ("One", "Two", "Three"), narrations, strict=False):
        await _edit(env, env.alice, thread, index, f"{word}, edited.")
        assert env.fake.message(message.id).content == f"{word}, edited."
    record = await _edit(env, env.alice, thread, 8, "Four, edited.")
    # The story has the new words; the message keeps the old (the newest turn, entry 10, is
    # not the one edited), and the player is told why.
    _, line = await _story(env, thread)
    assert line[8].text == "Four, edited."
    assert env.fake.message(narrations[3].id).content == "Four."
    note = env.fake.message(record.followups[-1])
    assert note.visible_to == env.alice and "were left as they were" in note.content
