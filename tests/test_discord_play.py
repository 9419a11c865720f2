"""Playing through Discord: real discord.py objects over the local stand-in, a real model
server behind the bot. Every interaction must be acknowledged within 3 s and no request may
be rate limited (the env checks both when each test ends)."""

from __future__ import annotations

import asyncio
import socket
import time
from pathlib import Path

import discord
import pytest
from pydantic import SecretStr

from bot.__main__ import _sync
from bot.config import ConfigError
from bot.standin.routes_commands import DAILY_COMMAND_CREATES
from cogs.help import (
    EMBEDDED_MODEL_NOTE,
    OVERVIEW_TITLE,
    TOPIC_CHOICES,
    TOPICS,
    overview,
    topic_text,
)
from cogs.ui.content import EMBED_DESCRIPTION_MAX, EMBEDS_TOTAL_MAX
from engine.llm.providers.local import LocalLlamaProvider
from tests.discord_env import DiscordEnv, answered
from tests.fakes.openai_server import Reply
from tests.helpers import forget_where_buttons_are

#: The buttons that open a form for an action, last under every newest turn.
ACT = ["Do", "Say", "Story"]


async def test_start_in_a_channel_opens_a_thread_with_the_opening(env: DiscordEnv):
    thread = await env.start_thread()
    response = env.fake.last_message(env.channel)
    assert "The Lantern Road" in response.content and f"<#{thread}>" in response.content
    (opening,) = env.narration(thread)
    assert opening.startswith("Dusk settles over the valley")
    buttons = env.fake.last_message(thread).buttons
    assert [label for label, _, _ in buttons] == ["Continue", *ACT]


async def test_start_in_a_dm_is_a_solo_adventure(env: DiscordEnv):
    dm = env.fake.dm_channel(env.alice)
    record = await env.fake.slash(env.alice, dm, "start", scenario="lantern")
    await env.done()
    assert record.failed is None
    assert env.fake.threads(env.channel) == []
    assert env.narration(dm)[0].startswith("Dusk settles")


async def test_autocomplete_offers_the_library(env: DiscordEnv):
    choices = await env.fake.autocomplete(
        env.alice, env.channel, "start", focused="scenario", value="lan"
    )
    assert [c["name"] for c in choices] == ["🏮 The Lantern Road"]


@pytest.mark.parametrize(
    ("command", "options", "action_line"),
    [
        ("do", {"action": "light the lantern"}, "> alice lights the lantern."),
        ("say", {"words": "Who hums there?"}, '> alice says "Who hums there?"'),
        ("story", {"text": "A heron lifts from the reeds."}, "A heron lifts from the reeds."),
        ("continue", {}, "⏩ *alice lets the story go on.*"),
    ],
)
async def test_each_action_streams_its_narration(env, fake_model, command, options, action_line):
    thread = await env.start_thread()
    reply = "The reeds go quiet. Then, softly, the humming starts again, closer now."
    fake_model.queue(Reply(text=reply, delay=0.01))
    record = await env.fake.slash(env.alice, thread, command, **options)
    await env.done()
    assert env.fake.message(record.original_message_id).content == action_line
    narration = env.narration(thread)
    assert narration[-1] == reply
    final = env.fake.last_message(thread)
    assert final.edits, "the narration was streamed by edits, not sent whole"
    # Only the newest turn carries the buttons.
    assert [m.buttons != [] for m in env.fake.messages(thread) if not m.is_response] == [
        False,
        True,
    ]


async def test_a_long_narration_is_split_across_messages_in_order(env, fake_model):
    thread = await env.start_thread()
    paragraphs = [
        f"Paragraph {n}: " + " ".join(f"word{n}-{i}" for i in range(60)) + "." for n in range(12)
    ]
    text = "\n\n".join(paragraphs)
    assert len(text) > 4000
    fake_model.queue(Reply(text=text))
    await env.fake.slash(env.alice, thread, "do", action="listen")
    await env.done()
    pieces = env.narration(thread)[1:]
    assert len(pieces) >= 3
    assert all(len(p) <= 2000 for p in pieces)
    assert " ".join(" ".join(pieces).split()) == " ".join(text.split())


