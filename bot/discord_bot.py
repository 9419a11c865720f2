"""The Discord process: one ``Bot`` subclass holding the engine's services."""

from __future__ import annotations

import logging

import discord
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from discord.ext import commands

from bot.config import Settings
from bot.scheduler import BackgroundWork, schedule_background_work
from bot.services import Services, build_services
from engine.coordination.jobs import LEASE_REAPING

log = logging.getLogger(__name__)

#: Cog modules loaded at start-up, in order.
EXTENSIONS: tuple[str, ...] = (
    "cogs.errors",
    "cogs.play",
    "cogs.insights",
    "cogs.steering",
    "cogs.world_state",
    "cogs.scenarios",
    # After cogs.steering: it adds /adventure export|import to that cog's /adventure group.
    "cogs.adventure_files",
    "cogs.tree",
    "cogs.scripts",
    "cogs.memory",
    "cogs.profile",
    "cogs.membership",
)

#: How often expired turn leases are looked for (a process died mid-turn).
LEASE_SWEEP_SECONDS = 30

# Campfire never joins voice; without these, discord.py warns at every start that voice
# libraries are missing.
discord.VoiceClient.warn_nacl = False
discord.VoiceClient.warn_dave = False


class CampfireBot(commands.Bot):
    services: Services
    background: BackgroundWork

    def __init__(self, settings: Settings) -> None:
        intents = discord.Intents.default()
        super().__init__(
            command_prefix=commands.when_mentioned,
            intents=intents,
            # Stories mention characters by name; never let narration ping real people.
            allowed_mentions=discord.AllowedMentions.none(),
        )
        self.settings = settings
        self.scheduler = AsyncIOScheduler()

    async def setup_hook(self) -> None:
        from cogs.buttons import DYNAMIC_ITEMS
        from cogs.narration import Narrator
        from cogs.streaming import RatePacer

        self.services = await build_services(self.settings)
        self.background = BackgroundWork(self.services.jobs)
        self.narrator = Narrator(self, RatePacer())
        self.add_dynamic_items(*DYNAMIC_ITEMS)
        for extension in EXTENSIONS:
            await self.load_extension(extension)
        self.scheduler.add_job(
            self.announce_interrupted_turns,
            "interval",
            seconds=LEASE_SWEEP_SECONDS,
            id="lease-sweep",
            coalesce=True,
            max_instances=1,
        )
        schedule_background_work(self.scheduler, self.services, self.background)
        self.scheduler.start()
        # The command tree is synced on request (`python -m bot sync`), never here: Discord
        # allows 200 command creations a day per server.

    async def announce_interrupted_turns(self) -> None:
        """Tell channels whose turn died with its process that it was cut off.

        One process reaps at a time (a job lease); each cut-off turn is reported once anyway,
        by the reaper or by the next claim of its turn lease."""
        found = await self.background.run_alone(
            LEASE_REAPING, "lease reaping", self.services.play.reap_interrupted
        )
        for channel_id, event in found or []:
            channel = self.get_channel(channel_id)
            if isinstance(channel, discord.abc.Messageable):
                try:
                    await self.narrator.announce_interrupted(channel, event)
                except discord.HTTPException:
                    log.warning("could not announce an interrupted turn in %s", channel_id)

    async def close(self) -> None:
        if self.scheduler.running:
            self.scheduler.pause()
            if hasattr(self, "background"):
                await self.background.stop()
            self.scheduler.shutdown(wait=False)
        await super().close()
        if hasattr(self, "services"):
            await self.services.aclose()

    async def on_ready(self) -> None:
        log.info("connected as %s to %d servers", self.user, len(self.guilds))
