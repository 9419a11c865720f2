"""Content past Discord's limits, through the stand-in: a player's longest action shown whole
and acknowledged, a failed turn's note and Retry button kept under it, long lists paged with
buttons that read the list again on each press (and refuse a press for another adventure),
and the content guard's cuts."""

from __future__ import annotations

import discord
import pytest
from sqlalchemy import select
from sqlmodel import col

from bot.standin.records import MessageRecord, iter_components
from cogs.play import ACTION_LIMIT
from cogs.ui.content import EMBEDS_TOTAL_MAX, fit_embed, fit_text, text_pages
from engine.people.access.checks import OTHER_ADVENTURE
from engine.people.access.rules import Actor
from engine.storage.models import StoryNode
from tests.discord_env import DiscordEnv, campfire_on_standin, crash, restarted
from tests.fakes.openai_server import Reply

LONGEST = ("step " * 400).strip() + "s"  # a 2000-character action, made of words
# As a group adventure writes it: the player's name, the verb agreeing with it.
LONGEST_DONE = f"> alice steps {LONGEST[5:]}."


async def adventure_id(env: DiscordEnv, channel_id: int) -> int:
    ref = await env.bot.services.play.adventure_in(channel_id)
    assert ref is not None
    return ref.adventure_id


def after(env: DiscordEnv, channel_id: int, message_id: int) -> list[MessageRecord]:
    """The messages posted in a channel after ``message_id``, in order."""
    messages = env.fake.messages(channel_id)
    index = next(i for i, m in enumerate(messages) if m.id == message_id)
    return messages[index + 1 :]


def words(text: str) -> list[str]:
    return text.split()


@pytest.mark.parametrize(
    ("command", "option", "shown"),
    [
        ("do", "action", LONGEST_DONE),
        ("say", "words", f'> alice says "{LONGEST[0].upper()}{LONGEST[1:]}."'),
        ("story", "text", LONGEST),
    ],
)
async def test_the_longest_action_is_shown_whole_and_acknowledged_and_played(
    env, fake_model, command, option, shown
):
    assert len(LONGEST) == ACTION_LIMIT
    thread = await env.start_thread()
    fake_model.queue("The road rises to meet you.")
    record = await env.fake.slash(env.alice, thread, command, **{option: LONGEST})
    await env.done()
    assert record.failed is None
    response = env.fake.message(record.original_message_id)
    # Acknowledged: the response shows the action, not "thinking…" for ever.
    assert response.content and response.content.startswith(shown[:40])
    # Whole: what did not fit the response follows it, before the narration.
    later = after(env, thread, response.id)
    narration = later[-1]
    assert narration.content == "The road rises to meet you."
    pieces = [response.content] + [m.content for m in later[:-1]]
    assert all(len(piece) <= 2000 for piece in pieces)
    assert words(" ".join(pieces)) == words(shown)
    # Played: the action is in the story as the player wrote it, and the turn's buttons show.
    assert [label for label, _, _ in narration.buttons][:3] == ["Continue", "Retry", "Undo"]
    ours = await adventure_id(env, thread)
    async with env.bot.services.db.session() as session:
        nodes = await session.scalars(select(StoryNode).where(col(StoryNode.adventure_id) == ours))
        texts = [node.text for node in nodes]
    assert shown in texts


async def test_a_failed_turn_after_the_longest_action_keeps_its_note_and_retry(env, fake_model):
    thread = await env.start_thread()
    fake_model.queue(Reply(fault="500"), "The lantern catches at last.")
    record = await env.fake.slash(env.alice, thread, "do", action=LONGEST)
    await env.done()
    assert record.failed is None
    response = env.fake.message(record.original_message_id)
    shown = [response, *after(env, thread, response.id)]
    # The action is still there whole; the note follows it, whole, with the Retry button.
    with_note = [m for m in shown if "⚠" in m.content]
    assert len(with_note) == 1
    (noted,) = with_note
    assert noted is shown[-1]
    assert "internal error" in noted.content
    assert [label for label, _, _ in noted.buttons] == ["Retry"]
    text = " ".join(m.content for m in shown)
    assert words(text)[: len(words(LONGEST)) + 2] == words(LONGEST_DONE)
    assert all(len(m.content) <= 2000 for m in shown)
    # And the button plays the action again; its answer, the action once more, is the
    # presser's alone, whole too (the channel shows it above already).
    public = [m.id for m in env.fake.messages(thread) if not m.ephemeral]
    press = await env.fake.press(env.alice, noted.id, label="Retry")
    await env.done()
    assert env.narration(thread)[-1] == "The lantern catches at last."
    assert [m.id for m in env.fake.messages(thread) if not m.ephemeral][:-1] == public
    again = [env.fake.message(press.original_message_id)]
    again += [env.fake.message(i) for i in press.followups]
    assert all(m.ephemeral for m in again)
    assert words(" ".join(m.content for m in again)) == words(LONGEST_DONE)


