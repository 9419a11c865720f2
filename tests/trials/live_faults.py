"""Faults injected into a running Campfire: the model server's, Discord's and the database's.

The bot runs here, on the Discord stand-in, in a thread of a server channel, with the fake
model server behind it. For each fault the player acts once with the fault on, then as the bot
offers: Retry under a failed turn (or the action sent again where no Retry is offered, as for
a refused API key), until the action plays or its bound passes (then it is stuck). After each:
the database check and the action counts (``Tally.check``).

* model server: 500, 429 (Retry-After 1 s), 401, a timeout before any answer, a stream that
  goes silent halfway (both end by the read timeout, ``MODEL_TIMEOUT``), a dropped connection,
  a malformed chunk, an empty reply and a stream that never ends (ended by the limit on a whole
  reply, ``model_reply_seconds``; a Campfire without that limit is stuck on it, and the trial
  then drops the stream itself to go on). The failed turn must store nothing and say so.
* Discord: message edits in the adventure's thread answered 500 (twice), 503 (three times) and
  403 Missing Permissions (every edit, for the whole turn). The turn must be stored once, and
  the next action must play.
* the database: another connection holds the write lock (SQLite: ``BEGIN IMMEDIATE``;
  PostgreSQL: the adventure's row, ``FOR UPDATE``) while the turn commits, for longer than
  SQLite's busy timeout. The turn may fail politely (with Retry) or succeed after; after the
  lock goes, play must go on.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from bot.config import load_settings
from bot.discord_bot import CampfireBot
from bot.standin import (
    INTERNAL_SERVER_ERROR,
    MISSING_PERMISSIONS,
    SERVICE_UNAVAILABLE,
    DiscordError,
    FakeDiscord,
    StandIn,
)
from bot.standin.records import InteractionRecord
from engine.platform.coordination.leases import DEFAULT_TTL as TURN_TTL
from engine.storage.database import Database
from engine.storage.dialect import SQLITE_BUSY_TIMEOUT_MS
from tests.fakes.openai_server import FakeModelServer, Reply
from tests.trials.tally import Tally, stored_form

Say = Callable[[str], None]

#: Seconds past a fault's own time limits before play counts as stuck.
MARGIN = 8.0
#: How long the database stays locked: past SQLite's busy timeout.
LOCK_SECONDS = SQLITE_BUSY_TIMEOUT_MS / 1000 + 2
#: How often the player tries again while the narrator is "still writing".
AGAIN_SECONDS = 1.0
REPLY = (
    "The door gives with a groan. Beyond it the stair winds down into the dark, and from "
    "somewhere below comes the slow drip of water and a hum like a held breath."
)


@dataclass
class Outcome:
    """What the player saw of one interaction: its answer, and the bot's new messages."""

    answer: str
    buttons: list[str]
    answer_id: int | None
    messages: list[tuple[int, str, list[str]]]
    finished: bool  # the bot was done with it within the bound
    record: InteractionRecord = field(repr=False)
    before: set[int] = field(repr=False)
    #: Who the story names as acting: the player's display name in a server.
    actor: str = "You"

    @property
    def failed(self) -> bool:
        return self.answer.startswith("⚠") or "\n⚠" in self.answer

    def played(self, action: str) -> bool:
        """Its action line, then a narration with the turn's buttons."""
        return self.answer == stored_form(action, self.actor) and any(
            "Undo" in buttons for _, _, buttons in self.messages
        )


