"""One of the cluster trial's bot processes: Campfire's bot, running some shards, over a Discord
stand-in of its own, played over a pipe (``tests.trials.cluster`` starts several).

    python -m tests.trials.cluster_process '{"settings": {…}, "world": {…}}'

Every process builds the same world (the same servers, channels and players, with fixed ids)
and connects to its stand-in with its own ``CAMPFIRE_SHARD_IDS``: the stand-in's gateway sends
a shard only its servers' events, as Discord's does, so each process hears only the servers of
its shards and the trial sends each server's commands to the process running it, which is how
Discord routes them. What the processes share is what a deployment shares: the PostgreSQL
database (and the model server).

``world``: ``worker`` (a number of this process's own, for its stand-in's ids), ``guilds``
(ids), ``channels`` (``[guild, channel, player]``: one adventure each, a
thread opened from that channel by that player) and ``threads`` (``[channel, thread]`` known
from an earlier run of this process, reopened before the bot connects, as Discord keeps them).

Standard input takes one order a line, as JSON, and each is answered with one JSON line once
the bot has finished with it:

    {"start": [[player, channel], …]}   → {"started": [[channel, thread or null, answer], …]}
    {"do": [[player, thread, action], …]}        → {"outcomes": [outcome, …], "requests": …}
    {"press": [[player, message, thread, action], …]}   (a Retry) → {"outcomes": […]}
    {"quit": true}

An order may carry ``"spread": seconds``: its sends are started evenly over that time, as
players arrive over a moment rather than in one instant. An outcome is ``{"thread", "action",
"answer", "narrated", "notices"}``: the interaction's own response (or ``interaction failed: …``
when it was not acknowledged in time), whether a narration with its buttons was posted in the
thread after it, and the bot's notices of interrupted turns there (each ``{"id", "content",
"buttons"}``). The orders of a line run together, as many players' would. The first line out is
``{"ready": pid, "notices": […]}`` once the bot has taken back what it held before a restart.
``requests`` counts what an order's sends cost at Discord: ``{"global": n, "interaction": n}``,
on the bot's global budget and through interactions' tokens.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any

from bot.config import load_settings
from bot.discord_bot import CampfireBot
from bot.standin import FakeDiscord, StandIn
from bot.standin.ratelimits import is_interaction_path
from bot.standin.records import InteractionRecord, MessageRecord

#: How long one order's work may take before the process stops waiting on the bot.
ORDER_SECONDS = 600.0
#: How an answer starts when the interaction failed on Discord's side (not acknowledged
#: within 3 s: "This interaction failed").
FAILED = "interaction failed"
OWNER_ID = 100_000_000_000_000_001


def _say(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def _labels(message: MessageRecord) -> list[str]:
    return [label or "" for label, _, _ in message.buttons]


def _notices(fake: FakeDiscord, thread: int, before: set[int]) -> list[dict[str, Any]]:
    return [
        {"id": m.id, "content": m.content, "buttons": _labels(m)}
        for m in fake.messages(thread)
        if m.id not in before and not m.is_response and "interrupted" in m.content
    ]


def build_world(fake: FakeDiscord, world: dict[str, Any]) -> None:
    owner = fake.add_user("owner", user_id=OWNER_ID)
    for gid in world["guilds"]:
        fake.world.add_guild(f"Server {gid}", owner, guild_id=gid)
    for gid, channel, player in world["channels"]:
        fake.world.add_channel(gid, f"camp-{channel}", channel_id=channel)
        fake.add_user(f"p{player}", user_id=player, member_of=[gid])
    owners = {channel: player for _, channel, player in world["channels"]}
    for channel, thread in world.get("threads", []):
        fake.world.add_thread(channel, "adventure", owners[channel], thread_id=thread)


class Player:
    """The orders of one line, played at once."""

    def __init__(self, standin: StandIn, bot: CampfireBot) -> None:
        self.standin = standin
        self.fake = standin.fake
        self.bot = bot

    async def settle(self) -> None:
        """Until the bot has handled every interaction and shown every turn: a turn queued
        behind another, waiting for one of the process's turn slots, or whose narration waits
        for the pacer, is shown after its interaction's handler ended."""
        queue = self.bot.services.play.queue
        while True:
            await self.standin.idle(timeout=ORDER_SECONDS)
            await asyncio.wait_for(self.bot.narrator.wait_idle(), ORDER_SECONDS)
            if queue.depths() == (0, 0):
                break
            await asyncio.sleep(0.2)
        await self.standin.idle(timeout=ORDER_SECONDS)

    async def _spread(
        self, sends: Sequence[Callable[[], Awaitable[Any]]], spread: float
    ) -> list[Any]:
        """Each send started ``spread / len(sends)`` seconds after the one before, as players
        arrive over a moment rather than in one instant; all awaited together."""
        gap = spread / len(sends) if sends else 0.0

        async def send(i: int, go: Callable[[], Awaitable[Any]]) -> Any:
            await asyncio.sleep(i * gap)
            return await go()

        return await asyncio.gather(*(send(i, go) for i, go in enumerate(sends)))

    async def start(self, orders: list[list[int]], spread: float) -> dict[str, Any]:
        fake = self.fake
        sends = [partial(fake.slash, p, c, "start") for p, c in orders]
        records = await self._spread(sends, spread)
        await self.settle()
        started = []
        for (_, channel), record in zip(orders, records, strict=True):
            threads = self.fake.threads(channel)
            started.append([channel, threads[-1] if threads else None, self._answer(record)])
        return {"started": started}

    def _answer(self, record: InteractionRecord) -> str:
        """The interaction's own response, or what Discord showed when it failed."""
        if record.failed:
            return f"{FAILED}: {record.failed}"
        if record.original_message_id is None:
            return ""
        return self.fake.message(record.original_message_id).content

    async def play(self, orders: list[list[Any]], *, press: bool, spread: float) -> dict[str, Any]:
        fake = self.fake
        threads = [order[-2] for order in orders]
        before = {t: {m.id for m in fake.messages(t)} for t in threads}
        requests_before = len(fake.requests)
        if press:
            sends = [partial(fake.press, p, m, label="Retry") for p, m, _, _ in orders]
        else:
            sends = [partial(fake.slash, p, t, "do", action=a) for p, t, a in orders]
        records = await self._spread(sends, spread)
        await self.settle()
        outcomes = []
        for order, record in zip(orders, records, strict=True):
            thread, action = order[-2], order[-1]
            answer = self._answer(record)
            new = [m for m in fake.messages(thread) if m.id not in before[thread]]
            narrated = any(
                not m.is_response and "Undo" in _labels(m) and "interrupted" not in m.content
                for m in new
            )
            outcomes.append(
                {
                    "thread": thread,
                    "action": action,
                    "answer": answer,
                    "narrated": narrated,
                    "notices": _notices(fake, thread, before[thread]),
                }
            )
        # What the orders cost at Discord: on the bot's global budget, and through
        # interactions' tokens (off it: discord-api-docs, Rate Limits, Global Rate Limit).
        made = [r for r in fake.requests[requests_before:] if r.status != 429]
        through = sum(1 for r in made if is_interaction_path(r.path))
        return {
            "outcomes": outcomes,
            "requests": {"global": len(made) - through, "interaction": through},
        }


