"""Campfire's own bot on the local Discord stand-in, with the fake model behind it.

Loaded as a plugin by ``tests/conftest.py``, so the ``env`` fixture is there in every test
module; a test that needs other settings calls ``campfire_on_standin`` itself.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from bot.config import load_settings
from bot.discord_bot import CampfireBot
from bot.standin import FakeDiscord, StandIn, StandinFile
from bot.standin.gateway import INTENT_MESSAGE_CONTENT
from bot.standin.harness import handler_tasks
from bot.standin.records import FLAG_LOADING, InteractionRecord
from tests.fakes.openai_server import FakeModelServer, Reply

#: The per-channel message window of the tests' stand-in: Discord's 5 messages, in 0.5 s
#: instead of 5 s. The bot paces itself to the same window, so a bot that ignored it would still
#: meet 429s (which fail the test), while a test playing ten turns in one thread waits a tenth
#: as long. A test of the pacing itself asks for Discord's own (``channel_period=CHANNEL_PERIOD``).
TEST_CHANNEL_PERIOD = 0.5


@dataclass
class DiscordEnv:
    bot: CampfireBot
    standin: StandIn
    fake: FakeDiscord
    guild: int
    channel: int
    alice: int
    bob: int

    async def start_thread(self, host: int | None = None, **options: str) -> int:
        """``/start`` in the test channel by ``host`` (alice unless named), played to its end:
        the new adventure's thread."""
        record = await self.fake.slash(host or self.alice, self.channel, "start", **options)
        await self.done()
        assert record.failed is None, record.failed
        return self.fake.threads(self.channel)[-1]

    async def start_anew(self, user: int, place: int, **options: str) -> InteractionRecord:
        """``/start`` where an adventure runs, confirmed ("Start anew"), played to its end:
        the press that started the new adventure."""
        asked = await self.fake.slash(user, place, "start", **options)
        await self.done()
        confirm = self.fake.message(asked.original_message_id)
        assert confirm.visible_to == user and "Start anew?" in confirm.content, confirm.content
        record = await self.fake.press(user, confirm.id, label="Start anew")
        await self.done()
        return record

    async def import_anew(self, user: int, place: int, file: StandinFile) -> InteractionRecord:
        """``/adventure import`` where an adventure runs, confirmed ("Import it"), played to
        its end: the press that imported it."""
        asked = await self.fake.slash(user, place, "adventure import", file=file)
        await self.done()
        assert asked.failed is None, asked.failed
        confirm = self.fake.message(asked.followups[-1])
        assert confirm.visible_to == user and "Import anyway?" in confirm.content, confirm.content
        record = await self.fake.press(user, confirm.id, label="Import it")
        await self.done()
        return record

    def expect(self, *codes: int) -> None:
        """Discord error codes this test provokes on purpose; any other 4xx fails it."""
        self.fake.expect(*codes)

    async def done(self) -> None:
        """Until the bot has finished with everything it was sent."""
        await self.standin.idle()

    def narration(self, channel_id: int) -> list[str]:
        """The bot's own messages there (its channel messages and the follow-ups of interactions,
        not interaction responses), in order."""
        return [
            m.content
            for m in self.fake.messages(channel_id)
            if m.author_id == self.bot.user.id and not m.is_response and not m.ephemeral
        ]


@asynccontextmanager
async def campfire_on_standin(
    tmp_path: Path,
    model: FakeModelServer,
    caplog: pytest.LogCaptureFixture,
    database_url: str,
    *,
    log_level: int = logging.WARNING,
    world: Callable[[FakeDiscord], object] | None = None,
    channel_period: float = TEST_CHANNEL_PERIOD,
    **settings,
) -> AsyncIterator[DiscordEnv]:
    """The bot on ``database_url`` (the ``database_url`` fixture: a copy of the migrated
    template, on each backend), its data folder in ``tmp_path``; ``settings`` add to (or
    replace) the defaults below. ``world`` builds more of Discord before the bot connects.
    ``channel_period``: the per-channel message window, the stand-in's and the bot's."""
    caplog.set_level(log_level)
    # The loggers ``python -m bot`` quiets (``bot.logs.configure_logging``) stay quiet in a test
    # process after a test ran main(): a test that asks for their lines sets them itself.
    for quieted in ("discord.gateway", "httpx", "httpcore"):
        caplog.set_level(log_level, logger=quieted)
    config = load_settings(
        **{
            "data_dir": tmp_path / "data",
            "database_url": database_url,
            "model_url": model.base_url,
            "model_name": model.model,
            "model_timeout": 3,
            # Tests play faster than people do; a test of the rate limits sets its own.
            "turns_per_user_per_minute": 10_000,
            "turns_per_adventure_per_minute": 10_000,
            "script_tests_per_minute": 10_000,
            "model_checks_per_minute": 10_000,
            "card_writes_per_minute": 10_000,
            "imports_per_day": 10_000,
        }
        | settings
    )
    bot = CampfireBot(config, channel_period=channel_period)
    standin = StandIn(bot, channel_period=channel_period)
    fake = standin.fake
    guild = fake.add_guild("The Hearth")
    channel = fake.add_channel(guild, "adventures")
    alice = fake.add_user("alice", member_of=[guild], manage_guild=True)
    bob = fake.add_user("bob", member_of=[guild])
    if world is not None:
        world(fake)
    async with standin:
        # Started: what a restart takes back is taken back (nothing, in a fresh database).
        assert bot.resuming is not None
        await bot.resuming
        yield DiscordEnv(bot, standin, fake, guild, channel, alice, bob)
        await standin.idle()
    assert fake.unknown_routes == []
    assert fake.failures == []  # every interaction was acknowledged within 3 s
    assert fake.rate_limited == []  # the bot paced itself under Discord's limits
    # Nothing refused that the test did not provoke: on Discord each 4xx counts towards the
    # invalid-request limit, and most mean something the player never saw.
    assert fake.unexpected_refusals() == []
    # caplog.records holds this phase's records only (the fixture's teardown): the test's own
    # are the call phase's.
    records = [*caplog.get_records("setup"), *caplog.get_records("call"), *caplog.records]
    errors = [r.getMessage() for r in records if r.levelno >= logging.ERROR]
    assert errors == []