@dataclass
class Live:
    bot: CampfireBot
    standin: StandIn
    fake: FakeDiscord
    db: Database
    thread: int
    player: int
    #: How the story names the player's actions (``stored_form``): their display name.
    actor: str
    log: LogCount = field(default_factory=lambda: LogCount())

    def stored_form(self, action: str) -> str:
        return stored_form(action, self.actor)

    async def settle(self, bound: float) -> bool:
        try:
            await self.standin.idle(timeout=bound)
        except TimeoutError:
            return False
        return True

    def _before(self) -> set[int]:
        return {m.id for m in self.fake.messages(self.thread)}

    def _outcome(self, record: InteractionRecord, before: set[int], finished: bool) -> Outcome:
        answer, buttons = "", []
        if record.original_message_id is not None:
            original = self.fake.message(record.original_message_id)
            answer = original.content
            buttons = [label or "" for label, _, _ in original.buttons]
        new = [
            (m.id, m.content, [label or "" for label, _, _ in m.buttons])
            for m in self.fake.messages(self.thread)
            if m.id not in before and not m.is_response and not m.ephemeral
        ]
        return Outcome(
            answer, buttons, record.original_message_id, new, finished, record, before, self.actor
        )

    def refresh(self, outcome: Outcome) -> Outcome:
        """The same interaction, looked at again once the bot is done with it."""
        return self._outcome(outcome.record, outcome.before, True)

    async def act(self, action: str, bound: float) -> Outcome:
        before = self._before()
        record = await self.fake.slash(self.player, self.thread, "do", action=action)
        return self._outcome(record, before, await self.settle(bound))

    async def retry(self, outcome: Outcome, bound: float) -> Outcome:
        assert outcome.answer_id is not None
        before = self._before()
        record = await self.fake.press(self.player, outcome.answer_id, label="Retry")
        return self._outcome(record, before, await self.settle(bound))

    async def finish(self, outcome: Outcome, action: str, bound: float) -> tuple[Outcome, str]:
        """Follow a failed turn the way the bot offers until the action plays or ``bound``
        seconds pass; the last outcome and the way taken, in words."""
        deadline = time.monotonic() + bound
        ways = []
        while not outcome.played(action) and time.monotonic() < deadline:
            if outcome.failed and "Retry" in outcome.buttons:
                ways.append("Retry")
                outcome = await self.retry(outcome, deadline - time.monotonic())
            else:
                ways.append("sent again")
                outcome = await self.act(action, deadline - time.monotonic())
            if not outcome.played(action) and "still writing" in outcome.answer:
                await asyncio.sleep(AGAIN_SECONDS)
        return outcome, " → ".join(_runs(ways)) or "played at once"


