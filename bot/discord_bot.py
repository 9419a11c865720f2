"""The Discord process: one ``AutoShardedBot`` subclass holding the engine's services."""

from __future__ import annotations

import asyncio
import gc
import logging
from typing import Any

import discord
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from discord.ext import commands

from bot.config import ConfigError, Settings
from bot.metrics import CampfireMetrics, OperationsServer, health_problem
from bot.scheduler import BackgroundWork, schedule_background_work
from bot.services import build_services
from cogs.ui.preflight import CampfireTree
from cogs.ui.round_panels import RoundPanels
from cogs.ui.threads import thread_now
from engine.platform.coordination.jobs import LEASE_REAPING
from engine.services import Services
from engine.turns.events import TurnInterrupted

log = logging.getLogger(__name__)

#: How often expired turn leases are looked for (a process died mid-turn).
LEASE_SWEEP_SECONDS = 30

#: Whether this process froze what it loaded at start (``freeze_startup_objects``).
_startup_frozen = False


def freeze_startup_objects() -> None:
    """Once a process: collect, then move every object left out of the collector's reach.
    A flag, not ``gc.get_freeze_count()``: that counts the frozen objects one by one, about
    0.1 s of CPU each time a bot starts in a process that already froze (tests, a restart in
    place)."""
    global _startup_frozen
    if not _startup_frozen:
        _startup_frozen = True
        gc.collect()
        gc.freeze()


# Campfire never joins voice; without these, discord.py warns at every start that voice
# libraries are missing.
discord.VoiceClient.warn_nacl = False
discord.VoiceClient.warn_dave = False


def gateway_intents(*, message_play: bool = True, message_content: bool = False) -> discord.Intents:
    """Only what Campfire reads. Slash commands, buttons and forms come as interactions, which
    need no intent: each carries its member (roles, permissions) and channel (discord-api-docs,
    Gateway, List of Intents: events under no intent "will always be sent"). No reaction,
    typing or member events.

    Messages (GUILD_MESSAGES, DIRECT_MESSAGES) for playing by plain messages
    (``cogs.message_play``). Their content is the privileged Message Content intent, asked for
    only when the operator opts in (``message_content``), since Discord refuses a connection
    asking for a privileged intent the app was not granted in the Developer Portal (close code
    4014). Without it Discord still sends the content "in DMs that it receives, or in messages
    in which it is mentioned" (discord-api-docs, Change Log 2022-09-01, "Message Content is a
    Privileged Intent"; Gateway, Message Content Intent), so a message naming the bot plays."""
    intents = discord.Intents.none()
    # GUILDS: the server cache that interactions are read against (a member's roles are
    # resolved from their guild's roles, for the importer role and the manager checks; the
    # server's name for its row; interaction.channel is the cached channel or thread, whose
    # parent /start and the thread checks look at), kept current by the channel, thread and
    # role events; and GUILD_CREATE / GUILD_DELETE for on_guild_join / on_guild_remove
    # (cogs.membership), which record the servers Campfire is in.
    intents.guilds = True
    # Messages only where they may play: an operator who switched message play off
    # (CAMPFIRE_MESSAGE_PLAY=false) is sent none (Gateway, "Gateway Intents": a bot receives
    # only the events of the intents it asks for).
    intents.guild_messages = message_play
    intents.dm_messages = message_play
    intents.message_content = message_play and message_content
    return intents


#: Where commands appear: installed to servers only (a user install would run the bot where it
#: cannot post), used in servers and in the bot's own DMs; never in group DMs or other private
#: channels, since Campfire narrates by posting in the channel (discord-api-docs, Application
#: Commands, Contexts).
COMMAND_CONTEXTS = discord.app_commands.AppCommandContext(
    guild=True, dm_channel=True, private_channel=False
)
COMMAND_INSTALLS = discord.app_commands.AppInstallationType(guild=True, user=False)


#: The longest rate-limit wait a sync sleeps on (discord.py's smallest allowed bound).
SYNC_RATELIMIT_WAIT_S = 30.0


