"""The local Discord stand-in, driven by a real commands.Bot over real HTTP and WebSocket."""

from __future__ import annotations

import asyncio
import io
import re
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import aiohttp
import discord
import pytest
from discord import app_commands
from discord.ext import commands

from bot.standin import (
    INTERNAL_SERVER_ERROR,
    MISSING_PERMISSIONS,
    SERVICE_UNAVAILABLE,
    FakeDiscord,
    StandinFile,
)
from tests.standin.bare import on_standin

# -- the bot under test -----------------------------------------------------------------------


class Pager(discord.ui.DynamicItem[discord.ui.Button], template=r"pager:(?P<page>\d+)"):
    """A persistent button whose state lives in its custom_id."""

    def __init__(self, page: int) -> None:
        super().__init__(discord.ui.Button(label=f"Page {page}", custom_id=f"pager:{page}"))
        self.page = page

    @classmethod
    async def from_custom_id(
        cls, interaction: discord.Interaction, item: discord.ui.Button, match: re.Match[str]
    ) -> Pager:
        return cls(int(match["page"]))

    async def callback(self, interaction: discord.Interaction) -> None:
        nxt = self.page + 1
        view = discord.ui.View(timeout=None).add_item(Pager(nxt))
        await interaction.response.edit_message(content=f"page {nxt}", view=view)


class StoryModal(discord.ui.Modal, title="Write the opening"):
    opening = discord.ui.TextInput(label="Opening", custom_id="opening", max_length=4000)
    mood = discord.ui.Label(
        text="Mood", component=discord.ui.TextInput(custom_id="mood", required=False)
    )

    def __init__(self, bot: CampBot) -> None:
        super().__init__(custom_id="story-modal")
        self.bot = bot

    async def on_submit(self, interaction: discord.Interaction) -> None:
        mood = self.mood.component
        assert isinstance(mood, discord.ui.TextInput)
        self.bot.seen["modal"] = (self.opening.value, mood.value)
        await interaction.response.send_message(f"Opening saved: {self.opening.value}")


SCENARIOS = ["lantern", "lighthouse", "labyrinth", "desert"]


class CampBot(commands.Bot):
    def __init__(self) -> None:
        super().__init__(command_prefix="!", intents=discord.Intents.default())
        self.seen: dict[str, Any] = {}
        self.kept: dict[str, discord.Interaction] = {}
        tree = self.tree

        @self.listen("on_message")
        async def heard(message: discord.Message) -> None:
            if not message.author.bot:
                self.seen["message"] = (message.author.id, message.channel.id, message.content)

        @tree.command(name="start", description="Start an adventure")
        async def start(
            interaction: discord.Interaction,
            scenario: str,
            players: int = 1,
            file: discord.Attachment | None = None,
        ) -> None:
            self.seen["start"] = (scenario, players, file)
            await interaction.response.defer(thinking=True)
            text = f"{scenario} for {players}"
            extra: dict[str, Any] = {}
            if file is not None:
                data = await file.read()
                text += f" with {file.filename} ({len(data)} bytes)"
                extra["file"] = discord.File(io.BytesIO(data.upper()), filename="upper.txt")
            await interaction.followup.send(text, **extra)

        @start.autocomplete("scenario")
        async def start_scenario(
            interaction: discord.Interaction, current: str
        ) -> list[app_commands.Choice[str]]:
            return [
                app_commands.Choice(name=s.title(), value=s)
                for s in SCENARIOS
                if s.startswith(current)
            ]

        @tree.command(name="say", description="Say and revise")
        async def say(interaction: discord.Interaction, text: str) -> None:
            await interaction.response.send_message("on it", ephemeral=True)
            channel = interaction.channel
            assert isinstance(channel, discord.abc.Messageable)
            msg = await channel.send(text + "…")
            await msg.edit(content=text)

        @tree.command(name="think", description="Defer, then answer privately")
        async def think(interaction: discord.Interaction) -> None:
            await interaction.response.defer(ephemeral=True, thinking=True)
            await interaction.followup.send("a secret", ephemeral=True)

        @tree.command(name="panel", description="A pager")
        async def panel(interaction: discord.Interaction) -> None:
            view = discord.ui.View(timeout=None).add_item(Pager(1))
            await interaction.response.send_message("page 1", view=view)

        @tree.command(name="form", description="A modal")
        async def form(interaction: discord.Interaction) -> None:
            await interaction.response.send_modal(StoryModal(self))

        @tree.command(name="badform", description="A modal Discord refuses")
        async def badform(interaction: discord.Interaction) -> None:
            modal = discord.ui.Modal(title="T" * 46, custom_id="bad-modal")
            modal.add_item(discord.ui.TextInput(label="Long", custom_id="long", max_length=4000))
            try:
                await interaction.response.send_modal(modal)
            except discord.HTTPException as exc:
                self.seen["badform"] = exc
                await interaction.response.send_message("could not open the form")

        @tree.command(name="silent", description="Never answers")
        async def silent(interaction: discord.Interaction) -> None:
            self.seen["silent"] = True

        @tree.command(name="late", description="Defers and keeps the interaction")
        async def late(interaction: discord.Interaction) -> None:
            self.kept["late"] = interaction
            await interaction.response.defer()

        branch = app_commands.Group(name="branch", description="Story branches")

        @branch.command(name="new", description="New branch")
        async def branch_new(interaction: discord.Interaction, name: str) -> None:
            await interaction.response.send_message(f"branch {name}")

        tree.add_command(branch)

    async def setup_hook(self) -> None:
        self.add_dynamic_items(Pager)