class LogCount(logging.Handler):
    """Counts the warnings and errors logged, fault by fault."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def since(self, mark: int) -> str:
        errors = [r for r in self.records[mark:] if r.levelno >= logging.ERROR]
        if not errors:
            return ""
        first = errors[0].getMessage().splitlines()[0][:100]
        return f" [{len(errors)} error{'s' if len(errors) > 1 else ''} logged: {first}]"


def _runs(ways: list[str]) -> list[str]:
    out: list[str] = []
    for way in ways:
        if out and out[-1].split(" ×")[0] == way:
            count = int(out[-1].split(" ×")[1]) + 1 if " ×" in out[-1] else 2
            out[-1] = f"{way} ×{count}"
        else:
            out.append(way)
    return out


@asynccontextmanager
async def campfire(settings: dict[str, Any], log_path: Path) -> AsyncIterator[Live]:
    """The bot on the stand-in, an adventure started in a thread, its logs counted and filed."""
    count = LogCount()
    to_file = logging.FileHandler(log_path)
    to_file.setLevel(logging.WARNING)
    to_file.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(count)
    root.addHandler(to_file)
    root.setLevel(logging.WARNING)
    bot = CampfireBot(load_settings(**settings))
    standin = StandIn(bot)
    fake = standin.fake
    guild = fake.add_guild("The Hearth")
    channel = fake.add_channel(guild, "adventures")
    name = "alice"
    player = fake.add_user(name, member_of=[guild], manage_guild=True)
    db = Database(settings["database_url"])
    try:
        async with standin:
            await fake.slash(player, channel, "start")
            await standin.idle()
            (thread,) = fake.threads(channel)
            yield Live(bot, standin, fake, db, thread, player, name, count)
            await standin.idle()
    finally:
        await db.dispose()
        root.removeHandler(count)
        root.removeHandler(to_file)
        to_file.close()


# --- the model server --------------------------------------------------------------------------


PROVIDER_FAULTS: tuple[tuple[str, Reply, float], ...] = (
    # name, the faulty reply, seconds the player waits before pressing Retry
    ("500", Reply(fault="500"), 0.0),
    ("429, Retry-After 1 s", Reply(fault="429", retry_after=1.0), 1.0),
    ("401", Reply(fault="401"), 0.0),
    ("timeout (no answer)", Reply(fault="timeout"), 0.0),
    ("stream gone silent", Reply(text=REPLY, fault="stall", delay=0.02), 0.0),
    ("disconnect mid-stream", Reply(text=REPLY, fault="disconnect", delay=0.02), 0.0),
    ("malformed chunk", Reply(text=REPLY, fault="malformed"), 0.0),
    ("empty reply", Reply(fault="empty"), 0.0),
    ("endless stream", Reply(text=REPLY, fault="endless", delay=0.02), 0.0),
)


async def provider_faults(
    live: Live,
    model: FakeModelServer,
    tally: Tally,
    limits: tuple[float, float],
    say: Say,
    faults: tuple[tuple[str, Reply, float], ...] = PROVIDER_FAULTS,
) -> None:
    timeout, reply_seconds = limits
    bound = timeout + reply_seconds + MARGIN
    for number, (name, reply, wait) in enumerate(faults, start=1):
        where = f"model {name}"
        action = f"open door {number}"
        tally.sent.add(live.stored_form(action))
        mark = len(live.log.records)
        model.queue(reply)
        tally.injected += 1
        outcome = await live.act(action, bound)
        cut = ""
        if not outcome.finished:
            tally.problem("stuck", f"{where}: the turn was still running after {bound:.0f} s")
            # Dropped here, so that the trial goes on: the bot never ended it.
            model.cut_endless_streams()
            cut = f"STILL RUNNING after {bound:.0f} s, cut by the trial: "
            await live.settle(60)
            outcome = live.refresh(outcome)
        stored = await tally.check(live.db, where, settled=True)
        if stored[live.stored_form(action)]:
            tally.problem("half_written", f"{where}: the turn was stored though its reply failed")
        first = outcome
        await asyncio.sleep(wait)
        outcome, way = await live.finish(outcome, action, bound)
        if outcome.played(action):
            tally.told.add(live.stored_form(action))
        else:
            tally.problem("stuck", f"{where}: the action did not play after the fault")
        await tally.check(live.db, where, settled=True)
        say(
            f"  {where}: {cut}{_said(first)} | Retry "
            f"{'offered' if 'Retry' in first.buttons else 'NOT offered'}; {way}; "
            f"{'played' if outcome.played(action) else 'NOT played'}{live.log.since(mark)}"
        )


def _said(outcome: Outcome) -> str:
    line = outcome.answer.replace("\n", " ")
    return repr(line if len(line) <= 110 else line[:107] + "…")


# --- Discord -----------------------------------------------------------------------------------


DISCORD_FAULTS: tuple[tuple[str, DiscordError, int | None], ...] = (
    ("500 on two edits", INTERNAL_SERVER_ERROR, 2),
    ("503 on three edits", SERVICE_UNAVAILABLE, 3),
    ("403 Missing Permissions on every edit", MISSING_PERMISSIONS, None),
)


async def discord_faults(live: Live, model: FakeModelServer, tally: Tally, say: Say) -> None:
    # discord.py sleeps 1 + 2 × attempt seconds between its own retries of a 500; the
    # streaming editor retries its final edit too.
    bound = 30.0 + MARGIN
    for number, (name, error, times) in enumerate(DISCORD_FAULTS, start=1):
        where = f"Discord {name}"
        action = f"climb stair {number}"
        tally.sent.add(live.stored_form(action))
        mark = len(live.log.records)
        answered = len(live.fake.faults.injected)
        # A narration long enough to be streamed in several edits.
        model.queue(Reply(text=REPLY, delay=0.04))
        live.fake.faults.fail_edits(error, times=times, channel_id=live.thread)
        tally.injected += 1
        outcome = await live.act(action, bound)
        live.fake.faults.clear()
        if not outcome.finished:
            tally.problem("stuck", f"{where}: the bot was still busy after {bound:.0f} s")
            await live.settle(60)
            outcome = live.refresh(outcome)
        hits = len(live.fake.faults.injected) - answered
        stored = await tally.check(live.db, where, settled=True)
        if outcome.played(action):
            tally.told.add(live.stored_form(action))
        count = stored[live.stored_form(action)]
        if count == 0:
            tally.problems.append(f"{where}: the turn was not stored ({outcome.answer!r})")
        shown = _shown(live, outcome)
        # The bot must still play: the next action, with Discord well again.
        after = await _next_action(live, tally, where, f"walk on {number}", bound)
        await tally.check(live.db, where, settled=True)
        say(
            f"  {where}: {hits} edit(s) answered {error.status}; turn stored {count}×, "
            f"{shown}; next action {after}{live.log.since(mark)}"
        )


async def _next_action(live: Live, tally: Tally, where: str, action: str, bound: float) -> str:
    """After a fault, the bot must still play: the next action, with the fault gone. Counted
    stuck when it does not; "played" or "NOT played" for the report."""
    tally.sent.add(live.stored_form(action))
    outcome = await live.act(action, bound)
    if outcome.played(action):
        tally.told.add(live.stored_form(action))
        return "played"
    tally.problem("stuck", f"{where}: the next action did not play ({outcome.answer!r})")
    return "NOT played"


def _shown(live: Live, outcome: Outcome) -> str:
    """How the narration looks to the player at the end."""
    narration = [(content, buttons) for _, content, buttons in outcome.messages]
    if not narration:
        return "no narration message"
    text, buttons = narration[-1]
    final = REPLY in " ".join(content for content, _ in narration)
    return (
        f"narration {'complete' if final else 'cut short'} in {len(narration)} message(s)"
        f"{', with its buttons' if 'Undo' in buttons else ', without its buttons'}"
    )


# --- the database ------------------------------------------------------------------------------


class Lock:
    """Another connection holding the database's write lock (SQLite) or the adventure's row
    (PostgreSQL), as a long transaction elsewhere would."""

    def __init__(self, url: str, adventure_id: int) -> None:
        self.url = url
        self.adventure_id = adventure_id
        self._sqlite: sqlite3.Connection | None = None
        self._release: asyncio.Event = asyncio.Event()
        self._held: asyncio.Event = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def take(self) -> None:
        parsed = make_url(self.url)
        if parsed.get_backend_name() == "sqlite":
            assert parsed.database
            self._sqlite = sqlite3.connect(
                parsed.database, isolation_level=None, check_same_thread=False, timeout=30
            )
            await asyncio.to_thread(self._sqlite.execute, "BEGIN IMMEDIATE")
            return
        self._task = asyncio.create_task(self._hold_row())
        await self._held.wait()

    async def _hold_row(self) -> None:
        engine = create_async_engine(self.url)
        try:
            async with engine.connect() as connection, connection.begin() as transaction:
                await connection.execute(
                    text("SELECT id FROM adventures WHERE id = :id FOR UPDATE"),
                    {"id": self.adventure_id},
                )
                self._held.set()
                await self._release.wait()
                await transaction.rollback()
        finally:
            await engine.dispose()

    async def release(self) -> None:
        if self._sqlite is not None:
            await asyncio.to_thread(self._sqlite.execute, "ROLLBACK")
            self._sqlite.close()
        if self._task is not None:
            self._release.set()
            await self._task


async def database_lock(live: Live, model: FakeModelServer, tally: Tally, say: Say) -> None:
    where = f"database locked for {LOCK_SECONDS:.0f} s (busy timeout {SQLITE_BUSY_TIMEOUT_MS} ms)"
    action = "read map"
    tally.sent.add(live.stored_form(action))
    mark = len(live.log.records)
    adventure = await live.bot.services.play.adventure_in(live.thread)
    assert adventure is not None
    bound = LOCK_SECONDS + TURN_TTL + MARGIN
    model.queue(Reply(text=REPLY, delay=0.03))
    base = model.content_chunks
    turn = asyncio.create_task(live.act(action, bound))
    await asyncio.to_thread(model.wait_for_chunks, base + 5, 10)
    lock = Lock(live.db.url, adventure.adventure_id)
    await lock.take()
    tally.injected += 1
    locked_at = time.monotonic()
    await asyncio.sleep(LOCK_SECONDS)
    await lock.release()
    outcome = await turn
    if not outcome.finished:
        tally.problem("stuck", f"{where}: the turn was still running {bound:.0f} s after")
        await live.settle(60)
        outcome = live.refresh(outcome)
    first = outcome
    stored = await tally.check(live.db, where, settled=True)
    if stored[live.stored_form(action)] and not outcome.played(action):
        tally.problems.append(f"{where}: stored, but the player was not shown it played")
    outcome, way = await live.finish(outcome, action, bound)
    if outcome.played(action):
        tally.told.add(live.stored_form(action))
    else:
        tally.problem("stuck", f"{where}: the action did not play once the lock was gone")
    resumed = time.monotonic() - locked_at - LOCK_SECONDS
    after = await _next_action(live, tally, where, "fold map", bound)
    await tally.check(live.db, where, settled=True)
    say(
        f"  {where}: {_said(first)}; {way}; "
        f"{'played' if outcome.played(action) else 'NOT played'} {resumed:.1f} s after the "
        f"lock went; next action {after}{live.log.since(mark)}"
    )