async def test_two_players_at_once_are_queued_and_played_in_order(env, fake_model):
    thread = await env.start_thread()
    fake_model.queue(
        Reply(text="Alice's lantern flares blue and the humming stops.", delay=0.03),
        "Bob's shout rolls over the marsh.",
    )
    first, second = await asyncio.gather(
        env.fake.slash(env.alice, thread, "do", action="raise the lantern"),
        env.fake.slash(env.bob, thread, "say", words="Show yourself!"),
    )
    # The second action's first answer, once the bot has written one: a fixed wait is too short
    # on a busy machine, where the deferred response is still empty.
    queued = ""
    for _ in range(100):
        if queued := env.fake.message(second.original_message_id).content:
            break
        await asyncio.sleep(0.05)
    await env.done()
    assert queued.startswith("⏳ Queued behind 1 turn") or queued == '> bob says "Show yourself!"'
    assert env.narration(thread)[-2:] == [
        "Alice's lantern flares blue and the humming stops.",
        "Bob's shout rolls over the marsh.",
    ]
    assert env.fake.message(second.original_message_id).content == '> bob says "Show yourself!"'


async def test_a_failed_turn_offers_retry_and_saves_nothing(env, fake_model):
    thread = await env.start_thread()
    fake_model.queue(Reply(fault="500"), "The lantern catches at last.")
    record = await env.fake.slash(env.alice, thread, "do", action="light the lantern")
    await env.done()
    response = env.fake.message(record.original_message_id)
    assert "internal error" in response.content
    assert [label for label, _, _ in response.buttons] == ["Retry"]
    await env.fake.press(env.alice, response.id, label="Retry")
    await env.done()
    assert env.narration(thread)[-1] == "The lantern catches at last."


async def test_a_double_click_plays_once_and_the_second_press_is_refused(env, fake_model):
    thread = await env.start_thread()
    opening = env.fake.last_message(thread)
    fake_model.queue(Reply(text="The road winds on.", delay=0.02), "A second turn.")
    first, second = await asyncio.gather(
        env.fake.press(env.alice, opening.id, label="Continue"),
        env.fake.press(env.bob, opening.id, label="Continue"),
    )
    await env.done()
    # The refused press's public "thinking…" goes; its answer is for the presser alone.
    refused, played = sorted(
        (first, second), key=lambda r: not env.fake.message(r.original_message_id).deleted
    )
    assert env.fake.message(played.original_message_id).content in (
        "⏩ *alice lets the story go on.*",
        "⏩ *bob lets the story go on.*",
    )
    answer = env.fake.message(refused.followups[-1])
    assert answer.content == "⚠ The story has moved on since that button was drawn."
    assert answer.visible_to == refused.user_id
    assert env.narration(thread)[-1] == "The road winds on."
    assert len(fake_model.requests) == 1


async def test_a_button_under_an_old_turn_is_refused_privately(env, fake_model):
    thread = await env.start_thread()
    opening = env.fake.last_message(thread)
    # The bot does not know which message carried the buttons (shown before it kept that):
    # the old one keeps its Continue button after the next turn.
    await forget_where_buttons_are(env.bot.services.db)
    fake_model.queue("The road winds on.")
    await env.fake.slash(env.alice, thread, "continue")
    await env.done()
    press = await env.fake.press(env.bob, opening.id, label="Continue")
    await env.done()
    assert press.ephemeral
    assert "moved on" in env.fake.message(press.original_message_id).content
    assert env.narration(thread)[-1] == "The road winds on."


async def test_acting_where_nothing_runs_is_answered_privately(env):
    record = await env.fake.slash(env.bob, env.channel, "do", action="dance")
    # Acknowledged before the database is asked, privately: a server's text channel holds
    # adventures only in its threads. The answer follows.
    assert record.ephemeral
    answer = await answered(env, record)
    assert "Start one with `/start`" in answer.content and answer.visible_to == env.bob


