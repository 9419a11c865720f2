"""StandIn: runs a real discord.py client against the stand-in instead of Discord.

discord.py runs unmodified; only its two base addresses are redirected for the duration:
``Route.BASE`` (REST, shared by the webhook adapter) and ``DiscordWebSocket.DEFAULT_GATEWAY``
(a plain ``Client`` connects there directly; an ``AutoShardedClient`` without a shard count
asks ``/gateway/bot``, which answers with the stand-in's address), and the client's waits at
start-up are shortened (see ``start``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from types import TracebackType

import discord
import discord.http
import yarl
from discord.gateway import DiscordWebSocket

from .ratelimits import CHANNEL_PERIOD
from .server import FakeDiscord

START_TIMEOUT_S = 15.0
# discord.py waits this long after the last GUILD_CREATE before READY; the stand-in sends all
# of them at once, so a short wait is enough and keeps tests fast.
GUILD_READY_TIMEOUT_S = 0.05


def point_at(fake: FakeDiscord) -> tuple[str, yarl.URL]:
    """Send discord.py's requests and gateway connections to ``fake`` (one class: the webhook
    adapter imports ``discord.http.Route``); returns what ``point_back`` restores."""
    saved = (discord.http.Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY)
    discord.http.Route.BASE = fake.api_base
    DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(fake.gateway_url)
    return saved


def point_back(saved: tuple[str, yarl.URL]) -> None:
    discord.http.Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY = saved


class StandIn:
    """``async with StandIn(bot) as standin:`` → the bot is logged in and ready.

    ``fake``: a stand-in Discord already running (another ``StandIn``'s), for a bot that
    restarts while Discord stays up: it logs in to the same servers, channels and messages.
    That Discord is left running when this bot stops. ``channel_period``: a new stand-in's
    per-channel message window (``ratelimits.RateLimiter``).
    """

    def __init__(
        self,
        client: discord.Client,
        *,
        token: str = "standin-bot-token",
        fake: FakeDiscord | None = None,
        channel_period: float = CHANNEL_PERIOD,
    ) -> None:
        self.client = client
        self._owns_fake = fake is None
        self.fake = fake if fake is not None else FakeDiscord(channel_period=channel_period)
        self.fake.client = client
        self._token = token
        self._task: asyncio.Task[None] | None = None
        self._saved: tuple[str, yarl.URL] | None = None

    async def start(self) -> None:
        if self._owns_fake:
            await self.fake.start()
        self._saved = point_at(self.fake)
        self.client._connection.guild_ready_timeout = min(
            self.client._connection.guild_ready_timeout, GUILD_READY_TIMEOUT_S
        )
        # discord.py waits 5 s before each shard's identify after the first, Discord's identify
        # rate; the stand-in does not limit identifies, so the shards connect at once. Set on
        # the instance: discord.py looks the hook up there (Client._call_before_identify_hook).
        self.client.before_identify_hook = _identify_at_once  # type: ignore[method-assign]
        self._task = asyncio.create_task(self.client.start(self._token), name="standin-client")
        try:
            await self._wait_ready()
            await self._wait_ready_handlers()
        except BaseException:
            await self.stop()
            raise

    async def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        assert self._task is not None
        while True:
            if self._task.done():
                exc = self._task.exception()
                raise RuntimeError("the client stopped while starting") from exc
            # Ready: every shard of the client has identified, and has every guild its shards
            # hold (a client running only some shards never hears of the others').
            if self.client.is_ready() and all(
                (g := self.client.get_guild(gid)) is not None and not g.unavailable
                for gid in self.fake.gateway.held_guilds()
            ):
                return
            if time.monotonic() > deadline:
                raise TimeoutError("the client did not become ready on the stand-in")
            await asyncio.sleep(0.005)

    async def _wait_ready_handlers(self) -> None:
        """The client's ``on_ready`` handlers have run (Campfire's reconciles the servers with
        the database there): a test that starts playing at once would otherwise race them, and
        their writes would look like the first interaction's."""
        ready = {t for t in asyncio.all_tasks() if t.get_name() == "discord.py: on_ready"}
        if ready:
            await asyncio.wait(ready, timeout=START_TIMEOUT_S)

    async def stop(self) -> None:
        if not self.client.is_closed():
            await self.client.close()
        if self._task is not None:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(self._task, 5)
            self._task = None
        if self._owns_fake:
            await self.fake.close()
        if self._saved is not None:
            point_back(self._saved)
            self._saved = None

    async def idle(self, timeout: float | None = 60.0) -> None:  # noqa: ASYNC109 - a wait limit
        """Wait until the bot has finished handling every interaction it was sent.

        discord.py runs each command, button and modal handler in a task it names; once none
        of those is running and no request has been made for a moment, whatever the user did
        has had its whole effect (a turn streamed and saved, its final edit landed). ``timeout``
        None waits as long as that takes (the console: a turn may take minutes).
        """
        deadline = asyncio.get_running_loop().time() + (
            timeout if timeout is not None else float("inf")
        )
        while True:
            await self.fake.settle()
            busy = handler_tasks()
            if not busy:
                await self.fake.settle()
                if not handler_tasks():
                    return
                continue
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                raise TimeoutError(f"the bot was still handling interactions after {timeout} s")
            await asyncio.wait(busy, timeout=None if timeout is None else remaining)

    async def __aenter__(self) -> StandIn:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()


async def _identify_at_once(shard_id: int | None, *, initial: bool = False) -> None:
    return None


#: Names discord.py gives the tasks that run interaction handlers (not view time-outs), and the
#: event listeners' (``on_interaction`` records who acted): a test that ends while a listener
#: still writes would close the database under it.
HANDLER_TASK_PREFIXES = (
    "discord.py: ",
    "CommandTree-invoker",
    "discord-ui-view-dispatch-",
    "discord-ui-dynamic-item-",
    "discord-ui-modal-dispatch-",
)


def handler_tasks() -> set[asyncio.Task]:
    return {
        task
        for task in asyncio.all_tasks()
        if not task.done() and task.get_name().startswith(HANDLER_TASK_PREFIXES)
    }