# -- fixture -----------------------------------------------------------------------------------


@dataclass
class Env:
    bot: CampBot
    fake: FakeDiscord
    guild: int
    channel: int
    alice: int
    bob: int


@asynccontextmanager
async def camp_on_standin(caplog: pytest.LogCaptureFixture) -> AsyncIterator[Env]:
    """``CampBot`` on the stand-in (``tests.standin.bare``, with its checks at the end)."""
    async with on_standin(CampBot(), caplog) as place:
        bot = place.fake.client
        assert isinstance(bot, CampBot)
        yield Env(bot, place.fake, place.guild, place.channel, place.alice, place.bob)


@pytest.fixture
async def env(caplog: pytest.LogCaptureFixture) -> AsyncIterator[Env]:
    async with camp_on_standin(caplog) as environment:
        yield environment


# -- tests -------------------------------------------------------------------------------------


async def test_login_ready_and_guild_cache(env: Env) -> None:
    bot = env.bot
    assert bot.is_ready()
    assert bot.user is not None and bot.user.id == env.fake.world.bot_user.id
    assert bot.application_id == env.fake.world.application_id
    guild = bot.get_guild(env.guild)
    assert guild is not None and not guild.unavailable and guild.name == "Campfire Test"
    channel = bot.get_channel(env.channel)
    assert isinstance(channel, discord.TextChannel) and channel.name == "adventures"
    assert guild.me is not None

    later = env.fake.add_guild("Second")
    later_channel = env.fake.add_channel(env.guild, "later")
    await env.fake.flush()
    assert bot.get_guild(later) is not None
    assert isinstance(bot.get_channel(later_channel), discord.TextChannel)


async def test_slash_typed_options_and_attachments(env: Env) -> None:
    fake = env.fake
    rec = await fake.slash(
        env.alice,
        env.channel,
        "start",
        scenario="lantern",
        players=3,
        file=StandinFile("notes.txt", b"a quiet night"),
    )
    assert rec.failed is None and rec.response_type == 5
    await fake.settle()
    scenario, players, file = env.bot.seen["start"]
    assert (scenario, players) == ("lantern", 3)
    assert isinstance(file, discord.Attachment) and file.filename == "notes.txt"
    answer = fake.message(rec.followups[0])
    assert answer.id == rec.original_message_id  # the followup filled the "thinking" message
    assert answer.content == "lantern for 3 with notes.txt (13 bytes)"
    assert [a.filename for a in answer.attachments] == ["upper.txt"]
    assert answer.attachments[0].content == b"A QUIET NIGHT"

    # Uploads through a channel and downloads through Attachment.read().
    channel = env.bot.get_channel(env.channel)
    assert isinstance(channel, discord.TextChannel)
    sent = await channel.send("map", file=discord.File(io.BytesIO(b"\x00map"), "map.bin"))
    assert await sent.attachments[0].read() == b"\x00map"
    assert fake.last_message(env.channel).attachments[0].content == b"\x00map"


async def test_subcommand_and_interaction_shape(env: Env) -> None:
    rec = await env.fake.slash(env.bob, env.channel, "branch new", name="river")
    assert rec.response_type == 4
    assert env.fake.message(rec.original_message_id).content == "branch river"


async def test_edit_and_ephemeral_reply(env: Env) -> None:
    fake = env.fake
    rec = await fake.slash(env.alice, env.channel, "say", text="The door creaks.")
    await fake.settle()
    ack = fake.message(rec.original_message_id)
    assert ack.ephemeral and ack.visible_to == env.alice
    said = fake.last_message(env.channel)
    assert said.content == "The door creaks." and [c for _, c in said.edits] == ["The door creaks."]
    assert ack not in fake.messages(env.channel, visible_to=env.bob)
    assert ack in fake.messages(env.channel, visible_to=env.alice)


