"""Several bot processes on one PostgreSQL database, shards split between them, one killed
with SIGKILL midway and restarted: is every turn played once, one generation at a time per
adventure, every background job once?

    python -m tests.trials.cluster --processes 3 --adventures 1000

It uses ``CAMPFIRE_TEST_POSTGRES_URL`` when set, or starts a throwaway PostgreSQL server as the
tests do (``scripts/test-postgres``, on a port of its own) and stops it at the end. Each run
gets a fresh database, which the processes, started together, migrate and seed.

Each bot process (``tests.trials.cluster_process``) runs two of ``2 × processes`` shards over
a Discord stand-in of its own that routes as Discord does (a shard hears only its servers), and
the trial sends each server's commands to the process running its shard. One fake model server
(here) answers them all, slowly enough that turns overlap, and stamps each request's start and
end. The adventures (one thread each, spread over 40 servers, one player each) play
``--rounds`` rounds of one action each; a few (``--long``) play on to 16 actions, so that
their memory work (the memory at 12, the summary at 15) is due. In round 2 the last process is
killed with SIGKILL while its turns are streaming (a quarter of them answered, others not) and
started again on the same database: its players do what the bot offers (Retry under a notice
that their turn was interrupted), or send the action again when no notice came and the story
does not hold it.

Then, from the database and the model server's log:

* lost: actions a player was shown narrated (or took back by Retry) that no story holds;
* duplicated: extra copies of an action in the stories (each action's text is its own);
* max concurrent generations per adventure: the most narration requests of one adventure the
  model server had in flight at once (1: the turn lease held across processes and the kill);
* jobs run twice: memory-bank model calls asked again for the same work (the same prompt)
  after one had been answered, not counting one cut off by the kill; and memories stored twice
  for one stretch of story;
* throughput: narrated turns a second over the rounds without a kill, against one process
  playing the same adventures on a database of its own first (``--processes 1`` skips that),
  both measured in the one run; and, for each, the turns a second per process and the requests
  the players' sends cost at Discord: those on the bot's global budget (Discord counts it per
  bot token, across every process: 50 a second) apart from those through interactions' tokens,
  which it does not count (discord-api-docs, Rate Limits, Global Rate Limit).

The database check of the fault trial (parent chains, heads, takes, leases, requests) runs at
the end too. The last line:

    cluster: <P> processes, <T> turns, lost 0, duplicated 0, max concurrent generations per
    adventure 1, jobs run twice 0, throughput <x> vs 1 process

(``throughput <x> turns/s`` instead when there is no baseline: one process, or
``--no-baseline``, as CI's quick form runs it),

and the exit status is 1 when any of the zeros (or the database check) is not.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import tempfile
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from sqlalchemy import func, select, text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine
from sqlmodel import col

from engine.storage.database import Database
from engine.storage.memory_models import Memory
from tests.fakes.openai_server import FakeModelServer, Reply
from tests.trials.child_process import ChildProcess
from tests.trials.cluster_checks import (
    BAND,
    TAG,
    action_text,
    max_concurrent_generations,
    memory_call,
    memory_calls_repeated,
    stored_tags,
    tag_of,
)
from tests.trials.cluster_process import FAILED
from tests.trials.invariants import inconsistencies
from tests.trials.needs import postgres_server, run_trial

#: The throwaway server's port when the trial starts one (the tests' default is 54329).
POSTGRES_PORT = 54339
GUILDS = 40
#: Actions the long adventures play, so that the memory (at 12) and the summary (at 15) are due.
LONG_ACTIONS = 16
KILL_ROUND = 2
#: How many times a player sends an action whose interaction failed, and the pause between.
SENDS = 8
RESEND_PAUSE = 1.0
#: The kill lands ``KILL_AFTER`` seconds after a quarter of the process's turns of the round
#: were answered by the model (others streaming or not begun), or after ``KILL_WAIT``.
KILL_WAIT = 30.0
KILL_AFTER = 0.5
START_SECONDS = 180.0
ORDER_SECONDS = 900.0
#: The memory work is done when the model server has had no memory-bank call this long.
MEMORY_QUIET_SECONDS = 8.0
MEMORY_WAIT_SECONDS = 180.0
REPLY_WORDS = 30
TOKEN_DELAY = 0.02
#: Discord ids of the trial's world: below the stand-in's own (made from the time now).
BASE_MS = 10_000_000_000
OWNER_ID = 100_000_000_000_000_001
Say = Callable[[str], None]


def snowflake(ms: int) -> int:
    return ms << 22


def shard_of(guild_id: int, shards: int) -> int:
    # discord-api-docs, Gateway: "Sharding": shard_id = (guild_id >> 22) % num_shards.
    return (guild_id >> 22) % shards


@dataclass
class Adventure:
    number: int
    guild: int
    channel: int
    player: int
    process: int = 0
    thread: int | None = None
    actions: int = 0


@dataclass
class RunResult:
    processes: int
    turns: int = 0
    lost: int = 0
    duplicated: int = 0
    max_concurrent: int = 0
    jobs_twice: int = 0
    half_written: int = 0
    #: Interactions a player sent again: failed (not acknowledged in 3 s), or "still writing".
    resent: int = 0
    throughput: float = 0.0
    #: Turns a second each process narrated, over the same rounds as ``throughput``.
    per_process: list[float] = field(default_factory=list)
    #: Requests the players' sends cost at Discord: on the bot's global budget (which Discord
    #: counts per bot token, across every process), and through interactions' tokens.
    global_requests: int = 0
    interaction_requests: int = 0
    problems: list[str] = field(default_factory=list)


class TrialModel(FakeModelServer):
    """The fake model server, whose replies name the adventure asked about ("… by the cairn
    of band 0042."), as a real model's would differ: otherwise every adventure's memories, and
    so their summaries' prompts, would be the same words, and work done once for each of two
    adventures would look like one piece of work done twice."""

    def __init__(self) -> None:
        super().__init__()
        self._asking = threading.local()

    def _record(self, entry: dict[str, Any]) -> None:
        super()._record(entry)
        self._asking.entry = entry  # the handler's thread asks for its reply next

    def _next_reply(self) -> Reply:
        entry = getattr(self._asking, "entry", None) or {}
        found = BAND.search(json.dumps(entry.get("messages"))) or TAG.search(
            json.dumps(entry.get("messages"))
        )
        band = f" by the cairn of band {found.group(1)}" if found else ""
        words = " ".join(f"word{i}" for i in range(REPLY_WORDS))
        return Reply(text=f"{words}{band}.", delay=TOKEN_DELAY)


class BotProcess(ChildProcess):
    """One bot process of the cluster (``tests.trials.cluster_process``)."""

    def __init__(self, index: int, spec: dict[str, Any], log: IO[bytes]) -> None:
        super().__init__(
            "tests.trials.cluster_process",
            spec,
            log,
            start_seconds=START_SECONDS,
            order_seconds=ORDER_SECONDS,
        )
        self.index = index
        #: What the bot posted as it started: a restarted one's notices of interrupted turns.
        self.notices: list[dict[str, Any]] = []

    async def start(self) -> dict[str, Any]:
        ready = await super().start()
        self.notices = ready["notices"]
        return ready

    async def stop(self) -> list[str]:
        """Stop it as a shutdown would; what its stand-in refused meanwhile."""
        last = await self.close()
        return last.get("failures", []) if last else []


# -- the database ---------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def fresh_database(server: str) -> AsyncIterator[str]:
    name = f"campfire_cluster_{uuid.uuid4().hex[:12]}"
    admin = create_async_engine(server, isolation_level="AUTOCOMMIT")
    try:
        async with admin.connect() as connection:
            await connection.execute(text(f'CREATE DATABASE "{name}"'))
        yield make_url(server).set(database=name).render_as_string(hide_password=False)
    finally:
        async with admin.connect() as connection:
            await connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        await admin.dispose()


# -- one run ---------------------------------------------------------------------------------


class ClusterRun:
    """``processes`` bot processes playing ``adventures`` adventures on one fresh database."""

    def __init__(
        self,
        processes: int,
        adventures: int,
        args: argparse.Namespace,
        model: FakeModelServer,
        url: str,
        work: Path,
        say: Say,
        *,
        kill: bool,
    ) -> None:
        self.count = processes
        self.args = args
        self.model = model
        self.url = url
        self.work = work
        self.say = say
        self.kill = kill
        self.shards = 2 * processes
        guilds = [snowflake(BASE_MS + g) for g in range(GUILDS)]
        self.adventures = [
            Adventure(
                number=i,
                guild=guilds[i % GUILDS],
                channel=snowflake(BASE_MS + 100_000 + i),
                player=snowflake(BASE_MS + 200_000 + i),
            )
            for i in range(adventures)
        ]
        for adventure in self.adventures:
            adventure.process = shard_of(adventure.guild, self.shards) // 2
        self.guilds = guilds
        self.bots: list[BotProcess] = []
        self.result = RunResult(processes)
        #: Actions each player was shown played (narrated, or brought back by their Retry).
        self.told: set[str] = set()
        self.narrated_by = [0] * processes  # turns each process narrated
        self.killed_at: float | None = None
        self.restarted_at: float | None = None

    def mine(self, index: int) -> list[Adventure]:
        return [a for a in self.adventures if a.process == index]

    def spec(self, index: int) -> dict[str, Any]:
        first = 2 * index
        settings = {
            "data_dir": str(self.work / f"process-{index}"),
            "instance_name": f"cluster-{index}",
            "database_url": self.url,
            "model_url": self.model.base_url,
            "model_name": self.model.model,
            "shard_count": self.shards,
            "shard_ids": f"{first}-{first + 1}",
            "discord_requests_per_second": self.args.discord_budget,
            # The trial plays faster than people: the turn rate limits are not what it checks.
            "turns_per_user_per_minute": 10_000,
            "turns_per_adventure_per_minute": 10_000,
            "log_level": "WARNING",
        }
        mine = self.mine(index)
        return {
            "settings": settings,
            "world": {
                "worker": index + 1,
                "guilds": self.guilds,
                "channels": [[a.guild, a.channel, a.player] for a in self.adventures],
                "threads": [[a.channel, a.thread] for a in mine if a.thread is not None],
            },
        }

    async def run(self) -> RunResult:
        logs = [(self.work / f"process-{i}.log").open("ab") for i in range(self.count)]
        try:
            self.bots = [BotProcess(i, self.spec(i), logs[i]) for i in range(self.count)]
            started = time.monotonic()
            # Together, on a fresh database: each migrates and seeds at start-up.
            await asyncio.gather(*(bot.start() for bot in self.bots))
            self.say(f"  {self.count} processes started in {time.monotonic() - started:.1f} s")
            await self.start_adventures()
            await self.play_rounds()
            await self.play_long()
            await self.wait_for_memories()
        finally:
            for bot in self.bots:
                for failure in await bot.stop():
                    self.result.problems.append(f"Discord stand-in refused: {failure}")
            for log in logs:
                log.close()
        await self.check()
        return self.result

    def spread(self, bot: BotProcess, sends: int) -> float:
        """Seconds over which ``sends`` of this process's players arrive: a round's whole in
        ``--spread``, fewer in proportion."""
        return self.args.spread * sends / max(1, len(self.mine(bot.index)))

    async def start_adventures(self) -> None:
        started = time.monotonic()
        by_channel = {a.channel: a for a in self.adventures}

        async def start_all(bot: BotProcess) -> None:
            pending = [[a.player, a.channel] for a in self.mine(bot.index)]
            for _ in range(SENDS):
                spread = self.spread(bot, len(pending))
                answer = await bot.order({"start": pending, "spread": spread})
                assert answer is not None, "a bot process died while starting adventures"
                again = []
                for (player, channel), (_, thread, said) in zip(
                    pending, answer["started"], strict=True
                ):
                    by_channel[channel].thread = thread
                    if thread is None and said.startswith(FAILED):
                        self.result.resent += 1
                        again.append([player, channel])
                    elif thread is None:
                        raise SystemExit(f"an adventure did not start: {said!r}")
                if not again:
                    return
                pending = again
                await asyncio.sleep(RESEND_PAUSE)
            raise SystemExit(f"{len(pending)} adventures did not start after {SENDS} tries")

        await asyncio.gather(*(start_all(bot) for bot in self.bots))
        took = time.monotonic() - started
        self.say(
            f"  {len(self.adventures)} adventures started in {took:.1f} s "
            f"({self.result.resent} /start sent again after a failed interaction)"
        )

    async def play_rounds(self) -> None:
        timed_turns, timed_seconds = 0, 0.0
        timed_by = [0] * self.count
        for number in range(1, self.args.rounds + 1):
            started, resent = time.monotonic(), self.result.resent
            narrated_before = list(self.narrated_by)
            problems = len(self.result.problems)
            killing = self.kill and number == KILL_ROUND
            narrated = await self.play_round(self.adventures, number, kill=killing)
            took = time.monotonic() - started
            note = " (one process killed and restarted)" if killing else ""
            self.say(
                f"  round {number}: {narrated} turns narrated in {took:.1f} s, "
                f"{self.result.resent - resent} actions sent again{note}"
            )
            for problem in self.result.problems[problems : problems + 3]:
                self.say(f"    problem: {problem}")
            if not killing:
                timed_turns += narrated
                timed_seconds += took
                for index, count in enumerate(self.narrated_by):
                    timed_by[index] += count - narrated_before[index]
        self.result.throughput = timed_turns / timed_seconds if timed_seconds else 0.0
        self.result.per_process = [t / timed_seconds if timed_seconds else 0.0 for t in timed_by]

    async def play_long(self) -> None:
        long = self.adventures[: self.args.long]
        if not long:
            return
        started = time.monotonic()
        for number in range(self.args.rounds + 1, LONG_ACTIONS + 1):
            await self.play_round(long, number, kill=False)
        took = time.monotonic() - started
        self.say(f"  {len(long)} adventures played on to {LONG_ACTIONS} actions in {took:.1f} s")

    async def play_round(self, adventures: list[Adventure], number: int, *, kill: bool) -> int:
        orders: dict[int, list[list[Any]]] = defaultdict(list)
        for a in adventures:
            orders[a.process].append([a.player, a.thread, action_text(a.number, number)])
        victim = self.bots[-1] if kill else None
        tasks = {
            bot.index: asyncio.create_task(self.send(bot, "do", orders[bot.index]))
            for bot in self.bots
            if orders[bot.index]
        }
        if victim is not None:
            await self.streaming(orders[victim.index], since=time.monotonic())
            await victim.kill()
            self.killed_at = time.monotonic()
        narrated = 0
        for index, task in tasks.items():
            played = await task
            if played is None:
                assert victim is not None and index == victim.index
                played = await self.recover(victim, orders[index])
            narrated += played
        return narrated

    async def send(self, bot: BotProcess, kind: str, orders: list[list[Any]]) -> int | None:
        """Send these orders (``do``: /do, ``press``: Retry) to ``bot``; a player whose
        interaction failed (not acknowledged in 3 s) or who is told the narrator is still
        writing sends the action again, as a player would. How many were narrated; None if the
        process died."""
        narrated = 0
        pending = orders
        for _ in range(SENDS):
            answer = await bot.order({kind: pending, "spread": self.spread(bot, len(pending))})
            if answer is None:
                return None
            self.result.global_requests += answer["requests"]["global"]
            self.result.interaction_requests += answer["requests"]["interaction"]
            again: list[list[Any]] = []
            for order, outcome in zip(pending, answer["outcomes"], strict=True):
                said = outcome["answer"]
                if outcome["narrated"]:
                    narrated += 1
                    self.narrated_by[bot.index] += 1
                    self.told.add(outcome["action"])
                elif said.startswith(FAILED) or "still writing" in said:
                    self.result.resent += 1
                    again.append(order)
                else:
                    self.result.problems.append(
                        f"{outcome['action']!r}: not narrated; answered {said!r}"
                    )
            if not again:
                return narrated
            pending = again
            await asyncio.sleep(RESEND_PAUSE)
        self.result.problems.append(f"{len(pending)} actions not played after {SENDS} sends")
        return narrated

    async def streaming(self, orders: list[list[Any]], since: float) -> None:
        """Until a quarter of these actions' narrations have been answered in full (stored
        then, or being stored) while others stream or wait, or ``KILL_WAIT`` seconds; then a
        moment more."""
        tags = {tag_of(action) for _, _, action in orders}
        deadline = since + KILL_WAIT
        while time.monotonic() < deadline:
            answered = {
                found.group(0)
                for r in list(self.model.requests)
                if r["_started"] >= since and "_ended" in r and not memory_call(r)
                for found in TAG.finditer(json.dumps(r.get("messages")))
            }
            if len(answered & tags) * 4 >= len(tags):
                break
            await asyncio.sleep(0.02)
        # Some of the answered turns are stored by now, others still being stored.
        await asyncio.sleep(KILL_AFTER)

    async def recover(self, bot: BotProcess, orders: list[list[Any]]) -> int:
        """The killed process started again; its players take their actions back as the bot
        offers: Retry under the notice of an interrupted turn, or the action sent again when
        no notice came and the story does not hold it."""
        bot.argument = self.spec(bot.index)
        started = time.monotonic()
        await bot.start()
        self.restarted_at = time.monotonic()
        self.say(f"  process {bot.index} killed; restarted in {self.restarted_at - started:.1f} s")
        stored = await stored_tags(self.url)
        retry: list[list[Any]] = []
        again: list[list[Any]] = []
        notices = {n["thread"]: n for n in bot.notices if "Retry" in n["buttons"]}
        for player, thread, action in orders:
            notice = notices.get(thread)
            if notice is not None and stored[tag_of(action)]:
                self.result.problems.append(
                    f"{action!r} is stored, yet the bot said its turn was interrupted: "
                    f"{notice['content']!r}"
                )
            if notice is not None and tag_of(action) in notice["content"]:
                retry.append([player, notice["id"], thread, action])
            elif not stored[tag_of(action)]:
                again.append([player, thread, action])
        narrated = 0
        for kind, orders_now in (("press", retry), ("do", again)):
            if orders_now:
                played = await self.send(bot, kind, orders_now)
                assert played is not None, "the restarted process died"
                narrated += played
        at_kill = sum(1 for _, _, action in orders if stored[tag_of(action)])
        self.say(
            f"  at the kill: {at_kill} of its {len(orders)} turns stored; "
            f"after the restart: {len(notices)} notices of interrupted turns, "
            f"{len(retry)} taken back by Retry, {len(again)} sent again, "
            f"{len(orders) - len(retry) - len(again)} left as stored"
        )
        return narrated

    async def wait_for_memories(self) -> None:
        """Until the model server has had no memory-bank call for a while (the after-turn jobs
        are done)."""
        if not self.args.long:
            return
        deadline = time.monotonic() + MEMORY_WAIT_SECONDS
        while time.monotonic() < deadline:
            calls = [r for r in self.model.requests if memory_call(r)]
            last = max((r.get("_ended", r["_started"]) for r in calls), default=0.0)
            busy = any("_ended" not in r for r in calls)
            if calls and not busy and time.monotonic() - last > MEMORY_QUIET_SECONDS:
                return
            await asyncio.sleep(1.0)
        self.result.problems.append("the memory work did not settle in time")

    async def check(self) -> None:
        result = self.result
        stored = await stored_tags(self.url)
        result.turns = sum(stored.values())
        for action in self.told:
            if stored[tag_of(action)] == 0:
                result.lost += 1
                result.problems.append(f"lost: {action!r} was shown as played, not stored")
        for tag, times in stored.items():
            if times > 1:
                result.duplicated += times - 1
                result.problems.append(f"duplicated: {tag} is stored {times}×")
        db = Database(self.url)
        try:
            for found in await inconsistencies(db, settled=True):
                result.half_written += 1
                result.problems.append(f"database: {found}")
            async with db.session() as session:
                twice = await session.execute(
                    select(col(Memory.adventure_id), col(Memory.source_start), func.count())
                    .group_by(col(Memory.adventure_id), col(Memory.source_start))
                    .having(func.count() > 1)
                )
                for adventure_id, start, copies in twice:
                    result.jobs_twice += copies - 1
                    result.problems.append(
                        f"memory of adventure {adventure_id} from entry {start} stored {copies}×"
                    )
                memories = await session.scalar(select(func.count()).select_from(Memory))
        finally:
            await db.dispose()
        result.max_concurrent = max_concurrent_generations(self.model.requests)
        asked_again = memory_calls_repeated(self.model.requests, self.killed_at)
        result.jobs_twice += asked_again
        if asked_again:
            result.problems.append(f"{asked_again} memory-bank model calls asked again")
        calls = sum(1 for r in self.model.requests if memory_call(r))
        self.say(f"  memory work: {calls} model calls, {memories} memories stored")


# -- the trial -------------------------------------------------------------------------------


async def trial(args: argparse.Namespace, server: str, say: Say) -> RunResult:
    with (
        TrialModel() as model,
        tempfile.TemporaryDirectory(prefix="campfire-cluster-") as temporary,
    ):
        # The bot processes' data folders and logs: kept where --logs says, else thrown away.
        tmp = args.logs or temporary

        async def run(processes: int, *, kill: bool) -> RunResult:
            work = Path(tmp) / f"{processes}-processes"
            work.mkdir(parents=True)
            model.requests.clear()
            async with fresh_database(server) as url:
                cluster = ClusterRun(
                    processes, args.adventures, args, model, url, work, say, kill=kill
                )
                return await cluster.run()

        baseline: RunResult | None = None
        if args.processes > 1 and args.baseline:
            say(f"1 process, {args.adventures} adventures (the baseline):")
            baseline = await run(1, kill=False)
        say(f"{args.processes} processes, {args.adventures} adventures:")
        result = await run(args.processes, kill=True)

    # With one process, or with no baseline asked for, the throughput is given as it is.
    throughput = f"throughput {result.throughput:.1f} turns/s"
    if baseline is not None:
        # The baseline's own faults count as much as the cluster's.
        result.lost += baseline.lost
        result.duplicated += baseline.duplicated
        result.jobs_twice += baseline.jobs_twice
        result.half_written += baseline.half_written
        result.max_concurrent = max(result.max_concurrent, baseline.max_concurrent)
        result.problems += [f"baseline: {p}" for p in baseline.problems]
        ratio = result.throughput / baseline.throughput if baseline.throughput else 0.0
        throughput = f"throughput {ratio:.2f}x vs 1 process"
        say(
            f"throughput: {result.throughput:.1f} turns/s with {args.processes} processes, "
            f"{baseline.throughput:.1f} with 1"
        )
    for run_result in (baseline, result):
        if run_result is None:
            continue
        each = ", ".join(f"{rate:.1f}" for rate in run_result.per_process)
        turns = max(run_result.turns, 1)
        say(
            f"{run_result.processes} process(es): turns/s per process {each}; global requests "
            f"spent {run_result.global_requests} ({run_result.global_requests / turns:.2f}/turn), "
            f"through interactions {run_result.interaction_requests}"
        )
    for problem in result.problems[:40]:
        say(f"  problem: {problem}")
    say(f"database check: {result.half_written} inconsistencies")
    say(
        f"cluster: {args.processes} processes, {result.turns} turns, lost {result.lost}, "
        f"duplicated {result.duplicated}, max concurrent generations per adventure "
        f"{result.max_concurrent}, jobs run twice {result.jobs_twice}, {throughput}"
    )
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.trials.cluster", description=__doc__)
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument("--adventures", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3, help="actions every adventure plays")
    parser.add_argument(
        "--long", type=int, default=24, help=f"adventures that play on to {LONG_ACTIONS} actions"
    )
    parser.add_argument("--logs", help="keep the bot processes' logs in this new folder")
    parser.add_argument(
        "--baseline",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="play the adventures on one process first, for the throughput ratio (CI's quick "
        "form leaves it out: it checks nothing the cluster run does not)",
    )
    parser.add_argument(
        "--spread",
        type=float,
        default=20.0,
        help="seconds over which a round's players arrive (20: a thousand players acting "
        "about every half minute)",
    )
    parser.add_argument(
        "--discord-budget",
        type=int,
        default=50,
        help="the bot's global Discord requests a second (CAMPFIRE_DISCORD_REQUESTS_PER_SECOND)",
    )
    args = parser.parse_args(argv)
    if args.processes < 1 or args.adventures < 1 or args.rounds < KILL_ROUND:
        parser.error(f"at least 1 process, 1 adventure and {KILL_ROUND} rounds")

    def say(line: str) -> None:
        print(line, flush=True)

    with postgres_server(say, POSTGRES_PORT) as server:
        result = asyncio.run(trial(args, server, say))
    failed = (
        result.lost
        or result.duplicated
        or result.max_concurrent != 1
        or result.jobs_twice
        or result.half_written
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(run_trial("cluster", main))
