"""kill -9 of the bot mid-turn and a restart on the same database, five times.

The bot runs in a child process (``tests.trials.bot_process``); the fake model runs here, so it
outlives the bot and tells how far the killed turn's reply had streamed. Each kill lands at
another point of a turn: after its first chunk, a quarter in, halfway, after its last chunk
(the bot storing it), and as the turn is stored (``outcome_hold``: it looks for a stored turn
whose request still says "running", the gap there was while the two were written by separate
transactions; they now commit together, so it finds none, and on PostgreSQL the kill lands
while the turn's transaction waits on the request's row). Then:

* the database is checked while the dead process may still hold the turn's lease;
* a new process starts on the same database and the player sends a new action, again every
  second while the bot answers that the narrator is still writing, until it plays. A restart
  may have to wait for the dead process's turn lease to expire
  (``engine.platform.coordination.leases.DEFAULT_TTL``):
  that is allowed and measured; play counts as stuck only past expiry plus a margin;
* the player takes the interrupted action back: with the Retry under the bot's notice that the
  turn was interrupted, or by sending it again when no notice came (never when it is stored);
* the database is checked again, now settled, and every action counted.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from sqlalchemy import select
from sqlmodel import col

from engine.platform.coordination.leases import DEFAULT_TTL as TURN_TTL
from engine.storage.database import Database
from engine.storage.models import Adventure
from tests.fakes.openai_server import FakeModelServer, Reply
from tests.trials.bot_process import DM_ID
from tests.trials.child_process import ChildProcess
from tests.trials.outcome_hold import OutcomeHold
from tests.trials.tally import Tally, stored_form

REPLY_WORDS = 40
CHUNK_SECONDS = 0.025
#: Seconds past the dead process's lease expiry before resumed play counts as stuck.
RESUME_MARGIN = 15.0
#: How often the player sends their action again while the narrator is "still writing".
RESEND_SECONDS = 1.0
START_SECONDS = 60.0
ORDER_SECONDS = 120.0

#: Where each kill lands: a chunk count into the reply, or None for "once it is stored".
KILL_POINTS: tuple[tuple[str, int | None], ...] = (
    ("after the first chunk", 1),
    ("a quarter in", REPLY_WORDS // 4),
    ("halfway", REPLY_WORDS // 2),
    ("after the last chunk", REPLY_WORDS),
    ("as the turn is stored", None),
)

Say = Callable[[str], None]


def reply_text(tag: str) -> str:
    words = [f"{tag}-{i}" for i in range(REPLY_WORDS)]
    return " ".join(words) + "."


class BotProcess(ChildProcess):
    """The bot in a child process (``tests.trials.bot_process``)."""

    def __init__(self, settings: dict[str, Any], log: IO[bytes]) -> None:
        super().__init__(
            "tests.trials.bot_process",
            settings,
            log,
            start_seconds=START_SECONDS,
            order_seconds=ORDER_SECONDS,
        )
        #: What the bot posted while it started (a restarted one: the cut-off turn's notice).
        self.posted_at_start: list[dict[str, Any]] = []

    async def start_timed(self) -> float:
        """Start it; the seconds until it was ready."""
        started = time.monotonic()
        ready = await self.start()
        self.posted_at_start = ready.get("messages", [])
        return time.monotonic() - started


def played(outcome: dict[str, Any] | None, action: str) -> bool:
    """The player was shown the action played: its line, then a narration with the turn's
    buttons."""
    if outcome is None or outcome["answer"] != stored_form(action):
        return False
    return any("Undo" in m["buttons"] for m in outcome["messages"])


def still_writing(outcome: dict[str, Any] | None) -> bool:
    return outcome is not None and "still writing" in outcome["answer"]


async def run_kills(
    model: FakeModelServer,
    settings: dict[str, Any],
    db: Database,
    tally: Tally,
    log_path: Path,
    say: Say,
) -> None:
    with log_path.open("ab") as log:
        process = BotProcess(settings, log)
        await process.start_timed()
        async with db.session() as session:
            adventure_id = await session.scalar(
                select(col(Adventure.id)).where(col(Adventure.channel_id) == DM_ID)
            )
        assert adventure_id is not None
        try:
            for number, (label, point) in enumerate(KILL_POINTS, start=1):
                await _kill_once(process, model, db, tally, adventure_id, number, label, point, say)
        finally:
            await process.close()


async def _kill_once(
    process: BotProcess,
    model: FakeModelServer,
    db: Database,
    tally: Tally,
    adventure_id: int,
    number: int,
    label: str,
    point: int | None,
    say: Say,
) -> None:
    where = f"kill {number} ({label})"
    killed = f"cross bridge {number}"
    model.queue(Reply(text=reply_text(f"k{number}"), delay=CHUNK_SECONDS))
    base = model.content_chunks
    tally.sent.add(stored_form(killed))
    turn = asyncio.create_task(process.order({"do": killed}))
    hold: OutcomeHold | None = None
    if point is None:
        # Between the turn's commit and the record of its request's outcome.
        hold = OutcomeHold(db.url, stored_form(killed))
        await asyncio.to_thread(model.wait_for_chunks, base + 1, 20)
        await hold.start(adventure_id)
        reached = await hold.wait_stored(20)
    else:
        reached = await asyncio.to_thread(model.wait_for_chunks, base + point, 20)
    await process.kill()
    if hold is not None:
        await hold.release()
        reached = hold.held
    tally.injected += 1
    killed_at = time.monotonic()
    outcome = await turn
    if played(outcome, killed):  # it finished before the kill landed
        tally.told.add(stored_form(killed))
    stored = await tally.check(db, where, settled=False)
    stored_at_kill = stored[stored_form(killed)]

    startup = await process.start_timed()
    ready_at = time.monotonic()
    follow = f"wave lantern {number}"
    tally.sent.add(stored_form(follow))
    deadline = killed_at + TURN_TTL + RESUME_MARGIN
    notices = [m for m in process.posted_at_start if "interrupted" in m["content"]]
    busy = 0
    resumed: float | None = None
    while time.monotonic() < deadline:
        outcome = await process.order({"do": follow})
        if outcome is None:
            break
        notices += [m for m in outcome["messages"] if "interrupted" in m["content"]]
        if played(outcome, follow):
            tally.told.add(stored_form(follow))
            resumed = time.monotonic() - ready_at
            break
        if not still_writing(outcome):
            tally.problems.append(f"{where}: the next action was answered {outcome['answer']!r}")
        busy += 1
        await asyncio.sleep(RESEND_SECONDS)
    if resumed is None:
        tally.problem("stuck", f"{where}: play did not resume within the lease's expiry + margin")

    if stored_at_kill and notices:
        # Not counted (the story is whole), but the player is told something untrue.
        tally.problems.append(
            f"{where}: the bot said a turn was interrupted with nothing saved, though it was "
            f"stored: {notices[-1]['content']!r}"
        )
    took_back = await _take_back(process, tally, killed, notices, stored_at_kill)
    await tally.check(db, where, settled=True)
    say(
        f"  {where}: {_reached(hold, reached)}; "
        f"stored at the kill: {stored_at_kill}; restart {startup:.1f} s; "
        + (
            f"next action played {resumed:.1f} s after the restart ({busy} × still writing)"
            if resumed is not None
            else "next action NOT played"
        )
        + f"; interrupted action: {took_back}"
    )


def _reached(hold: OutcomeHold | None, reached: bool) -> str:
    if hold is None:
        return "reached" if reached else "MISSED (the turn had got further)"
    if reached:
        return "FOUND a stored turn whose request still said running"
    return "no stored turn with its request still running (they commit together)"


async def _take_back(
    process: BotProcess,
    tally: Tally,
    killed: str,
    notices: list[dict[str, Any]],
    stored_at_kill: int,
) -> str:
    """The player takes the interrupted action back, as the bot offers."""
    with_retry = [n for n in notices if "Retry" in n["buttons"]]
    if with_retry:
        outcome = await process.order({"press": with_retry[-1]["id"]})
        if played(outcome, killed):
            tally.told.add(stored_form(killed))
            return "notice + Retry → played"
        return f"notice + Retry → {outcome['answer'] if outcome else 'no answer'!r}"
    if stored_at_kill:
        return "already stored" + (" (notice without Retry)" if notices else "")
    outcome = await process.order({"do": killed})
    if played(outcome, killed):
        tally.told.add(stored_form(killed))
        return "no notice; sent again → played"
    return f"no notice; sent again → {outcome['answer'] if outcome else 'no answer'!r}"
