"""A turn's cost beyond the model: write transactions, and the engine's time.

Run by hand (it is not part of the normal test run)::

    .venv/bin/python -m tests.benchmarks.bench_turn [--turns 30] [--database-url URL]

Campfire's real bot runs on the local Discord stand-in against the fake model server (in this
process), on a temporary SQLite database unless ``--database-url`` names an empty one. Two
figures, measured in one run:

* **write transactions per turn**: ``--turns`` actions (``/do``), one at a time, spread over six
  adventure threads so that no channel's edit window holds a turn up. For each, the write
  transactions committed from its dispatch until the bot is idle again are counted by
  SQLAlchemy's connection events (``tests.write_recorder.WriteTransactions``): the request with
  its lease, the turn's store, the messages that show it. A person's first action in a place
  also records their contact (once an hour): those are played before counting.
* **overhead per turn**: the engine's whole turn as the front end calls it
  (``PlayService.act``: the request recorded and the lease claimed, the context, the model's
  stream, the store) against the same model stream requested alone, alternately, at ~50 story
  entries; the p50 of the difference.

It prints one summary line, ``turn: <k> write transactions, overhead p50 <ms> ms`` (k: the most
any turn committed), then the details. Target: k <= 3.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from bot.config import load_settings
from bot.discord_bot import CampfireBot
from bot.standin import StandIn
from engine.llm.providers.base import ChatMessage, GenerationParams
from engine.llm.providers.openai_compat import OpenAICompatibleProvider
from engine.people.access.rules import Actor
from engine.story.actions import ActionType, PlayerAction
from engine.turns.events import TurnDone
from tests.fakes.openai_server import FakeModelServer
from tests.write_recorder import WriteTransactions

WRITE_TARGET = 3
THREADS = 6
REPLY = "The lantern flares, and the reeds fall silent as something wades closer. " * 3


@dataclass
class Figures:
    writes: list[int] = field(default_factory=list)
    kinds: dict[str, int] = field(default_factory=dict)
    stream_ms: list[float] = field(default_factory=list)
    turn_ms: list[float] = field(default_factory=list)

    def summary(self) -> str:
        pairs = zip(self.turn_ms, self.stream_ms, strict=True)
        overhead = statistics.median(t - s for t, s in pairs)
        return (
            f"turn: {max(self.writes)} write transactions, overhead p50 {overhead:.1f} ms "
            f"(model stream alone p50 {statistics.median(self.stream_ms):.1f} ms, "
            f"{len(self.writes)} turns counted, {len(self.turn_ms)} timed)"
        )


async def settled(standin: StandIn, bot: CampfireBot) -> None:
    """Until the bot is idle, memory work a turn asked for included."""
    while True:
        await standin.idle()
        jobs = [j.id for j in bot.scheduler.get_jobs()]
        busy = any(j.startswith("memory-") and j != "memory-sweep" for j in jobs)
        if not busy and not bot.background._running:
            return
        await asyncio.sleep(0.01)


async def raw_stream(provider: OpenAICompatibleProvider) -> float:
    started = time.perf_counter()
    messages = [ChatMessage("user", "Recent Story:\n> You light the lantern.")]
    async for _ in provider.stream(messages, GenerationParams()):
        pass
    return (time.perf_counter() - started) * 1000


async def run(turns: int, data_dir: Path, database_url: str | None) -> Figures:
    figures = Figures()
    with FakeModelServer() as model:
        model.default_text = REPLY
        settings = load_settings(
            data_dir=data_dir,
            model_url=model.base_url,
            model_name=model.model,
            model_timeout=30,
            # Its turns come faster than a person's: the limits are asked, and not reached.
            turns_per_user_per_minute=10_000,
            turns_per_adventure_per_minute=10_000,
            **({"database_url": database_url} if database_url else {}),
        )
        bot = CampfireBot(settings)
        standin = StandIn(bot)
        fake = standin.fake
        guild = fake.add_guild("The Hearth")
        channel = fake.add_channel(guild, "adventures")
        alice = fake.add_user("alice", member_of=[guild], manage_guild=True)
        provider = OpenAICompatibleProvider(model.base_url, model.model, timeout=30)
        try:
            async with standin:
                threads = []
                for _ in range(THREADS):
                    await fake.slash(alice, channel, "start")
                    await settled(standin, bot)
                    threads.append(fake.threads(channel)[-1])
                for thread in threads:  # contacts, and a warm start
                    await fake.slash(alice, thread, "do", action="light the lantern")
                    await settled(standin, bot)

                counter = WriteTransactions(bot.services.db.engine)
                with counter.counting():
                    for i in range(turns):
                        mark = len(counter.committed)
                        record = await fake.slash(
                            alice, threads[i % THREADS], "do", action=f"open door {i}"
                        )
                        await settled(standin, bot)
                        if record.failed is not None:
                            raise RuntimeError(f"turn {i} failed: {record.failed}")
                        committed = counter.since(mark)
                        figures.writes.append(len(committed))
                        for statement in committed:
                            kind = " ".join(statement.split()[:3])
                            figures.kinds[kind] = figures.kinds.get(kind, 0) + 1

                # The engine's overhead, on the first thread's adventure, alternating with the
                # model stream alone so that drift falls on both alike.
                play = bot.services.play
                actor = Actor(alice, "alice", server_id=guild, server_name="The Hearth")
                for i in range(3 + turns):
                    stream_ms = await raw_stream(provider)
                    started = time.perf_counter()
                    events = play.act(
                        actor,
                        threads[0],
                        PlayerAction(ActionType.DO, f"look around {i}", alice),
                        request_id=10**15 + i,
                    )
                    last = None
                    async for event in events:
                        last = event
                    turn_ms = (time.perf_counter() - started) * 1000
                    if not isinstance(last, TurnDone):
                        raise RuntimeError(f"engine turn {i} ended with {last!r}")
                    if i >= 3:  # the first ones warm connections and caches
                        figures.stream_ms.append(stream_ms)
                        figures.turn_ms.append(turn_ms)
                await settled(standin, bot)
        finally:
            await provider.aclose()
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--database-url", help="an empty database (default: temporary SQLite)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="campfire-bench-turn-") as tmp:
        figures = asyncio.run(run(args.turns, Path(tmp) / "data", args.database_url))
    print(figures.summary(), flush=True)
    print(f"write transactions per turn: {sorted(set(figures.writes))}; by first statement:")
    for kind, count in sorted(figures.kinds.items(), key=lambda kv: -kv[1]):
        print(f"  {count / len(figures.writes):.2f}/turn  {kind}")
    worst = max(figures.writes)
    print(f"target <= {WRITE_TARGET}: {'met' if worst <= WRITE_TARGET else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