async def test_a_short_action_and_its_failure_note_stay_in_the_response(env, fake_model):
    thread = await env.start_thread()
    fake_model.queue(Reply(fault="500"))
    record = await env.fake.slash(env.alice, thread, "do", action="light the lantern")
    await env.done()
    response = env.fake.message(record.original_message_id)
    assert response.content.startswith("> alice lights the lantern.\n⚠ ")
    assert [label for label, _, _ in response.buttons] == ["Retry"]
    assert after(env, thread, response.id) == []


# --- lists ---------------------------------------------------------------------------------------


def embed_of(message: MessageRecord) -> dict:
    (embed,) = message.embeds
    return embed


async def turn(env: DiscordEnv, user: int, message: MessageRecord, label: str) -> MessageRecord:
    record = await env.fake.press(user, message.id, label=label)
    await env.done()
    assert record.failed is None
    return env.fake.message(message.id)


async def test_forty_branches_are_listed_in_pages_you_can_turn(env):
    thread = await env.start_thread()
    host = Actor(env.alice, "alice", server_id=env.guild, manages_server=True)
    names = [f"the river path number {n:02}" for n in range(40)]
    for name in names:
        await env.bot.services.tree.new_branch(host, thread, name)

    record = await env.fake.slash(env.bob, thread, "branch list")  # anyone may look
    await env.done()
    assert record.failed is None and record.ephemeral  # as private as it always was
    listing = env.fake.message(record.original_message_id)
    assert [label for label, _, _ in listing.buttons] == ["◀", "page 1/3", "▶"]
    assert [disabled for _, _, disabled in listing.buttons] == [True, True, False]
    seen = [embed_of(listing)["description"]]
    assert embed_of(listing)["footer"]["text"] == "Page 1/3"
    for page in (2, 3):
        listing = await turn(env, env.bob, listing, "▶")
        assert embed_of(listing)["footer"]["text"] == f"Page {page}/3"
        seen.append(embed_of(listing)["description"])
    assert [disabled for _, _, disabled in listing.buttons] == [False, True, True]
    listed = "\n".join(seen)
    assert all(f"**{name}**" in listed for name in [*names, "main"])
    assert all(len(page) <= 4096 for page in seen)
    back = await turn(env, env.bob, listing, "◀")
    assert embed_of(back)["description"] == seen[1]

    # The custom_ids name the list, the adventure and the page, well under Discord's 100.
    ours = await adventure_id(env, thread)
    assert [custom_id for _, custom_id, _ in back.buttons] == [
        f"cf:list:branches:{ours}:1:p",
        f"cf:list:branches:{ours}:2:c",
        f"cf:list:branches:{ours}:3:n",
    ]

    # Save points and the tree page the same way.
    for n in range(20):
        await env.bot.services.tree.add_save_point(host, thread, f"camp {n:02}")
    record = await env.fake.slash(env.bob, thread, "savepoint list")
    await env.done()
    points = env.fake.message(record.original_message_id)
    assert [label for label, _, _ in points.buttons] == ["◀", "page 1/2", "▶"]
    points = await turn(env, env.bob, points, "▶")
    assert "camp 19" in embed_of(points)["description"]


async def test_a_page_turns_after_a_restart_showing_the_list_as_it_is_now(
    tmp_path, fake_model, caplog, database_url
):
    async with campfire_on_standin(tmp_path, fake_model, caplog, database_url) as first:
        thread = await first.start_thread()
        host = Actor(first.alice, "alice", server_id=first.guild, manages_server=True)
        for n in range(20):
            await first.bot.services.tree.new_branch(host, thread, f"path {n:02}")
        record = await first.fake.slash(first.alice, thread, "branch list")
        await first.done()
        assert record.original_message_id is not None
        listing = first.fake.message(record.original_message_id)
        await crash(first)
        async with restarted(first) as second:
            # Nothing of the list was kept by the process that drew it.
            await second.bot.services.tree.new_branch(host, thread, "path 20")
            listing = await turn(second, second.alice, listing, "▶")
            assert embed_of(listing)["footer"]["text"] == "Page 2/2"
            assert "**path 20**" in embed_of(listing)["description"]


async def test_a_long_script_list_is_paged(env):
    thread = await env.start_thread()
    manager = Actor(env.alice, "alice", server_id=env.guild, manages_server=True)
    for n in range(20):
        await env.bot.services.scripts.upload(
            thread, manager, "input", b"text", "input.js", name=f"script {n:02} " + "x" * 50
        )
    record = await env.fake.slash(env.bob, thread, "script list")
    await env.done()
    listing = env.fake.message(record.original_message_id)
    assert embed_of(listing)["title"] == "📜 Scripts, in the order they run"
    assert "1. **script 00" in embed_of(listing)["description"]
    assert [label for label, _, _ in listing.buttons] == ["◀", "page 1/2", "▶"]
    listing = await turn(env, env.bob, listing, "▶")
    assert "20. **script 19" in embed_of(listing)["description"]


