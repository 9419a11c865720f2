"""The Discord process: one ``Bot`` subclass holding the engine's services."""

from __future__ import annotations

import logging

import discord
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from discord.ext import commands

from bot.services import Services

log = logging.getLogger(__name__)

#: Cog modules loaded at start-up, in order.
EXTENSIONS: tuple[str, ...] = ()


# Campfire never joins voice; without these, discord.py warns at every start that voice
# libraries are missing.
discord.VoiceClient.warn_nacl = False
discord.VoiceClient.warn_dave = False


class CampfireBot(commands.Bot):
    def __init__(self, services: Services) -> None:
        intents = discord.Intents.default()
        super().__init__(command_prefix=commands.when_mentioned, intents=intents)
        self.services = services
        self.scheduler = AsyncIOScheduler()

    async def setup_hook(self) -> None:
        for extension in EXTENSIONS:
            await self.load_extension(extension)
        self.scheduler.start()
        # The command tree is synced on request (`python -m bot sync`), never here: Discord
        # allows 200 command creations a day per server.

    async def close(self) -> None:
        if self.scheduler.running:
            self.scheduler.shutdown(wait=False)
        await super().close()
        await self.services.aclose()

    async def on_ready(self) -> None:
        log.info("connected as %s to %d servers", self.user, len(self.guilds))
