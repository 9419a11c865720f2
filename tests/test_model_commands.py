"""/model through Discord: a server's managers choose the model its adventures use, a player
chooses the model of their own DM adventures; the key is never shown again (only how it ends),
never in a message, a log line (DEBUG included), an export or Insights. Real discord.py over
the local stand-in; two real fake model servers (the operator's and the chosen one), on both
databases.

The chosen model server listens on 127.0.0.1, so these bots run with
CAMPFIRE_ALLOW_PRIVATE_ENDPOINTS (a self-hoster's switch); the address rule itself is
``tests/test_endpoint_policy.py``'s, and the refusal without the switch is tested here too."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest
from sqlalchemy import select
from sqlmodel import col

from engine.storage.limit_models import TokenUse
from engine.storage.models import Server, UserModel
from tests.discord_env import DiscordEnv, answered, campfire_on_standin
from tests.fakes.openai_server import FakeModelServer, Reply

KEY = "sk-live-9d3b7c1e4f2a"
OTHER_KEY = "sk-bob-own-0c0ffee7b1d9"


@pytest.fixture
def own_model() -> Iterator[FakeModelServer]:
    with FakeModelServer(model="own-model", api_key=KEY) as server:
        yield server


async def said(env: DiscordEnv, user: int, place: int, command: str, /, **options) -> str:
    """The private answer to a command."""
    record = await env.fake.slash(user, place, command, **options)
    await env.done()
    message = await answered(env, record)
    assert message.visible_to == user, f"shown to others: {message.content!r}"
    return message.content


def everything_shown(env: DiscordEnv) -> str:
    """Every message, edit, embed and file the bot ever sent, to anyone."""
    parts = []
    for message in env.fake.world.messages_by_id.values():
        parts.append(message.content)
        parts.extend(text for _, text in message.edits)
        parts.append(json.dumps(message.embeds))
        parts.extend(a.content.decode("utf-8", "replace") for a in message.attachments)
    return "\n".join(parts)


def chat_requests(server: FakeModelServer) -> int:
    return sum(1 for entry in server.requests if "messages" in json.dumps(entry))


async def test_a_manager_sets_the_servers_model_and_the_key_never_shows_again(
    tmp_path, fake_model, own_model, caplog, database_url
):
    async with campfire_on_standin(
        tmp_path,
        fake_model,
        caplog,
        database_url,
        log_level=logging.DEBUG,
        allow_private_endpoints=True,
    ) as env:
        answer = await said(
            env,
            env.alice,
            env.channel,
            "model set",
            url=own_model.base_url,
            model="own-model",
            key=KEY,
        )
        assert "own-model" in answer and "ends in …4f2a" in answer

        # Anyone may ask which model is used; nobody sees more of the key than its end.
        shown = await said(env, env.bob, env.channel, "model show")
        assert "own-model" in shown and "API key: set, ends in …4f2a" in shown

        # The server's adventure narrates with the server's model, the key sent to it.
        thread = await env.start_thread(host=env.bob)
        own_model.queue("The server's own narrator answers.")
        await env.fake.slash(env.bob, thread, "do", action="listen at the door")
        await env.done()
        assert env.narration(thread)[-1].startswith("The server's own narrator answers.")
        assert chat_requests(own_model) == 1 and chat_requests(fake_model) == 0

        # Nor in Insights, nor in the adventure's file.
        await said(env, env.bob, thread, "insights")
        await said(env, env.bob, thread, "adventure export")
        assert any(m.attachments for m in env.fake.world.messages_by_id.values())

        async with env.bot.services.db.session() as session:
            stored = await session.scalar(
                select(col(Server.model_api_key_encrypted)).where(col(Server.id) == env.guild)
            )
        assert stored and KEY not in stored  # encrypted at rest

    assert KEY not in everything_shown(env)
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "own-model" in logged or "WebSocket Event" in logged  # DEBUG lines were made
    assert KEY not in logged


async def test_a_member_who_does_not_manage_the_server_is_refused(
    tmp_path, fake_model, own_model, caplog, database_url
):
    async with campfire_on_standin(
        tmp_path, fake_model, caplog, database_url, allow_private_endpoints=True
    ) as env:
        answer = await said(
            env,
            env.bob,
            env.channel,
            "model set",
            url=own_model.base_url,
            model="own-model",
            key=KEY,
        )
        assert "Only members with the Manage Server permission" in answer
        assert "nothing was changed" in answer
        answer = await said(env, env.bob, env.channel, "model clear")
        assert "Only members with the Manage Server permission" in answer
        async with env.bot.services.db.session() as session:
            server = await session.get(Server, env.guild)
        assert server is None or server.model_url is None
        shown = await said(env, env.bob, env.channel, "model show")
        assert "no model of its own" in shown
    assert KEY not in everything_shown(env)


async def test_a_player_chooses_the_model_of_their_own_dm_adventures_alone(
    tmp_path, fake_model, own_model, caplog, database_url
):
    async with campfire_on_standin(
        tmp_path, fake_model, caplog, database_url, allow_private_endpoints=True
    ) as env:
        own_model.api_key = OTHER_KEY
        bob_dm = env.fake.dm_channel(env.bob)
        answer = await said(
            env,
            env.bob,
            bob_dm,
            "model set",
            url=own_model.base_url,
            model="own-model",
            key=OTHER_KEY,
        )
        assert "Your own adventures now use" in answer and "ends in …b1d9" in answer

        # Another player's key is never visible to anyone else: alice has none of her own.
        alice_dm = env.fake.dm_channel(env.alice)
        shown = await said(env, env.alice, alice_dm, "model show")
        assert "You have no model of your own" in shown and "own-model" not in shown

        # Bob's solo adventure uses his model; a server adventure he hosts does not.
        await env.fake.slash(env.bob, bob_dm, "start")
        await env.done()
        own_model.queue("Your own model narrates your solo story.")
        await env.fake.slash(env.bob, bob_dm, "do", action="look around")
        await env.done()
        assert chat_requests(own_model) == 1
        thread = await env.start_thread(host=env.bob)
        fake_model.queue("The operator's model narrates the server's story.")
        await env.fake.slash(env.bob, thread, "do", action="look around")
        await env.done()
        assert chat_requests(own_model) == 1 and chat_requests(fake_model) == 1

        # Cleared: back to the operator's model, the key deleted.
        answer = await said(env, env.bob, bob_dm, "model clear")
        assert "operator's model again" in answer
        async with env.bot.services.db.session() as session:
            assert await session.get(UserModel, env.bob) is None
        fake_model.queue("The operator's model again.")
        await env.fake.slash(env.bob, bob_dm, "do", action="wait")
        await env.done()
        assert chat_requests(own_model) == 1 and chat_requests(fake_model) == 2
    assert OTHER_KEY not in everything_shown(env)


async def test_model_test_reports_success_or_the_providers_error(
    tmp_path, fake_model, own_model, caplog, database_url
):
    async with campfire_on_standin(
        tmp_path, fake_model, caplog, database_url, allow_private_endpoints=True
    ) as env:
        nothing = await said(env, env.alice, env.channel, "model test")
        assert "no model of its own" in nothing

        await said(
            env,
            env.alice,
            env.channel,
            "model set",
            url=own_model.base_url,
            model="own-model",
            key=KEY,
        )
        own_model.queue("ready")
        answer = await said(env, env.alice, env.channel, "model test")
        assert answer.startswith("✅ The model answered") and "ready" in answer

        # The server changed its key: the test says what the provider said, readably.
        own_model.api_key = "sk-rotated-elsewhere"
        answer = await said(env, env.alice, env.channel, "model test")
        assert answer.startswith("❌ The test request failed")
        assert "refused the API key (401)" in answer

        # A model name the server does not have.
        own_model.api_key = KEY
        await said(
            env, env.alice, env.channel, "model set", url=own_model.base_url, model="no-such"
        )
        answer = await said(env, env.alice, env.channel, "model test")
        assert "❌" in answer and "no-such" in answer
        # The key was kept (same URL, no new key given) and is still never shown.
        shown = await said(env, env.bob, env.channel, "model show")
        assert "ends in …4f2a" in shown
    assert KEY not in everything_shown(env)


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        (
            "http://169.254.169.254/v1",
            "169.254.169.254, a link-local address (where cloud metadata",
        ),
        ("http://localhost:11434/v1", "localhost resolves to"),
        ("http://[::1]/v1", "loopback"),
        ("http://10.0.0.8/v1", "private network"),
        ("ftp://models.example.com/v1", "Only http:// and https://"),
    ],
)
async def test_a_refused_endpoint_is_refused_with_the_reason_and_nothing_is_stored(
    env: DiscordEnv, url: str, reason: str
):
    answer = await said(env, env.alice, env.channel, "model set", url=url, model="x", key=KEY)
    assert answer.startswith("⚠") and reason in answer
    async with env.bot.services.db.session() as session:
        server = await session.get(Server, env.guild)
    assert server is None or server.model_url is None
    assert KEY not in everything_shown(env)


async def test_help_names_the_model_and_operator_commands(env: DiscordEnv):
    record = await env.fake.slash(env.bob, env.channel, "help", topic="models")
    guide = "\n".join(e["description"] for e in (await answered(env, record)).embeds)
    for command in (
        "/model set url: model: [key:]",
        "/model pick name:",
        "/model show|test|clear",
        "/operator",
    ):
        assert command in guide


async def test_players_are_never_told_where_the_operators_model_runs(env: DiscordEnv, fake_model):
    """The operator's endpoint is often an internal address: /model show, Insights and an
    error name its model alone."""
    host = fake_model.base_url.split("//")[1].split("/")[0]
    shown = await said(env, env.bob, env.channel, "model show")
    assert fake_model.model in shown and host not in shown
    thread = await env.start_thread()
    fake_model.queue(Reply(fault="500"))
    await env.fake.slash(env.bob, thread, "do", action="knock")
    await env.done()
    fake_model.queue("The door opens.")
    await env.fake.slash(env.bob, thread, "do", action="knock again")
    await env.done()
    await said(env, env.bob, thread, "insights")
    assert "the operator's address" in everything_shown(env)
    assert host not in everything_shown(env)


async def test_a_player_picks_one_of_the_models_the_operator_offers(
    tmp_path, fake_model, caplog, database_url
):
    """CAMPFIRE_MODEL_WHITELIST: the models players may pick on the operator's endpoint,
    offered by autocomplete; the operator's budget holds for them as for its default."""
    fake_model.other_models = ("qwen2.5",)
    async with campfire_on_standin(
        tmp_path, fake_model, caplog, database_url, model_whitelist=("qwen2.5",)
    ) as env:
        dm = env.fake.dm_channel(env.bob)
        refused = await said(env, env.bob, dm, "model pick", name="gpt-4o")
        assert "not a model the operator offers" in refused and "`qwen2.5`" in refused
        picked = await said(env, env.bob, dm, "model pick", name="qwen2.5")
        assert "**qwen2.5**" in picked and "operator" in picked
        fake_model.queue("The picked model answers.")
        await env.fake.slash(env.bob, dm, "start")
        await env.done()
        await env.fake.slash(env.bob, dm, "do", action="look")
        await env.done()
        asked = [r for r in fake_model.requests if "messages" in r]
        assert asked[-1]["model"] == "qwen2.5"
        assert env.narration(dm)[-1] == "The picked model answers."
        shown = await said(env, env.bob, dm, "usage")
        assert "You: 0 of" not in shown and "1 turn" in shown  # the operator's budget

        # A test of the picked model is the operator's to pay for too: counted.
        used = await tokens_used(env, env.bob)
        tested = await said(env, env.bob, dm, "model test")
        assert tested.startswith("✅")
        assert await tokens_used(env, env.bob) > used

        # Clearing a pick says what it was, and nothing of a URL or key.
        cleared = await said(env, env.bob, dm, "model clear")
        assert (
            cleared
            == "Your adventures use the operator's default model again instead of **qwen2.5**."
        )


async def tokens_used(env, user: int) -> int:
    async with env.bot.services.db.session() as session:
        rows = await session.scalars(
            select(TokenUse).where(TokenUse.scope == "user", TokenUse.subject_id == user)
        )
        return sum(row.tokens for row in rows)