async def test_help_fits_one_screen_and_its_topics_name_every_command(env):
    record = await env.fake.slash(env.bob, env.channel, "help")
    (page,) = env.fake.message(record.original_message_id).embeds
    assert record.ephemeral and page["title"] == OVERVIEW_TITLE
    assert page["description"] == overview(env.bot.services.provider)
    # One screen: about twenty lines, the topics named at its end.
    assert len(page["description"].splitlines()) <= 22
    assert all(f"`{key}`" in page["description"] for key in TOPICS)
    pages = [page["description"]]
    for choice in TOPIC_CHOICES:
        record = await env.fake.slash(env.bob, env.channel, "help", topic=choice.value)
        (page,) = env.fake.message(record.original_message_id).embeds
        assert record.ephemeral and page["title"] == TOPICS[choice.value].title
        assert page["description"] == topic_text(choice.value, env.bot.services.provider)
        pages.append(page["description"])
    guide = "\n".join(pages)
    # Every command the bot registers has its line in the overview or a topic (but /help,
    # being read).
    missing = [
        c.name
        for c in env.bot.tree.get_commands()
        if f"/{c.name}" not in guide and c.name != "help"
    ]
    assert missing == []
    assert "/adventure list|resume|end" in guide
    # Whole, with the note on the embedded model too: an embed's description holds 4,096
    # characters, a message's embeds 6,000 together with their titles (the stand-in refuses
    # more), and the content guard would cut a longer page short. An option has at most 25
    # choices, each named in at most 100 characters.
    embedded = LocalLlamaProvider()
    shown = [(OVERVIEW_TITLE, overview(embedded))]
    shown += [(topic.title, topic_text(key, embedded)) for key, topic in TOPICS.items()]
    assert all(len(text) <= EMBED_DESCRIPTION_MAX for _, text in shown)
    assert all(len(title) + len(text) <= EMBEDS_TOTAL_MAX for title, text in shown)
    assert len(TOPIC_CHOICES) <= 25 and all(len(c.name) <= 100 for c in TOPIC_CHOICES)


async def test_help_names_the_embedded_model_only_while_it_runs(env):
    """What the embedded model is, how slow its first turn, and the one line to a real model:
    in the overview and the models topic while the operator runs it, and only then."""
    embedded = LocalLlamaProvider()
    for text in (overview(embedded), topic_text("models", embedded)):
        assert EMBEDDED_MODEL_NOTE in text
    note = EMBEDDED_MODEL_NOTE
    assert "SmolLM2 (135M parameters)" in note and "30–50 s on two cores" in note
    assert "CAMPFIRE_MODEL_URL=http://localhost:11434/v1 CAMPFIRE_MODEL_NAME=" in note
    assert len(overview(embedded).splitlines()) <= 22
    # Another model: the operator's endpoint (this bot's), or a GGUF file of the operator's.
    record = await env.fake.slash(env.bob, env.channel, "help", topic="models")
    (page,) = env.fake.message(record.original_message_id).embeds
    assert "/model set url: model: [key:]" in page["description"]
    for provider in (env.bot.services.provider, LocalLlamaProvider(Path("their-own.gguf"))):
        assert "SmolLM2" not in overview(provider) + topic_text("models", provider)


async def test_a_turn_cut_off_by_a_dead_process_shows_as_interrupted(env, fake_model):
    from datetime import timedelta

    from engine.storage.models import utcnow
    from tests.helpers import leave_dead_turn

    thread = await env.start_thread()
    adventure = await env.bot.services.play.adventure_in(thread)
    # A process died mid-turn a while ago; its lease has expired.
    await leave_dead_turn(
        env.bot.services.db,
        adventure.adventure_id,
        request_id=77,
        user_id=env.alice,
        action={"type": "do", "text": "cross the bridge"},
        clock=lambda: utcnow() - timedelta(minutes=5),
    )

    fake_model.queue("Bob waits by the water.", "You cross the bridge at last.")
    await env.fake.slash(env.bob, thread, "do", action="wait")
    await env.done()
    notice = next(m for m in env.fake.messages(thread) if "interrupted" in m.content)
    assert "“cross the bridge”" in notice.content
    assert env.narration(thread)[-1] == "Bob waits by the water."

    await env.fake.press(env.alice, notice.id, label="Retry")
    await env.done()
    assert env.narration(thread)[-1] == "You cross the bridge at last."


async def test_sync_registers_the_commands_and_start_does_not(env):
    # Nothing was synced by starting the bot.
    assert env.fake.commands == {}
    synced = await env.bot.tree.sync(guild=None)
    names = sorted(command.name for command in synced)
    assert names == [
        "adventure",
        "branch",
        "card",
        "chapters",
        "character",
        "continue",
        "do",
        "edit",
        "essentials",
        "help",
        "host",
        "insights",
        "instructions",
        "join",
        "knowledge",
        "leave",
        "memory",
        "model",
        "narrative",
        "note",
        "operator",
        "party",
        "profile",
        "recap",
        "redo",
        "retry",
        "savepoint",
        "say",
        "scenario",
        "script",
        "server",
        "start",
        "state",
        "story",
        "summary",
        "tree",
        "undo",
        "usage",
    ]
    assert sorted(c["name"] for c in env.fake.commands[None]) == names
    adventure = next(c for c in env.fake.commands[None] if c["name"] == "adventure")
    assert sorted(o["name"] for o in adventure["options"]) == [
        "end",
        "export",
        "import",
        "list",
        "resume",
        "settings",
    ]


