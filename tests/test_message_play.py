"""Playing by plain messages (``cogs.message_play``): through the stand-in, whose gateway sends
a message's content only with the Message Content intent, in DMs, and where the bot is
mentioned, as Discord does."""

from __future__ import annotations

import pytest

from bot.standin.permissions import P_READ_HISTORY, P_SEND_IN_THREADS
from bot.standin.records import InteractionRecord
from engine.play.message_actions import message_action
from engine.story.actions import ActionType
from tests.discord_env import DiscordEnv, campfire_on_standin
from tests.fakes.openai_server import FakeModelServer


async def _thread_with_message_play(env: DiscordEnv, on: str = "on") -> int:
    thread = await env.start_thread()
    record = await env.fake.slash(env.alice, thread, "adventure settings", messages=on)
    await env.done()
    assert record.failed is None
    return thread


async def _say(env: DiscordEnv, user: int, channel: int, text: str) -> None:
    await env.fake.user_message(user, channel, text)
    await env.done()


def _me(env: DiscordEnv) -> int:
    me = env.bot.user
    assert me is not None
    return me.id


def _answer(env: DiscordEnv, record: InteractionRecord) -> str:
    assert record.original_message_id is not None
    return env.fake.message(record.original_message_id).content


def _prompts(fake_model: FakeModelServer) -> str:
    return str(fake_model.requests)


async def test_with_the_intent_plain_messages_play_by_the_convention(
    intent_env: DiscordEnv, fake_model
):
    env = intent_env
    assert env.bot.intents.message_content
    thread = await _thread_with_message_play(env)
    fake_model.queue("The door creaks open.", "Nobody answers.", "Rain falls.")
    await _say(env, env.bob, thread, "open the door")
    await _say(env, env.bob, thread, '"Who goes there?"')
    await _say(env, env.alice, thread, "+ A storm rolls in.")
    await _say(env, env.alice, thread, "// brb, getting tea")
    await _say(env, env.bob, thread, "(is this thing on?)")
    assert len(fake_model.requests) == 3
    prompts = _prompts(fake_model)
    assert "> bob opens the door." in prompts
    assert "> bob says" in prompts and "Who goes there?" in prompts
    assert "A storm rolls in." in prompts
    assert "brb" not in prompts and "is this thing on" not in prompts
    narration = env.narration(thread)
    assert narration[-3:] == ["The door creaks open.", "Nobody answers.", "Rain falls."]
    # The newest narration carries the buttons, as after /do.
    bots = [m for m in env.fake.messages(thread) if m.author_id == _me(env)]
    assert bots[-1].content == "Rain falls." and bots[-1].buttons


async def test_message_play_off_leaves_messages_alone(intent_env: DiscordEnv, fake_model):
    env = intent_env
    thread = await env.start_thread()  # off until the host turns it on
    await _say(env, env.bob, thread, "open the door")
    assert fake_model.requests == []
    assert env.narration(thread)[1:] == []
    # On, then off again.
    record = await env.fake.slash(env.alice, thread, "adventure settings", messages="on")
    await env.done()
    assert "by plain messages: **on**" in (_answer(env, record))
    fake_model.queue("The door creaks open.")
    await _say(env, env.bob, thread, "open the door")
    assert len(fake_model.requests) == 1
    await env.fake.slash(env.alice, thread, "adventure settings", messages="off")
    await env.done()
    await _say(env, env.bob, thread, "open the window")
    assert len(fake_model.requests) == 1


async def test_only_the_host_and_managers_turn_it_on(env: DiscordEnv, fake_model):
    thread = await env.start_thread()
    record = await env.fake.slash(env.bob, thread, "adventure settings", messages="on")
    await env.done()
    assert record.failed is None
    refusal = [m for m in env.fake.messages(thread) if m.interaction_id == record.id]
    assert any("host" in m.content for m in refusal)
    assert await env.bot.services.generation_settings.message_play_here(thread) is False


async def test_without_the_intent_only_a_mention_plays(env: DiscordEnv, fake_model):
    assert not env.bot.intents.message_content
    thread = await _thread_with_message_play(env)
    await _say(env, env.bob, thread, "open the door")
    assert fake_model.requests == []
    fake_model.queue("The door creaks open.")
    await _say(env, env.bob, thread, f"<@{_me(env)}> open the door")
    assert len(fake_model.requests) == 1
    assert "> bob opens the door." in _prompts(fake_model)
    assert env.narration(thread)[-1] == "The door creaks open."


async def test_in_a_dm_messages_play_without_the_intent(env: DiscordEnv, fake_model):
    # Discord sends the content of DMs to the bot whatever its intents.
    dm = env.fake.dm_channel(env.bob)
    await env.fake.slash(env.bob, dm, "start", scenario="lantern")
    await env.done()
    await env.fake.slash(env.bob, dm, "adventure settings", messages="on")
    await env.done()
    fake_model.queue("The door creaks open.")
    await _say(env, env.bob, dm, "open the door")
    assert "> You open the door." in _prompts(fake_model)
    assert env.narration(dm)[-1] == "The door creaks open."