class CampfireBot(commands.AutoShardedBot):
    services: Services
    background: BackgroundWork
    #: Each open round's panel and timeout (cogs.ui.round_panels).
    round_panels: RoundPanels

    def __init__(
        self,
        settings: Settings,
        *,
        channel_period: float | None = None,
        commands_only: bool = False,
    ) -> None:
        """``channel_period``: the per-channel message window the narration paces itself to,
        when not Discord's (a stand-in that shortens it for tests). ``commands_only``: the
        command tree and nothing else (``python -m bot sync``: no services, database, metrics
        port or scheduler, so it runs beside a running bot)."""
        self.commands_only = commands_only
        # Unset: discord.py asks Discord for its recommendation (GET /gateway/bot) and runs
        # every shard here. A process running some of them names them and the total.
        options: dict[str, Any] = {"shard_count": settings.shard_count}
        if settings.shard_ids is not None:
            options["shard_ids"] = list(settings.shard_ids)
        if commands_only:
            # A sync meets Discord's daily cap on command creations (30034) as a 429 whose
            # retry is hours away: raised at once (``discord.RateLimited``), never slept on.
            options["max_ratelimit_timeout"] = SYNC_RATELIMIT_WAIT_S
        #: This process's metrics; the engine's services report to them once built.
        self.metrics = CampfireMetrics()
        super().__init__(
            command_prefix=commands.when_mentioned,
            intents=gateway_intents(
                message_play=settings.message_play, message_content=settings.message_content
            ),
            # Stories mention characters by name; never let narration ping real people.
            allowed_mentions=discord.AllowedMentions.none(),
            allowed_contexts=COMMAND_CONTEXTS,
            allowed_installs=COMMAND_INSTALLS,
            **options,
            # An archived thread reopened, then the permission preflight, before every command
            # (cogs.ui.preflight).
            tree_cls=CampfireTree,
            # Discord's answers counted as they come (429s, edits).
            http_trace=self.metrics.discord_trace(),
        )
        self.settings = settings
        self.channel_period = channel_period
        self.scheduler = AsyncIOScheduler()
        #: Taking back, once connected, what this instance held before it restarted.
        self.resuming: asyncio.Task[None] | None = None
        #: Set when the turns cut off by the restart may be announced. A front end that shows
        #: the story again first (the console: its stand-in starts empty) clears it until it
        #: has, so that each notice, with its Retry, comes below the story, as in Discord.
        self.may_announce = asyncio.Event()
        self.may_announce.set()
        #: /healthz and /metrics, when CAMPFIRE_METRICS_PORT is set.
        self.operations: OperationsServer | None = None

    async def on_message(self, message: discord.Message, /) -> None:
        """Campfire has no text commands: a message is play or nothing (``cogs.message_play``
        listens for it), never looked up as a command (commands.Bot's default would log every
        mention of the bot as an unknown command)."""

    async def setup_hook(self) -> None:
        from cogs.ui.discovery import load_cogs, persistent_items
        from cogs.ui.narration import Narrator
        from cogs.ui.pacing import RatePacer, process_budget

        if self.commands_only:
            # The cogs declare the commands; loading one asks nothing of the services.
            await load_cogs(self)
            return
        self.services = await build_services(self.settings)
        self.services.play.intake.observer = self.metrics
        self.services.leases.observer = self.metrics
        self.metrics.watch_queue(self.services.play.queue)
        await self._serve_operations()
        self.background = BackgroundWork(self.services.jobs)
        settings = self.settings
        budget = process_budget(
            settings.discord_requests_per_second,
            None if settings.shard_ids is None else len(settings.shard_ids),
            settings.shard_count,
        )
        pacer = (
            RatePacer(global_per_second=budget)
            if self.channel_period is None
            else RatePacer(per_seconds=self.channel_period, global_per_second=budget)
        )
        self.narrator = Narrator(self, pacer)
        self.round_panels = RoundPanels(self)
        # Found where they are declared (cogs.ui.discovery): a cog module is loaded, and a
        # persistent button registered, for being there.
        await load_cogs(self)
        self.add_dynamic_items(*persistent_items())
        self.scheduler.add_job(
            self.announce_interrupted_turns,
            "interval",
            seconds=LEASE_SWEEP_SECONDS,
            id="lease-sweep",
            coalesce=True,
            max_instances=1,
        )
        schedule_background_work(self.scheduler, self.services, self.settings, self.background)
        self.scheduler.start()
        # setup_hook runs before the gateway connects, so waiting for READY here would never end.
        self.resuming = asyncio.create_task(self.resume_after_restart(), name="resume")
        # Everything loaded so far (modules, the ORM's metadata, the cogs: some 150,000 objects)
        # lives as long as the process: moved out of the collector's reach, so that a full
        # collection, which runs on the event loop, walks only what turns create. Without it a
        # full collection took 150-250 ms on a two-core machine, every player's wait
        # (the hostile-scripts trial's loop stalls); Python's gc.freeze documents this use.
        # Once a process: a second bot in it (tests, a restart in place) would freeze what the
        # first left behind, which then could never be collected.
        freeze_startup_objects()
        # The command tree is synced on request (`python -m bot sync`), never here: Discord
        # allows 200 command creations a day per server.

    async def _serve_operations(self) -> None:
        port = self.settings.metrics_port
        if port is None:
            return
        server = OperationsServer(
            self.metrics, self.health, host=self.settings.metrics_host, port=port
        )
        try:
            await server.start()
        except OSError as error:
            await server.stop()
            raise ConfigError(
                f"CAMPFIRE_METRICS_PORT: could not listen on {self.settings.metrics_host}:{port} "
                f"({error.strerror or error}). Is another process using it?"
            ) from None
        self.operations = server

    async def health(self) -> str | None:
        """Why this process is not healthy (/healthz), or None."""
        return await health_problem(self.services.db, self.is_ready())

    async def resume_after_restart(self) -> None:
        """Take back at once what this instance held before it restarted (a crash leaves its
        turn and job leases behind, held by its earlier incarnation), and tell the channels
        whose turn was cut off, with its Retry.

        Not under the reaping job's lease: these leases are this instance's own, and a lease
        reaped by two processes at once is still reported by one (the freeing UPDATE decides).
        """
        await self.wait_until_ready()
        try:
            await self.services.jobs.reap_earlier()
            found = await self.services.play.reap_interrupted()
        except Exception:
            log.exception("could not take back the leases held before the restart")
            return
        await self.may_announce.wait()
        await self._announce(found)

    async def announce_interrupted_turns(self) -> None:
        """Tell channels whose turn died with its process that it was cut off.

        One process reaps at a time (a job lease); each cut-off turn is reported once anyway,
        by the reaper or by the next claim of its turn lease."""
        found = await self.background.run_alone(
            LEASE_REAPING, "lease reaping", self.services.play.reap_interrupted
        )
        await self._announce(found or [])

    async def _announce(self, found: list[tuple[int, TurnInterrupted]]) -> None:
        for channel_id, event in found:
            # A partial messageable sends by id alone: DM channels are not in discord.py's
            # cache after a restart (get_channel answers None), nor are threads the gateway has
            # not synced, archived ones above all (discord.py: Client.get_partial_messageable;
            # discord-api-docs, Threads: "archived threads are not synced up-front").
            channel = self.get_partial_messageable(channel_id)
            if await self._locked_away(channel_id):
                # Discord refuses a message there (50083); the players learn of it in the
                # channel the thread came from when they act there (cogs.ui.threads).
                log.info("interrupted turn in %s not announced: its thread is locked", channel_id)
                continue
            try:
                await self.narrator.announce_interrupted(channel, event)
            except discord.HTTPException as error:
                # A locked, archived thread refuses messages (50083); the others still hear.
                log.warning(
                    "could not announce an interrupted turn in %s: %s %s",
                    channel_id,
                    error.status,
                    error.text,
                )

    async def _locked_away(self, channel_id: int) -> bool:
        """Whether ``channel_id`` is a thread a moderator locked and archived, where a message
        is refused; asked of Discord only for a channel not in the cache (archived threads
        are not, nor DM channels after a restart)."""
        if self.get_channel(channel_id) is not None:
            # Active: a thread in the cache is not archived.
            return False
        thread = await thread_now(self, channel_id)
        return thread is not None and thread.archived and thread.locked

    async def close(self) -> None:
        if self.operations is not None:
            await self.operations.stop()
            self.operations = None
        if hasattr(self, "services"):
            # Turns being written are cut off now, before the model's client and the database
            # close under them (a turn would fail on its closed client instead, and its Retry
            # go to a channel nobody reads any more); each keeps its lease, to be reported
            # with its Retry after the restart (``TurnLeases.hold``).
            self.services.play.leases.closing = True
            await self.services.play.queue.close()
        if self.resuming is not None:
            self.resuming.cancel()
        if hasattr(self, "round_panels"):
            self.round_panels.cancel()
        if self.scheduler.running:
            self.scheduler.pause()
            if hasattr(self, "background"):
                await self.background.stop()
            self.scheduler.shutdown(wait=False)
        await super().close()
        if hasattr(self, "services"):
            await self.services.aclose()

    async def on_ready(self) -> None:
        # Every shard of this process is connected; the servers are those on its shards.
        shards = ", ".join(str(shard) for shard in sorted(self.shards))
        log.info(
            "connected as %s to %d servers on shards %s of %s",
            self.user,
            len(self.guilds),
            shards,
            self.shard_count,
        )
        await self.reconcile_servers()
        await self.round_panels.restore(self.serves)

    def serves(self, server_id: int | None) -> bool:
        """Whether a server's events reach this process: its shard, ``(id >> 22) % shards``,
        is one of this process's; DMs are shard 0's (discord-api-docs, Gateway, Sharding)."""
        shard = 0 if server_id is None else (server_id >> 22) % (self.shard_count or 1)
        return shard in (set(self.shards) or {0})

    async def reconcile_servers(self) -> None:
        """Servers joined or left while the bot was offline (``Profiles.reconcile_servers``):
        READY's servers are dispatched as ``guild_available``, never ``guild_join``, and a
        server left meanwhile is not told at all. Only this process's shards' servers are
        judged: another process's are its own to judge (``serves``)."""
        present = {guild.id: guild.name or "" for guild in self.guilds}
        try:
            joined, left = await self.services.profiles.reconcile_servers(present, self.serves)
        except Exception:
            log.warning("could not reconcile the servers with Discord's", exc_info=True)
            return
        if joined or left:
            log.info("servers since the last connection: %d joined, %d left", joined, left)