async def test_the_whole_command_tree_meets_discords_command_schema(env):
    # Registered as `python -m bot sync` does, globally and copied to one server: the stand-in
    # checks every definition as Discord does (names, descriptions, option order and counts,
    # choices, nesting, 8,000 characters a command, permissions, contexts) and refuses a
    # broken one with 50035, which would fail the sync here.
    synced = await env.bot.tree.sync()
    server = discord.Object(env.guild)
    env.bot.tree.copy_global_to(guild=server)
    in_server = await env.bot.tree.sync(guild=server)
    assert sorted(c.name for c in in_server) == sorted(c.name for c in synced)
    assert len(env.fake.commands[None]) == len(env.fake.commands[env.guild]) == len(synced)
    assert env.fake.refused == []


async def test_start_where_a_story_runs_asks_first_and_keeps_it_unless_confirmed(env):
    dm = env.fake.dm_channel(env.bob)
    await env.fake.slash(env.bob, dm, "start", scenario="lantern")
    await env.done()
    running = await env.bot.services.play.adventure_in(dm)
    asked = await env.fake.slash(env.bob, dm, "start")
    await env.done()
    confirm = env.fake.message(asked.original_message_id)
    assert confirm.visible_to == env.bob
    assert "**The Lantern Road** is running here" in confirm.content
    assert [label for label, _, _ in confirm.buttons] == ["Start anew", "Keep playing"]
    kept = await env.fake.press(env.bob, confirm.id, label="Keep playing")
    await env.done()
    assert "Nothing changed" in env.fake.message(confirm.id).content
    assert kept.failed is None
    assert await env.bot.services.play.adventure_in(dm) == running
    await env.start_anew(env.bob, dm)
    assert await env.bot.services.play.adventure_in(dm) not in (running, None)


async def test_sync_runs_beside_a_running_bot(env, tmp_path, capsys):
    """`python -m bot sync` registers the commands without starting the bot's services: beside
    a running bot it binds no metrics port and opens no database (a sync that started them
    failed there with "could not listen … Is another process using it?")."""
    running = env.bot.settings
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    settings = running.model_copy(
        update={
            "discord_token": SecretStr("standin-bot-token"),
            "metrics_port": busy.getsockname()[1],
            "metrics_host": "127.0.0.1",
            "database_url": f"sqlite+aiosqlite:///{tmp_path / 'missing' / 'none.db'}",
        }
    )
    try:
        await _sync(settings, None)
    finally:
        busy.close()
    assert "Synced" in capsys.readouterr().out
    assert "do" in {command["name"] for command in env.fake.commands[None]}
    assert not (tmp_path / "missing").exists()


async def test_a_sync_past_discords_daily_command_creations_says_so_at_once(env, capsys):
    """30034 comes as a 429 with Discord's rate-limit headers and a retry hours away: the sync
    raises at once with what happened, rather than sleeping for hours (JDA issue 2544)."""
    settings = env.bot.settings.model_copy(
        update={"discord_token": SecretStr("standin-bot-token"), "metrics_port": None}
    )
    now = env.fake.clock()
    env.fake._command_routes.command_creates[None] = [now - 60] * DAILY_COMMAND_CREATES
    started = time.perf_counter()
    with pytest.raises(ConfigError, match="Discord allows 200 new commands a day") as refused:
        await _sync(settings, None)
    assert time.perf_counter() - started < 10
    assert "try again in about 24.0 hours" in str(refused.value)
    env.expect(30034)


async def test_a_server_sync_beside_global_commands_warns_and_can_clear_them(env, capsys):
    """A server's own commands show beside the global ones: each twice. `sync --guild` says
    so, and `--clear-global` leaves that server alone with them."""
    settings = env.bot.settings.model_copy(
        update={"discord_token": SecretStr("standin-bot-token"), "metrics_port": None}
    )
    await _sync(settings, None)
    await _sync(settings, env.guild)
    assert "shows each command twice" in capsys.readouterr().out
    await _sync(settings, env.guild, clear_global=True)
    assert "Removed the global commands" in capsys.readouterr().out
    assert env.fake.commands[None] == [] and env.fake.commands[env.guild]
