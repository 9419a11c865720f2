"""/operator through Discord: the bot's owner (and CAMPFIRE_OPERATOR_IDS) alone reads the
status and blocks users and servers; a blocked user, or anyone in a blocked server, is refused
politely on every command and button, and the operator never is. Real discord.py over the
local stand-in, the fake model server behind the bot, on both databases. And the start-up
refusal without the secret key when one is required."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from bot.__main__ import main
from engine.storage.models import Block, utcnow
from tests.discord_env import DiscordEnv, answered, campfire_on_standin
from tests.fakes.openai_server import Reply
from tests.test_discord_rounds import act, party_of_three

BLOCKED = "the operator of this bot has blocked your use of it"
SERVER_BLOCKED = "the operator of this bot has blocked its use in this server"


def owner_of(env: DiscordEnv) -> int:
    """The application's owner, as the stand-in tells discord.py (its first server's owner)."""
    return env.fake.world.guilds[env.guild].owner_id


async def said(env: DiscordEnv, user: int, place: int, command: str, /, **options) -> str:
    record = await env.fake.slash(user, place, command, **options)
    await env.done()
    message = await answered(env, record)
    assert message.visible_to == user, f"shown to others: {message.content!r}"
    return message.content


async def test_operator_commands_are_refused_to_everyone_else(env: DiscordEnv):
    for user in (env.alice, env.bob):  # alice manages the server: still not the operator
        for command, options in (
            ("operator status", {}),
            ("operator block", {"user": env.bob}),
            ("operator unblock", {"user": env.bob}),
        ):
            answer = await said(env, user, env.channel, command, **options)
            assert answer == "⚠ Only the operator who runs this bot can use /operator."
    # Nothing was blocked: bob still plays.
    assert "no adventure running" in await said(env, env.bob, env.channel, "insights")


async def test_the_owner_reads_the_status(env: DiscordEnv, fake_model):
    thread = await env.start_thread(host=env.bob)
    fake_model.queue("A turn for the count.")
    await env.fake.slash(env.bob, thread, "do", action="count the stars")
    await env.done()
    owner = owner_of(env)
    answer = await said(env, owner, env.fake.dm_channel(owner), "operator status")
    assert "**Campfire status**" in answer
    assert "Servers: 1" in answer
    assert "Adventures running: 1 (1 played today)" in answer
    assert "Turns today (UTC): 1" in answer
    assert "Queue here: 0 running, 0 waiting" in answer
    assert "Blocked: 0 users, 0 servers" in answer


async def test_a_blocked_user_is_refused_every_command_and_button_until_unblocked(
    env: DiscordEnv, fake_model
):
    thread = await env.start_thread(host=env.alice)
    fake_model.queue("The first turn.")
    await env.fake.slash(env.bob, thread, "do", action="wave")
    await env.done()
    owner = owner_of(env)
    answer = await said(env, owner, env.channel, "operator block", user=env.bob, reason="spam")
    assert answer.startswith("⛔ Blocked") and f"<@{env.bob}>" in answer
    asked = len(fake_model.requests)

    for command, options in (("do", {"action": "wave again"}), ("help", {}), ("recap", {})):
        answer = await said(env, env.bob, thread, command, **options)
        assert BLOCKED in answer and "Nothing was changed" in answer
    narration = [m for m in env.fake.messages(thread) if m.buttons][-1]
    press = await env.fake.press(env.bob, narration.id, label="Continue")
    await env.done()
    assert press.ephemeral and press.original_message_id is not None
    assert BLOCKED in env.fake.message(press.original_message_id).content
    # In a DM too: a user block is everywhere.
    answer = await said(env, env.bob, env.fake.dm_channel(env.bob), "start")
    assert BLOCKED in answer
    assert len(fake_model.requests) == asked  # nothing reached the model

    # Others play on; the block is stored, and shown in the status.
    assert "Blocked: 1 users, 0 servers" in await said(env, owner, env.channel, "operator status")
    answer = await said(env, owner, env.channel, "operator block", user=env.bob)
    assert "blocked already" in answer

    answer = await said(env, owner, env.channel, "operator unblock", user=env.bob)
    assert answer == f"Unblocked <@{env.bob}>."
    fake_model.queue("Welcome back.")
    record = await env.fake.slash(env.bob, thread, "do", action="wave again")
    await env.done()
    assert record.failed is None and env.narration(thread)[-1].startswith("Welcome back.")


async def test_a_blocked_server_refuses_everyone_there_but_the_operator(env: DiscordEnv):
    owner = owner_of(env)
    answer = await said(env, owner, env.channel, "operator block", server=str(env.guild))
    assert answer.startswith(f"⛔ Blocked server {env.guild}")
    for user in (env.alice, env.bob):
        assert SERVER_BLOCKED in await said(env, user, env.channel, "help")
    # Elsewhere (a DM) they are not refused; the operator is not refused there either.
    assert "no adventure running" in await said(
        env, env.bob, env.fake.dm_channel(env.bob), "insights"
    )
    assert "**Campfire status**" in await said(env, owner, env.channel, "operator status")
    answer = await said(env, owner, env.channel, "operator unblock", server=str(env.guild))
    assert answer == f"Unblocked server {env.guild}."
    assert SERVER_BLOCKED not in await said(env, env.bob, env.channel, "help")


async def test_a_user_named_in_the_operator_ids_is_an_operator(
    tmp_path, fake_model, caplog, database_url
):
    olive = 424_242_424_242_424_242

    def world(fake) -> None:
        fake.add_user("olive", user_id=olive)

    async with campfire_on_standin(
        tmp_path, fake_model, caplog, database_url, operator_ids=f"1,{olive}", world=world
    ) as env:
        answer = await said(env, olive, env.fake.dm_channel(olive), "operator status")
        assert "**Campfire status**" in answer
        answer = await said(env, env.alice, env.channel, "operator status")
        assert "Only the operator" in answer


@pytest.fixture
def clean_environment(monkeypatch, tmp_path) -> Path:
    for name in list(os.environ):
        if name.startswith("CAMPFIRE_") or name == "DISCORD_TOKEN":
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CAMPFIRE_DATA_DIR", str(tmp_path / "data"))
    return tmp_path / "data"


@pytest.mark.parametrize("argv", [[], ["console"]])
def test_the_bot_refuses_to_start_without_a_required_secret_key(
    clean_environment: Path, monkeypatch, capsys, argv: list[str]
):
    monkeypatch.setenv("CAMPFIRE_REQUIRE_SECRET_KEY", "true")
    monkeypatch.setenv("DISCORD_TOKEN", "not-a-real-token")
    assert main(argv) == 2
    error = capsys.readouterr().err
    assert "CAMPFIRE_SECRET_KEY" in error and "CAMPFIRE_REQUIRE_SECRET_KEY" in error
    # Nothing generated on disk instead.
    assert not (clean_environment / "secret.key").exists()


def test_a_required_secret_key_from_the_environment_is_used(clean_environment: Path, monkeypatch):
    from bot.config import load_settings

    monkeypatch.setenv("CAMPFIRE_REQUIRE_SECRET_KEY", "true")
    monkeypatch.setenv("CAMPFIRE_SECRET_KEY", "a hosted deployment's own secret")
    assert load_settings().resolve_secret_key() == b"a hosted deployment's own secret"
    assert not (clean_environment / "secret.key").exists()


async def test_a_form_opened_before_the_block_plays_nothing_when_sent_after(
    env: DiscordEnv, fake_model
):
    thread = await env.start_thread(host=env.alice)
    newest = [m for m in env.fake.messages(thread) if m.buttons][-1]
    opened = await env.fake.press(env.bob, newest.id, label="Do")
    await env.done()
    assert opened.modal is not None
    owner = owner_of(env)
    await said(env, owner, env.channel, "operator block", user=env.bob)
    asked = len(fake_model.requests)
    submitted = await env.fake.submit_modal(env.bob, opened, {"action": "draw my sword"})
    await env.done()
    refusal = await answered(env, submitted)
    assert refusal.visible_to == env.bob and BLOCKED in refusal.content
    assert len(fake_model.requests) == asked


async def test_a_blocked_users_plain_messages_play_nowhere(intent_env: DiscordEnv, fake_model):
    env = intent_env
    thread = await env.start_thread(host=env.alice)
    record = await env.fake.slash(env.alice, thread, "adventure settings", messages="on")
    await env.done()
    assert record.failed is None
    dm = env.fake.dm_channel(env.bob)
    fake_model.queue("Your own story begins.")
    await env.fake.slash(env.bob, dm, "start")
    await env.done()
    await said(env, owner_of(env), env.channel, "operator block", user=env.bob)
    asked = len(fake_model.requests)
    for place in (thread, dm):
        await env.fake.user_message(env.bob, place, "open the door")
        await env.done()
    assert len(fake_model.requests) == asked
    assert "opens the door" not in str(env.fake.messages(thread))


async def block_elsewhere(env: DiscordEnv, user: int) -> None:
    """A block made by another process: in the database, not in this process's copy (which
    reads it again only on its schedule)."""
    async with env.bot.services.db.transaction() as session:
        session.add(Block(kind="user", target_id=user, reason="", created_at=utcnow()))
    assert env.bot.services.blocks.is_blocked(user, None) == (False, False)


async def test_an_action_waiting_behind_a_turn_does_not_play_once_its_player_is_blocked(
    env: DiscordEnv, fake_model
):
    thread = await env.start_thread(host=env.alice)
    fake_model.queue(Reply(text="Alice's long turn.", delay=0.1), "Bob's turn.")
    alices = asyncio.create_task(env.fake.slash(env.alice, thread, "do", action="tell a tale"))
    await asyncio.sleep(0.3)  # alice's turn is being written: bob's waits behind it
    bobs = await env.fake.slash(env.bob, thread, "do", action="steal the map")
    await block_elsewhere(env, env.bob)
    await alices
    await env.done()
    assert BLOCKED in (await answered(env, bobs)).content
    assert "steal" not in str(fake_model.requests)


async def test_a_round_action_of_a_player_blocked_since_is_left_out(env: DiscordEnv, fake_model):
    thread, carol = await party_of_three(env, "rounds")
    fake_model.queue("The round, without bob.")
    await act(env, thread, env.bob, "do", action="steal the map")
    await act(env, thread, carol, "do", action="light a torch")
    await block_elsewhere(env, env.bob)
    await act(env, thread, env.alice, "do", action="open the gate")
    prompt = str(fake_model.requests[-1])
    assert "torch" in prompt and "gate" in prompt and "steal" not in prompt
    assert env.narration(thread)[-1] == "The round, without bob."