async def test_defer_then_ephemeral_followup(env: Env) -> None:
    fake = env.fake
    rec = await fake.slash(env.bob, env.channel, "think")
    await fake.settle()
    assert rec.response_type == 5 and rec.ephemeral
    msg = fake.message(rec.followups[0])
    assert msg.content == "a secret" and msg.ephemeral and msg.visible_to == env.bob
    assert all(m.id != msg.id for m in fake.messages(env.channel, visible_to=env.alice))


async def test_dynamic_item_button(env: Env) -> None:
    fake = env.fake
    rec = await fake.slash(env.alice, env.channel, "panel")
    msg = fake.message(rec.original_message_id)
    assert msg.buttons == [("Page 1", "pager:1", False)]
    press = await fake.press(env.bob, msg.id, label="Page 1")
    assert press.failed is None and press.response_type == 7
    assert msg.content == "page 2" and msg.buttons == [("Page 2", "pager:2", False)]
    await fake.press(env.bob, msg.id, index=1)
    assert msg.content == "page 3"
    with pytest.raises(LookupError):
        await fake.press(env.bob, msg.id, "pager:99")


async def test_modal_submission(env: Env) -> None:
    fake = env.fake
    rec = await fake.slash(env.alice, env.channel, "form")
    assert rec.response_type == 9 and rec.modal is not None
    assert rec.modal["title"] == "Write the opening"
    sub = await fake.submit_modal(env.alice, rec, {"opening": "Rain on stone.", "mood": "grim"})
    assert sub.failed is None
    assert env.bot.seen["modal"] == ("Rain on stone.", "grim")
    assert fake.message(sub.original_message_id).content == "Opening saved: Rain on stone."


async def test_user_message_reaches_the_client(env: Env) -> None:
    # Without the Message Content intent (Intents.default()), its content is withheld...
    msg = await env.fake.user_message(env.bob, env.channel, "hello fire")
    await env.fake.settle()
    assert env.bot.seen["message"] == (env.bob, env.channel, "")
    assert env.fake.last_message(env.channel).id == msg.id
    # ...but sent when it mentions the bot, and in a DM.
    mention = f"<@{env.fake.world.bot_user.id}> hello fire"
    await env.fake.user_message(env.bob, env.channel, mention)
    await env.fake.settle()
    assert env.bot.seen["message"] == (env.bob, env.channel, mention)
    dm = env.fake.dm_channel(env.bob)
    await env.fake.user_message(env.bob, dm, "hello fire")
    await env.fake.settle()
    assert env.bot.seen["message"] == (env.bob, dm, "hello fire")


async def test_modal_limits(env: Env) -> None:
    env.fake.expect(50035)  # the form over Discord's limits, on purpose
    rec = await env.fake.slash(env.alice, env.channel, "badform")
    exc = env.bot.seen["badform"]
    assert exc.code == 50035 and "title" in exc.text
    assert rec.response_type == 4 and rec.modal is None


async def test_autocomplete(env: Env) -> None:
    choices = await env.fake.autocomplete(
        env.alice, env.channel, "start", focused="scenario", value="l"
    )
    assert [c["value"] for c in choices] == ["lantern", "lighthouse", "labyrinth"]


async def test_message_limits(env: Env) -> None:
    env.fake.expect(50035, 50006)  # each limit broken on purpose
    bot = env.bot
    channel = bot.get_channel(env.channel)
    assert isinstance(channel, discord.TextChannel)
    with pytest.raises(discord.HTTPException) as info:
        await channel.send("x" * 2001)
    assert info.value.code == 50035 and info.value.status == 400
    # Rejected requests count against the channel's 5-per-5 s window too, as on Discord, so
    # the rest go to a second channel to keep this test quick.
    other = env.fake.add_channel(env.guild, "other")
    await env.fake.flush()
    other_channel = bot.get_channel(other)
    assert isinstance(other_channel, discord.TextChannel)
    with pytest.raises(discord.HTTPException) as info:
        await other_channel.send(embed=discord.Embed(description="d" * 4097))
    assert info.value.code == 50035
    many = [discord.Embed(description="e" * 1000) for _ in range(7)]
    with pytest.raises(discord.HTTPException) as info:
        await other_channel.send(embeds=many)
    assert info.value.code == 50035 and "embeds" in info.value.text

    def raw(**payload: Any) -> Any:
        params = discord.http.handle_message_parameters(content="x")
        assert params.payload is not None
        params.payload.update(payload)
        return bot.http.send_message(env.channel, params=params)

    button = {"type": 2, "style": 1, "label": "Go", "custom_id": "go"}
    rows = [{"type": 1, "components": [dict(button, custom_id=f"go{i}")]} for i in range(6)]
    with pytest.raises(discord.HTTPException) as info:
        await raw(components=rows)
    assert info.value.code == 50035
    with pytest.raises(discord.HTTPException) as info:
        await raw(components=[{"type": 1, "components": [dict(button, custom_id="c" * 101)]}])
    assert info.value.code == 50035
    with pytest.raises(discord.HTTPException) as info:
        await raw(content="")
    assert info.value.code == 50006
    assert env.fake.messages(env.channel) == []