async def crash(env: DiscordEnv) -> None:
    """The bot's process dies mid-work (kill -9), as Discord and the database see it.

    Its gateway connection drops and its timers stop, and nothing of Campfire's own closing
    runs: the turns it was writing keep their leases (no heartbeat now, no release) and their
    requests stay "running". The lock on its instance name goes, as the operating system drops
    a dead process's locks. Its interaction handlers stop; the turns themselves are left
    hanging on the model until ``restarted`` ends, when their releases are stale and change
    nothing. Only this bot may be running when it is called.
    """
    bot = env.bot
    handlers = handler_tasks()
    for task in handlers:
        task.cancel()
    await asyncio.gather(*handlers, return_exceptions=True)
    bot.scheduler.shutdown(wait=False)
    bot.round_panels.cancel()  # its rounds' timers die with it
    heartbeats = [t for t in asyncio.all_tasks() if t.get_name().startswith("lease-heartbeat-")]
    for task in heartbeats:
        task.cancel()
    await asyncio.gather(*heartbeats, return_exceptions=True)
    # discord.py's side only (commands.Bot.close), not CampfireBot.close.
    await super(CampfireBot, bot).close()
    bot.services.instance.close()


@asynccontextmanager
async def restarted(env: DiscordEnv) -> AsyncIterator[DiscordEnv]:
    """Campfire started again after ``crash(env)``: a new bot with the same settings (data
    folder, database) logging in to the same stand-in Discord, which stayed up. The checks of
    ``campfire_on_standin`` run when ``env``'s block ends."""
    bot = CampfireBot(env.bot.settings, channel_period=env.bot.channel_period)
    standin = StandIn(bot, fake=env.fake)
    try:
        async with standin:
            yield DiscordEnv(bot, standin, env.fake, env.guild, env.channel, env.alice, env.bob)
            await standin.idle()
    finally:
        # What the dead process left hanging in this test process goes now.
        await env.bot.services.play.queue.close()
        await env.bot.services.aclose()


@pytest.fixture
async def env(
    tmp_path: Path,
    fake_model: FakeModelServer,
    caplog: pytest.LogCaptureFixture,
    database_url: str,
) -> AsyncIterator[DiscordEnv]:
    """Campfire on the stand-in with the default settings: a guild, a channel, alice (who
    manages the server) and bob."""
    async with campfire_on_standin(tmp_path, fake_model, caplog, database_url) as environment:
        yield environment


async def narration_under_way(
    env: DiscordEnv, fake_model: FakeModelServer, thread: int, *, words: int = 60
) -> asyncio.Task:
    """alice's /do, its long narration (``words`` words) started streaming: the turn's task."""
    story = " ".join(f"step{n}" for n in range(words)) + "."
    fake_model.queue(Reply(text=story, delay=0.03))
    turn = asyncio.create_task(env.fake.slash(env.alice, thread, "do", action="go down"))
    for _ in range(400):
        if len(env.narration(thread)) > 1:
            break
        await asyncio.sleep(0.01)
    assert len(env.narration(thread)) > 1, "the narration never started"
    return turn


async def answered(env: DiscordEnv, record: InteractionRecord, *, within: float = 5.0):
    """The message that answers ``record`` once it is there: its response, or the follow-up
    that replaced a deferred "thinking…" (a refusal after a public defer goes to the player
    alone that way). A command that writes defers first and answers after, so its answer comes
    after ``slash`` returns."""
    assert record.failed is None, record.failed
    assert record.original_message_id is not None, "not acknowledged"
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        # A public follow-up is the turn's narration (cogs.ui.narration_routes), no answer.
        answers = [env.fake.message(m) for m in record.followups]
        answers = [m for m in answers if m.is_response or m.ephemeral]
        if answers:
            return answers[-1]
        message = env.fake.message(record.original_message_id)
        if not message.flags & FLAG_LOADING or loop.time() > deadline:
            return message
        await asyncio.sleep(0.01)


def _grant_message_content(fake: FakeDiscord) -> None:
    # The operator switched the intent on in the Developer Portal.
    fake.gateway.privileged_intents |= INTENT_MESSAGE_CONTENT


@pytest.fixture
async def intent_env(
    tmp_path: Path,
    fake_model: FakeModelServer,
    caplog: pytest.LogCaptureFixture,
    database_url: str,
) -> AsyncIterator[DiscordEnv]:
    """Campfire with ``CAMPFIRE_MESSAGE_CONTENT=true``, on a Discord that granted it."""
    async with campfire_on_standin(
        tmp_path,
        fake_model,
        caplog,
        database_url,
        world=_grant_message_content,
        message_content=True,
    ) as environment:
        yield environment
