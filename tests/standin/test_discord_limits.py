"""Discord's limits on what a bot sends, as the stand-in answers them: embeds, uploads, nonces,
edits of hour-old messages, autocomplete choices and modals. Each case is refused with the HTTP
status and JSON code Discord answers, and recorded as a refusal."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import discord
import pytest
from discord import app_commands
from discord.ext import commands
from discord.http import handle_message_parameters

from bot.standin import FakeDiscord
from bot.standin.limits import (
    ATTACHMENT_DESCRIPTION_MAX,
    OLD_MESSAGE_AGE_S,
    OLD_MESSAGE_EDIT_PERIOD_S,
    OLD_MESSAGE_EDITS,
    UPLOAD_FILE_MAX,
    OldMessageEdits,
)
from bot.standin.routes_messages import NONCE_WINDOW_S
from tests.standin.bare import on_standin

MiB = 1024 * 1024


class RawModal(discord.ui.Modal):
    """A modal sent exactly as given: what a bot could send that discord.py would not build."""

    def __init__(self, payload: dict[str, Any]) -> None:
        super().__init__(title="raw")
        self.payload = payload

    def to_dict(self) -> dict[str, Any]:
        return self.payload


class LimitsBot(commands.Bot):
    """Answers autocomplete with ``choices`` and /form with ``modal``, as the test sets them;
    keeps what Discord answered in ``refused``."""

    def __init__(self) -> None:
        super().__init__(command_prefix="!", intents=discord.Intents.default())
        self.choices: list[app_commands.Choice[str]] = []
        self.modal: dict[str, Any] = {}
        self.refused: list[discord.HTTPException] = []
        self.answered: list[discord.Interaction] = []

        @self.tree.command(name="pick", description="Pick something")
        async def pick(interaction: discord.Interaction, what: str) -> None:
            await interaction.response.send_message(what)
            self.answered.append(interaction)

        @pick.autocomplete("what")
        async def pick_what(
            interaction: discord.Interaction, current: str
        ) -> list[app_commands.Choice[str]]:
            try:
                await interaction.response.autocomplete(self.choices)
            except discord.HTTPException as exc:
                self.refused.append(exc)
            return []  # discord.py answers with these when the first answer was refused

        @self.tree.command(name="form", description="Open a form")
        async def form(interaction: discord.Interaction) -> None:
            try:
                await interaction.response.send_modal(RawModal(self.modal))
            except discord.HTTPException as exc:
                self.refused.append(exc)
                await interaction.response.send_message("no form")


@dataclass
class Env:
    bot: LimitsBot
    fake: FakeDiscord
    guild: int
    channel: int
    alice: int

    async def new_channel(self, name: str) -> discord.TextChannel:
        """A channel of its own, so a case's requests stay out of the others' rate limit."""
        cid = self.fake.add_channel(self.guild, name)
        await self.fake.flush()
        channel = self.bot.get_channel(cid)
        assert isinstance(channel, discord.TextChannel)
        return channel


@pytest.fixture
async def env(caplog: pytest.LogCaptureFixture) -> AsyncIterator[Env]:
    bot = LimitsBot()
    async with on_standin(bot, caplog, server="Limits") as place:
        yield Env(bot, place.fake, place.guild, place.channel, place.alice)


async def refused(send: Callable[[], Any]) -> discord.HTTPException:
    with pytest.raises(discord.HTTPException) as info:
        await send()
    return info.value


# -- embeds ------------------------------------------------------------------------------------


def _fields(count: int, *, name: str = "name", value: str = "value") -> discord.Embed:
    embed = discord.Embed(title="Fields")
    for _ in range(count):
        embed.add_field(name=name, value=value)
    return embed


# Message, Embed Limits: each field's limit, and 6,000 characters across a message's embeds.
@pytest.mark.parametrize(
    ("embeds", "where"),
    [
        pytest.param([_fields(26)], "In embeds.0.fields:", id="26 fields"),
        pytest.param([_fields(1, name="n" * 257)], "In embeds.0.fields.0.name:", id="field name"),
        pytest.param(
            [_fields(1, value="v" * 1025)], "In embeds.0.fields.0.value:", id="field value"
        ),
        pytest.param(
            [discord.Embed(title="t").set_footer(text="f" * 2049)],
            "In embeds.0.footer.text:",
            id="footer text",
        ),
        pytest.param(
            [discord.Embed(title="t").set_author(name="a" * 257)],
            "In embeds.0.author.name:",
            id="author name",
        ),
        pytest.param(
            [discord.Embed(description="d" * 3000), discord.Embed(title="t" * 3001)],
            "In embeds: Embed size exceeds maximum size of 6000",
            id="6000 in all",
        ),
    ],
)
async def test_embeds_over_discords_limits_are_refused(
    env: Env, embeds: list[discord.Embed], where: str
) -> None:
    env.fake.expect(50035)  # refused on purpose
    channel = env.bot.get_channel(env.channel)
    assert isinstance(channel, discord.TextChannel)
    error = await refused(lambda: channel.send(embeds=embeds))
    assert (error.status, error.code) == (400, 50035)
    assert where in error.text
    assert env.fake.messages(env.channel) == []
    assert [(r.status, r.code) for r in env.fake.refused] == [(400, 50035)]


async def test_embeds_at_discords_limits_are_sent(env: Env) -> None:
    channel = env.bot.get_channel(env.channel)
    assert isinstance(channel, discord.TextChannel)
    full = _fields(25, name="n" * 100, value="v" * 100)
    # Leading and trailing whitespace is trimmed before counting (Message, Embed Limits).
    padded = discord.Embed(title="  " + "t" * 256 + "  ").set_footer(text="f" * 200)
    await channel.send(embeds=[full, padded])
    assert len(env.fake.last_message(env.channel).embeds) == 2
    assert env.fake.refused == []


# -- uploads -----------------------------------------------------------------------------------


async def test_a_file_over_ten_mib_is_refused_as_too_large(env: Env) -> None:
    env.fake.expect(40005)  # refused on purpose
    channel = env.bot.get_channel(env.channel)
    assert isinstance(channel, discord.TextChannel)
    big = discord.File(io.BytesIO(b"x" * (UPLOAD_FILE_MAX + 1)), "big.bin")
    error = await refused(lambda: channel.send("here", file=big))
    assert (error.status, error.code) == (413, 40005)
    exact = discord.File(io.BytesIO(b"x" * UPLOAD_FILE_MAX), "exact.bin")
    await channel.send("here", file=exact)
    assert [len(a.content) for a in env.fake.last_message(env.channel).attachments] == [
        UPLOAD_FILE_MAX
    ]


async def test_a_request_over_25_mib_is_refused_even_with_every_file_allowed(env: Env) -> None:
    env.fake.expect(40005)  # refused on purpose
    channel = env.bot.get_channel(env.channel)
    assert isinstance(channel, discord.TextChannel)
    files = [discord.File(io.BytesIO(b"x" * 9 * MiB), f"part{i}.bin") for i in range(3)]
    error = await refused(lambda: channel.send("parts", files=files))
    assert (error.status, error.code) == (413, 40005)
    assert env.fake.messages(env.channel) == []


async def test_a_followup_with_a_file_over_ten_mib_is_refused(env: Env) -> None:
    env.fake.expect(40005)  # refused on purpose
    # Interaction responses and followups upload through the same rule.
    rec = await env.fake.slash(env.alice, env.channel, "pick", what="map")
    assert rec.response_type == 4
    (interaction,) = env.bot.answered
    big = discord.File(io.BytesIO(b"x" * (UPLOAD_FILE_MAX + 1)), "big.bin")
    error = await refused(lambda: interaction.followup.send("here", file=big))
    assert (error.status, error.code) == (413, 40005)


async def test_an_attachment_description_over_1024_characters_is_refused(env: Env) -> None:
    env.fake.expect(50035)  # refused on purpose
    # An attachment's description is its alt text, "max 1024 characters" (Message, Attachment
    # Object); a response's files go through the same check as a channel message's.
    rec = await env.fake.slash(env.alice, env.channel, "pick", what="map")
    (interaction,) = env.bot.answered
    long = "d" * (ATTACHMENT_DESCRIPTION_MAX + 1)
    picture = discord.File(io.BytesIO(b"png"), "map.png", description=long)
    error = await refused(lambda: interaction.followup.send("here", file=picture))
    assert (error.status, error.code) == (400, 50035)
    assert "attachments.0.description" in error.text
    assert rec.followups == []
    exact = "d" * ATTACHMENT_DESCRIPTION_MAX
    picture = discord.File(io.BytesIO(b"png"), "map.png", description=exact)
    await interaction.followup.send("here", file=picture)
    (sent,) = [env.fake.message(m) for m in rec.followups]
    assert [(a.filename, a.description) for a in sent.attachments] == [("map.png", exact)]


# -- nonces ------------------------------------------------------------------------------------


async def test_a_repeated_nonce_returns_the_message_it_made(env: Env) -> None:
    channel = env.bot.get_channel(env.channel)
    assert isinstance(channel, discord.TextChannel)
    # discord.py sends enforce_nonce with every nonce: a send retried after its answer was
    # lost makes no second message (Message, Create Message).
    first = await channel.send("once", nonce="turn-7")
    again = await channel.send("once", nonce="turn-7")
    assert again.id == first.id
    assert [m.content for m in env.fake.messages(env.channel)] == ["once"]
    other = await channel.send("twice", nonce="turn-8")
    assert other.id != first.id
    # Checked "in the past few minutes" only: later, the same nonce makes a new message.
    env.fake.advance(NONCE_WINDOW_S + 1)
    later = await channel.send("once", nonce="turn-7")
    assert later.id != first.id
    assert len(env.fake.messages(env.channel)) == 3


async def test_a_nonce_without_enforce_nonce_is_not_deduplicated(env: Env) -> None:
    def send(content: str) -> Any:
        params = handle_message_parameters(content=content)
        assert params.payload is not None
        params.payload["nonce"] = "same"  # no enforce_nonce: Discord only echoes it
        return env.bot.http.send_message(env.channel, params=params)

    first, second = await send("one"), await send("two")
    assert first["id"] != second["id"]
    assert [m.content for m in env.fake.messages(env.channel)] == ["one", "two"]


async def test_a_nonce_over_25_characters_is_refused(env: Env) -> None:
    env.fake.expect(50035)  # refused on purpose
    channel = env.bot.get_channel(env.channel)
    assert isinstance(channel, discord.TextChannel)
    error = await refused(lambda: channel.send("x", nonce="n" * 26))
    assert (error.status, error.code) == (400, 50035) and "nonce" in error.text


# -- edits of messages older than an hour -------------------------------------------------------


async def test_edits_of_hour_old_messages_are_limited(env: Env) -> None:
    env.fake.expect(30046)  # refused on purpose
    channel = env.bot.get_channel(env.channel)
    assert isinstance(channel, discord.TextChannel)
    old = await channel.send("an hour ago")
    env.fake.advance(OLD_MESSAGE_AGE_S + 1)
    for n in range(OLD_MESSAGE_EDITS):
        await old.edit(content=f"edit {n}")
    # A 429 with Discord's code and the rate-limit headers with Via: discord.py reads it as a
    # rate limit and would sleep its retry_after (up to a minute here) and retry; bounded to
    # 30 s it raises RateLimited at once instead, which it does only for a 429 with Via.
    env.bot.http.max_ratelimit_timeout = 30.0
    try:
        with pytest.raises(discord.RateLimited) as raised:
            await old.edit(content="one too many")
    finally:
        env.bot.http.max_ratelimit_timeout = None
    assert raised.value.retry_after > 30.0
    assert env.fake.message(old.id).content == f"edit {OLD_MESSAGE_EDITS - 1}"
    assert [(r.status, r.code) for r in env.fake.refused] == [(429, 30046)]
    assert env.fake.rate_limited == []


async def test_edits_of_new_messages_are_not_counted(env: Env) -> None:
    channel = await env.new_channel("fresh")
    fresh = await channel.send("just now")
    for n in range(OLD_MESSAGE_EDITS + 1):
        await fresh.edit(content=f"edit {n}")
    assert env.fake.refused == []


def test_the_hour_old_edit_window_reopens() -> None:
    edits = OldMessageEdits()
    made, now = 0.0, OLD_MESSAGE_AGE_S + 10
    for _ in range(OLD_MESSAGE_EDITS):
        assert edits.check(1, made, now) is None
    refusal = edits.check(1, made, now)
    assert refusal is not None and refusal[0] == 429 and refusal[1]["code"] == 30046
    assert edits.check(2, made, now) is None  # counted per channel
    assert edits.check(1, now - 60, now) is None  # a message under an hour old
    assert edits.check(1, made, now + OLD_MESSAGE_EDIT_PERIOD_S) is None


# -- autocomplete ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("choices", "where"),
    [
        pytest.param(
            [app_commands.Choice(name=f"c{i}", value=f"c{i}") for i in range(26)],
            "In data.choices:",
            id="26 choices",
        ),
        pytest.param(
            [app_commands.Choice(name="n" * 101, value="v")],
            "In data.choices.0.name:",
            id="name of 101",
        ),
        pytest.param(
            [app_commands.Choice(name="", value="v")], "In data.choices.0.name:", id="empty name"
        ),
        pytest.param(
            [app_commands.Choice(name="n", value="v" * 101)],
            "In data.choices.0.value:",
            id="value of 101",
        ),
    ],
)
async def test_autocomplete_answers_over_discords_limits_are_refused(
    env: Env, choices: list[app_commands.Choice[str]], where: str
) -> None:
    env.fake.expect(50035)  # refused on purpose
    env.bot.choices = choices
    offered = await env.fake.autocomplete(env.alice, env.channel, "pick", focused="what")
    assert offered == []  # the refused answer never reached the player
    (error,) = env.bot.refused
    assert (error.status, error.code) == (400, 50035) and where in error.text


async def test_autocomplete_answers_at_discords_limits_are_shown(env: Env) -> None:
    env.bot.choices = [
        app_commands.Choice(name=f"{i:03}" + "n" * 97, value=f"{i:03}" + "v" * 97)
        for i in range(25)
    ]
    offered = await env.fake.autocomplete(env.alice, env.channel, "pick", focused="what")
    assert len(offered) == 25
    assert env.bot.refused == [] and env.fake.refused == []


# -- modals ------------------------------------------------------------------------------------


def _text_input(custom_id: str, **fields: Any) -> dict[str, Any]:
    return {"type": 4, "style": 1, "custom_id": custom_id, **fields}


def _label(text: str, custom_id: str, **fields: Any) -> dict[str, Any]:
    return {"type": 18, "label": text, "component": _text_input(custom_id, **fields)}


def _modal(*components: dict[str, Any], title: str = "A form") -> dict[str, Any]:
    return {"custom_id": "form", "title": title, "components": list(components)}


@pytest.mark.parametrize(
    ("modal", "where"),
    [
        pytest.param(
            _modal(*[_label(f"Q{i}", f"q{i}") for i in range(6)]),
            "In data.components:",
            id="6 components",
        ),
        pytest.param(_modal(), "In data.components:", id="no component"),
        pytest.param(_modal(_label("L" * 46, "q")), "In data.components.0.label:", id="label"),
        pytest.param(
            _modal({"type": 1, "components": [_text_input("q", label="L" * 46)]}),
            "In data.components.0.components.0.label:",
            id="text input label",
        ),
        pytest.param(
            _modal(_label("Q", "q", placeholder="p" * 101)),
            "In data.components.0.component.placeholder:",
            id="placeholder",
        ),
        pytest.param(
            _modal(_label("Q", "q", max_length=4001)),
            "In data.components.0.component.max_length:",
            id="max_length",
        ),
        pytest.param(
            _modal(_label("Q", "q", min_length=-1)),
            "In data.components.0.component.min_length:",
            id="min_length",
        ),
        pytest.param(_modal(_label("Q", "q"), title="T" * 46), "In data.title:", id="title"),
    ],
)
async def test_modals_over_discords_limits_are_refused(
    env: Env, modal: dict[str, Any], where: str
) -> None:
    env.fake.expect(50035)  # refused on purpose
    env.bot.modal = modal
    rec = await env.fake.slash(env.alice, env.channel, "form")
    (error,) = env.bot.refused
    assert (error.status, error.code) == (400, 50035) and where in error.text
    assert rec.modal is None and rec.response_type == 4


async def test_a_modal_at_discords_limits_opens(env: Env) -> None:
    env.bot.modal = _modal(
        *[_label("L" * 45, f"q{i}", placeholder="p" * 100, max_length=4000) for i in range(5)],
        title="T" * 45,
    )
    rec = await env.fake.slash(env.alice, env.channel, "form")
    assert rec.response_type == 9 and env.bot.refused == []