async def test_unacknowledged_interaction_fails(env: Env) -> None:
    started = time.monotonic()
    rec = await env.fake.slash(env.alice, env.channel, "silent")
    assert env.bot.seen["silent"]
    assert rec.failed is not None and rec.acknowledged is None
    assert 2.9 <= time.monotonic() - started < 3.6
    assert len(env.fake.failures) == 1 and "silent" in env.fake.failures[0]
    env.fake.failures.clear()


async def test_double_acknowledgement_and_expired_token(env: Env) -> None:
    env.fake.expect(40060, 50027, 10015)  # a second answer, an expired token, on purpose
    fake = env.fake
    rec = await fake.slash(env.alice, env.channel, "late")
    url = f"{fake.api_base}/interactions/{rec.id}/{rec.token}/callback"
    async with aiohttp.ClientSession() as http, http.post(url, json={"type": 5}) as resp:
        assert resp.status == 400 and (await resp.json())["code"] == 40060

    interaction = env.bot.kept["late"]
    await interaction.followup.send("still here")
    fake.advance(15 * 60 + 1)
    with pytest.raises(discord.HTTPException) as info:
        await interaction.followup.send("too late")
    assert info.value.status == 401 and info.value.code == 50027


async def test_a_tokens_messages_share_one_window_off_the_global_one(env: Env) -> None:
    # Discord limits webhook routes per "webhook_id + webhook_token", and "Interaction endpoints
    # are not bound to the bot's Global Rate Limit" (discord-api-docs, Rate Limits).
    env.fake.expect(50027)  # an expired token, on purpose
    fake = env.fake
    rec = await fake.slash(env.alice, env.channel, "late")
    await env.bot.kept["late"].edit_original_response(content="the response")
    url = f"{fake.api_base}/webhooks/{fake.world.application_id}/{rec.token}"
    statuses, scopes = [], []
    async with aiohttp.ClientSession() as http:
        for n in range(5):  # raw, past discord.py's own limiter; the response's edit was one
            async with http.post(f"{url}?wait=true", json={"content": f"f{n}"}) as resp:
                statuses.append(resp.status)
                scopes.append(resp.headers.get("X-RateLimit-Scope"))
                if resp.status == 200:
                    followup = (await resp.json())["id"]
                else:
                    assert "X-RateLimit-Global" not in resp.headers
        assert statuses == [200] * 4 + [429] and scopes[-1] == "user"
        # Another token's window, and the bot's global one, are untouched.
        other = await fake.slash(env.alice, env.channel, "late")
        await env.bot.kept["late"].followup.send("another token")
        assert len(fake.rate_limited) == 1 and other.followups
        # After the token's 15 minutes its follow-ups can no longer be edited through it.
        fake.advance(15 * 60 + 1)
        base = f"{fake.api_base}/webhooks/{fake.world.application_id}/{other.token}"
        edit = f"{base}/messages/{other.followups[-1]}"
        async with http.patch(edit, json={"content": "late"}) as resp:
            assert resp.status == 401 and (await resp.json())["code"] == 50027
    assert fake.message(int(followup)).content == "f3"


async def test_channel_rate_limit_is_retried(env: Env) -> None:
    fake = env.fake
    channel = env.bot.get_channel(env.channel)
    assert isinstance(channel, discord.TextChannel)
    started = time.monotonic()
    msg = await channel.send("v0")
    for i in range(1, 4):
        await msg.edit(content=f"v{i}")
    # The window holds 4 of 5. The edit and the send sit in different discord.py buckets that
    # both think they have room, so the 6th request is answered 429 and discord.py retries it.
    _, second = await asyncio.gather(msg.edit(content="final"), channel.send("second"))
    assert fake.message(msg.id).content == "final"
    assert fake.message(second.id).content == "second"
    assert len(fake.rate_limited) == 1
    assert time.monotonic() - started >= 4.5