async def test_long_memory_and_scenario_lists_turn_with_the_same_pager(env):
    thread = await env.start_thread()
    host = Actor(env.alice, "alice", server_id=env.guild, manages_server=True)
    for n in range(12):
        await env.bot.services.memory_bank.add(thread, host, f"Memory number {n:02}.")
    record = await env.fake.slash(env.bob, thread, "memory list")
    await env.done()
    listing = env.fake.message(record.original_message_id)
    assert [label for label, _, _ in listing.buttons] == ["◀", "page 1/2", "▶"]
    listing = await turn(env, env.bob, listing, "▶")
    assert embed_of(listing)["footer"]["text"].startswith("Page 2/2")
    assert "Memory number" in embed_of(listing)["description"]

    record = await env.fake.slash(env.bob, env.channel, "scenario list")
    await env.done()
    scenarios = env.fake.message(record.original_message_id)
    assert record.ephemeral and embed_of(scenarios)["title"] == "Scenarios"
    assert "**Shipped with Campfire**" in embed_of(scenarios)["description"]


def forge(message: MessageRecord, custom_id: str) -> None:
    """Give the message's last button another ``custom_id``, as a modified client would."""
    *_, button = (c for c in iter_components(message.components) if c.get("type") == 2)
    button["custom_id"] = custom_id


async def test_a_page_press_for_another_adventure_is_refused(env):
    theirs = await env.start_thread()
    host = Actor(env.alice, "alice", server_id=env.guild, manages_server=True)
    for n in range(20):
        await env.bot.services.tree.new_branch(host, theirs, f"secret way {n:02}")
    their_adventure = await adventure_id(env, theirs)

    # Bob, in his own adventure, presses a button naming page 2 of alice's branches.
    mine = await env.start_thread(env.bob)
    opening = env.fake.last_message(mine)
    before = list(opening.embeds), opening.content
    forge(opening, f"cf:list:branches:{their_adventure}:2:n")
    record = await env.fake.press(
        env.bob, opening.id, custom_id=f"cf:list:branches:{their_adventure}:2:n"
    )
    await env.done()
    assert record.ephemeral
    refusal = env.fake.message(record.original_message_id)
    assert refusal.content == f"⚠ {OTHER_ADVENTURE}"
    assert "secret way" not in refusal.content and refusal.embeds == []
    assert (env.fake.message(opening.id).embeds, env.fake.message(opening.id).content) == before

    # A list left from an adventure that has ended where it is shown is refused too.
    record = await env.fake.slash(env.alice, theirs, "branch list")
    await env.done()
    listing = env.fake.message(record.original_message_id)
    await env.start_anew(env.alice, theirs)  # another adventure takes its place
    record = await env.fake.press(env.alice, listing.id, label="▶")
    await env.done()
    assert env.fake.message(record.original_message_id).content == f"⚠ {OTHER_ADVENTURE}"
    assert embed_of(env.fake.message(listing.id))["footer"]["text"] == "Page 1/2"

    # Numbers past any row's id in a forged custom_id are bounded: no adventure, refused.
    forge(listing, "cf:list:branches:99999999999999999999:999999999999:n")
    record = await env.fake.press(
        env.alice, listing.id, custom_id="cf:list:branches:99999999999999999999:999999999999:n"
    )
    await env.done()
    assert env.fake.message(record.original_message_id).content == f"⚠ {OTHER_ADVENTURE}"


# --- the guard itself ----------------------------------------------------------------------------


def test_the_guard_cuts_embeds_to_every_limit():
    embed = discord.Embed(title="t" * 300, description="d" * 5000)
    embed.set_footer(text="f" * 3000)
    embed.set_author(name="a" * 300)
    for n in range(30):
        embed.add_field(name=f"field {n}" + "n" * 300, value="v" * 2000)
    fit_embed(embed)
    assert len(embed.title or "") == 256 and len(embed.description or "") <= 4096
    assert len(embed.footer.text or "") <= 2048 and len(embed.author.name or "") <= 256
    assert 0 < len(embed.fields) <= 25
    assert all(len(f.name or "") <= 256 and len(f.value or "") <= 1024 for f in embed.fields)
    assert len(embed) <= EMBEDS_TOTAL_MAX


def test_the_guard_cuts_or_pages_content():
    assert fit_text("x" * 2500).endswith("…") and len(fit_text("x" * 2500)) == 2000
    pages = text_pages(f"> You {LONGEST}.")
    assert len(pages) == 2 and all(len(p) <= 2000 for p in pages)
    assert words(" ".join(pages)) == words(f"> You {LONGEST}.")