async def test_a_mention_where_no_adventure_runs_is_answered(env: DiscordEnv, fake_model):
    await _say(env, env.bob, env.channel, f"<@{_me(env)}> open the door")
    (answer,) = env.narration(env.channel)
    assert "no adventure running here" in answer
    assert fake_model.requests == []


async def test_a_refusal_names_the_player_without_replying(env: DiscordEnv, fake_model):
    """Not a reply: a reply takes Read Message History, which the invite does not ask for
    (discord-api-docs, Message, Create Message: Limitations; the stand-in enforces it)."""
    thread = await _thread_with_message_play(env)
    env.fake.set_permissions(env.channel, deny=P_READ_HISTORY)
    record = await env.fake.slash(env.alice, thread, "host lock")
    await env.done()
    assert record.failed is None
    await _say(env, env.bob, thread, f"<@{_me(env)}> open the door")
    assert fake_model.requests == []
    answer = env.fake.last_message(thread)
    assert answer.author_id == _me(env) and "⚠" in answer.content
    assert answer.content.startswith(f"<@{env.bob}> ")


async def test_a_message_where_the_bot_cannot_post_plays_nothing(env: DiscordEnv, fake_model):
    """Message play's preflight: no turn is played and stored that could not be shown."""
    thread = await _thread_with_message_play(env)
    env.fake.set_permissions(env.channel, deny=P_SEND_IN_THREADS)
    await _say(env, env.bob, thread, f"<@{_me(env)}> open the door")
    assert fake_model.requests == []


async def test_a_message_delivered_twice_plays_once(intent_env: DiscordEnv, fake_model):
    env = intent_env
    thread = await _thread_with_message_play(env)
    fake_model.queue("The door creaks open.", "Something else.")
    message = await env.fake.user_message(env.bob, thread, "open the door")
    await env.done()
    # Discord redelivers the event (a resumed session replays what it missed).
    await env.fake.gateway.dispatch("MESSAGE_CREATE", env.fake.world.message_payload(message))
    await env.done()
    assert len(fake_model.requests) == 1
    assert env.narration(thread)[-1] == "The door creaks open."


async def test_the_bots_own_messages_never_play(intent_env: DiscordEnv, fake_model):
    env = intent_env
    thread = await _thread_with_message_play(env)
    # The bot's narration and replies arrive as messages too; none of them plays.
    fake_model.queue("The door creaks open. Open the door, it says.")
    await _say(env, env.bob, thread, "open the door")
    assert len(fake_model.requests) == 1


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("open the door", (ActionType.DO, "open the door")),
        ('"Who goes there?"', (ActionType.SAY, "Who goes there?")),
        ("“Hello, friend.”", (ActionType.SAY, "Hello, friend.")),
        ('"open" the door', (ActionType.DO, '"open" the door')),
        ("+ A storm rolls in.", (ActionType.STORY, "A storm rolls in.")),
        ("+", None),
        ("// brb", None),
        ("(ooc: lunch)", None),
        ("   ", None),
    ],
)
def test_the_message_convention(text: str, expected: tuple[ActionType, str] | None):
    assert message_action(text) == expected


@pytest.fixture
async def no_message_env(tmp_path, fake_model, caplog, database_url):
    """Campfire with ``CAMPFIRE_MESSAGE_PLAY=false``."""
    async with campfire_on_standin(
        tmp_path, fake_model, caplog, database_url, message_play=False
    ) as environment:
        yield environment


async def test_an_operator_who_switched_message_play_off_is_sent_no_messages(
    no_message_env: DiscordEnv, fake_model
):
    env = no_message_env
    intents = env.bot.intents
    assert not (intents.guild_messages or intents.dm_messages or intents.message_content)
    thread = await env.start_thread()
    # An adventure may not switch it on, and its settings say why.
    record = await env.fake.slash(env.alice, thread, "adventure settings", messages="on")
    await env.done()
    assert "switched off on this bot by its operator" in _answer(env, record)
    assert await env.bot.services.generation_settings.message_play_here(thread) is False
    shown = await env.fake.slash(env.alice, thread, "adventure settings")
    await env.done()
    assert "off on this bot" in _answer(env, shown)
    # A mention, which Discord would send with its content to a bot with the intents, is not
    # sent at all: nothing plays, nothing answers.
    before = len(env.fake.messages(thread))
    await _say(env, env.bob, thread, f"<@{_me(env)}> open the door")
    dm = env.fake.dm_channel(env.bob)
    await _say(env, env.bob, dm, "open the door")
    assert fake_model.requests == []
    assert len(env.fake.messages(thread)) == before + 1  # bob's own message