async def serve(settings: dict[str, Any], world: dict[str, Any]) -> None:
    bot = CampfireBot(load_settings(**settings))
    standin = StandIn(bot)
    fake = standin.fake
    # Ids this process's stand-in makes (interactions, messages, threads) never collide with
    # another process's, as Discord's are unique across the whole of it.
    fake.world.worker = world["worker"]
    build_world(fake, world)
    known = [thread for _, thread in world.get("threads", [])]
    async with standin:
        before = {t: {m.id for m in fake.messages(t)} for t in known}
        assert bot.resuming is not None
        await bot.resuming
        await standin.idle(timeout=ORDER_SECONDS)
        notices = [{"thread": t, **n} for t in known for n in _notices(fake, t, before[t])]
        _say({"ready": os.getpid(), "notices": notices})
        player = Player(standin, bot)
        while line := await asyncio.to_thread(sys.stdin.readline):
            order = json.loads(line)
            if order.get("quit"):
                break
            spread = float(order.get("spread", 0.0))
            if "start" in order:
                _say(await player.start(order["start"], spread))
            elif "do" in order:
                _say(await player.play(order["do"], press=False, spread=spread))
            else:
                _say(await player.play(order["press"], press=True, spread=spread))
        _say({"failures": [str(f) for f in fake.failures]})


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    logging.basicConfig(
        level=logging.WARNING,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    spec = json.loads(args[0])
    asyncio.run(serve(spec["settings"], spec["world"]))


if __name__ == "__main__":
    main()