async def test_injected_edit_faults_answer_as_discord_does(env: Env) -> None:
    env.fake.expect(50013)  # injected
    # At most 4 requests per channel: a fifth empties its window of 5 per 5 s, and discord.py
    # then waits for the window before returning.
    fake = env.fake
    channels = []
    for name in ("second", "third"):
        channels.append(fake.add_channel(env.guild, name))
    await fake.flush()
    first, second, third = (env.bot.get_channel(c) for c in (env.channel, *channels))
    assert isinstance(first, discord.TextChannel)
    assert isinstance(second, discord.TextChannel) and isinstance(third, discord.TextChannel)

    msg = await first.send("v0")
    # A 503 is not among the statuses discord.py retries: it raises at once.
    fake.faults.fail_edits(SERVICE_UNAVAILABLE)
    with pytest.raises(discord.DiscordServerError) as server_error:
        await msg.edit(content="v1")
    assert server_error.value.status == 503
    # A 500 is retried by discord.py (after 1 s), and the second attempt lands.
    fake.faults.fail_edits(INTERNAL_SERVER_ERROR)
    await msg.edit(content="v2")
    assert fake.message(msg.id).content == "v2"

    # Missing Permissions on every edit in one channel until cleared; elsewhere edits work.
    fake.faults.fail_edits(MISSING_PERMISSIONS, times=None, channel_id=second.id)
    msg = await second.send("w0")
    for attempt in ("w1", "w2"):
        with pytest.raises(discord.Forbidden) as forbidden:
            await msg.edit(content=attempt)
        assert forbidden.value.code == 50013
    elsewhere = await third.send("x0")
    await elsewhere.edit(content="x1")
    fake.faults.clear()
    await msg.edit(content="w3")
    assert [fake.message(m).content for m in (msg.id, elsewhere.id)] == ["w3", "x1"]
    assert [status for _, _, status in fake.faults.injected] == [503, 500, 403, 403]
    assert fake.rate_limited == []


async def test_global_rate_limit(env: Env) -> None:
    users = await asyncio.gather(*(env.bot.fetch_user(env.bob) for _ in range(60)))
    assert {u.name for u in users} == {"bob"}
    assert env.fake.rate_limited  # the 51st request in a second was answered 429 (global)


async def test_threads_and_dm(env: Env) -> None:
    fake = env.fake
    channel = env.bot.get_channel(env.channel)
    assert isinstance(channel, discord.TextChannel)
    thread = await channel.create_thread(name="side quest", type=discord.ChannelType.public_thread)
    assert thread.id in fake.threads(env.channel)
    assert env.bot.get_channel(thread.id) is not None
    await thread.send("in the thread")
    assert fake.last_message(thread.id).content == "in the thread"

    starter = await channel.send("start here")
    from_msg = await starter.create_thread(name="from a message")
    assert from_msg.id == starter.id and from_msg.parent_id == env.channel

    user = await env.bot.fetch_user(env.bob)
    dm = await user.send("psst")
    assert isinstance(dm.channel, discord.DMChannel)
    assert dm.channel.id == fake.dm_channel(env.bob)
    assert fake.last_message(dm.channel.id).content == "psst"

    # A slash command in the bot's DM: context 1, user instead of member.
    rec = await fake.slash(env.bob, dm.channel.id, "branch new", name="dm")
    assert rec.response_type == 4 and rec.guild_id is None


async def test_command_sync_and_daily_create_limit(env: Env) -> None:
    env.fake.expect(30034)  # the daily limit, reached on purpose
    bot, fake = env.bot, env.fake
    guild = discord.Object(env.guild)
    bot.tree.copy_global_to(guild=guild)
    synced = await bot.tree.sync(guild=guild)
    assert {c.name for c in synced} >= {"start", "branch"}
    assert {c["name"] for c in fake.commands[env.guild]} == {c.name for c in synced}
    rec = await fake.slash(env.alice, env.channel, "branch new", name="synced")
    assert rec.response_type == 4

    app = fake.world.application_id

    def batch(prefix: str, n: int) -> list[dict[str, Any]]:
        return [{"name": f"{prefix}{i}", "description": "x", "type": 1} for i in range(n)]

    await bot.http.bulk_upsert_guild_commands(app, env.guild, batch("a", 100))
    # 30034 comes with Discord's rate-limit headers: discord.py would sleep the day out unless
    # its wait is bounded, as `python -m bot sync` bounds it.
    bot.http.max_ratelimit_timeout = 30.0
    with pytest.raises(discord.RateLimited) as info:
        await bot.http.bulk_upsert_guild_commands(app, env.guild, batch("b", 100))
    assert info.value.retry_after > 3600
