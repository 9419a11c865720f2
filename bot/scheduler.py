"""Background work on the bot's AsyncIOScheduler (APScheduler).

* after each turn: the memory bank's work for that adventure (memories, the summary,
  embeddings), when its cadence is due; one job id per adventure, so a pending job is replaced
  rather than doubled, and the adventure's job lease keeps two from running at once; and a
  look at whether a card is due to be proposed to its host (claimed in the database);
* every few minutes: a sweep for adventures whose cursors lag (a restart, a failed model call,
  a job killed midway) that catches them up;
* every few seconds: this process's copy of the operator's blocked users and servers;
* at start-up and every few hours: idle guests deleted, and servers the bot left past their
  grace period.

Every process schedules all of them; each runs under its job lease
(``engine.platform.coordination.jobs``), so in a multi-process deployment one process at a time runs
each, and a process that finds one running elsewhere skips that round.

Lease reaping (turns cut off by a dead process) is scheduled by bot.discord_bot, which also
tells the channels concerned.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from bot.config import Settings
from engine.people.blocks import BLOCKS_REFRESH_S
from engine.people.guests import remove_departed_servers, remove_idle_guests
from engine.platform.coordination.jobs import CLEANUP, MEMORY_SWEEP, JobLeases
from engine.services import Services

log = logging.getLogger(__name__)

T = TypeVar("T")

MEMORY_SWEEP_MINUTES = 5
CLEANUP_HOURS = 6
#: Seconds closing waits for running jobs before cutting them off (and again for them to let
#: go of their leases).
STOP_GRACE_SECONDS = 5.0


class BackgroundWork:
    """This process's side of the background jobs: the job leases it runs them under, and the
    jobs running now, so that closing lets them end (and release their leases) before the
    database closes."""

    def __init__(self, jobs: JobLeases) -> None:
        self.jobs = jobs
        self._running: set[asyncio.Task[Any]] = set()

    @contextmanager
    def running(self, what: str) -> Iterator[None]:
        """Around a job's body. A job cut off by the bot closing ends quietly: its cursors did
        not move, so the next sweep does the same work again. (The scheduler would log the
        cancellation as a failure.)"""
        task = asyncio.current_task()
        assert task is not None
        self._running.add(task)
        try:
            yield
        except asyncio.CancelledError:
            log.info("%s stopped as the bot closed; the next sweep resumes it", what)
        finally:
            self._running.discard(task)

    async def run_alone(self, name: str, what: str, job: Callable[[], Awaitable[T]]) -> T | None:
        """Run ``job`` under its job lease; None if another process runs it now (or it was cut
        off by closing)."""
        with self.running(what):
            return await self.jobs.run_alone(name, job)
        return None

    async def stop(self, grace: float = STOP_GRACE_SECONDS) -> None:
        """Let the running jobs end within ``grace`` seconds, then cut the rest off and wait
        for them to release their leases. (Pause the scheduler first: nothing new starts.)"""
        if not self._running:
            return
        _, late = await asyncio.wait(set(self._running), timeout=grace)
        for task in late:
            task.cancel()
        if late:
            await asyncio.wait(late, timeout=grace)


def schedule_background_work(
    scheduler: AsyncIOScheduler,
    services: Services,
    settings: Settings,
    background: BackgroundWork,
) -> None:
    """Add the recurring jobs, and have every stored turn schedule its memory work."""
    retention = timedelta(days=settings.guest_retention_days)
    grace = timedelta(days=settings.server_grace_days)

    async def sweep_memories() -> None:
        reports = await background.run_alone(
            MEMORY_SWEEP, "the memory sweep", services.memory.sweep
        )
        if reports:
            log.info("memory sweep caught up %d adventures", len(reports))

    async def remove_idle() -> tuple[int, int]:
        guests = await remove_idle_guests(services.db, retention)
        # Past days' token counts: the caps read today's only (engine.people.limits).
        await services.limits.forget_old_days()
        return guests, await remove_departed_servers(services.db, grace)

    async def clean_up() -> None:
        removed = await background.run_alone(CLEANUP, "the cleanup", remove_idle)
        if removed and any(removed):
            log.info("removed %d idle guests and %d departed servers", *removed)

    common = {"coalesce": True, "max_instances": 1, "replace_existing": True}
    scheduler.add_job(
        sweep_memories, "interval", minutes=MEMORY_SWEEP_MINUTES, id="memory-sweep", **common
    )
    # Also once at start-up (next_run_time: now), then every few hours: a bot restarted more
    # often than that would otherwise never clean up.
    scheduler.add_job(
        clean_up,
        "interval",
        hours=CLEANUP_HOURS,
        id="cleanup",
        next_run_time=datetime.now(UTC),
        **common,
    )
    # Each process's own copy of the blocked set (engine.people.blocks), so no lease: every process
    # reads it.
    scheduler.add_job(
        services.blocks.refresh,
        "interval",
        seconds=BLOCKS_REFRESH_S,
        id="blocks-refresh",
        **common,
    )
    memory_work = memory_job_scheduler(scheduler, services, background)
    card_proposal = card_proposal_scheduler(scheduler, services, background)

    def after_turn(adventure_id: int, request_id: int) -> None:
        memory_work(adventure_id)
        card_proposal(adventure_id, request_id)

    services.play.intake.after_turn = after_turn


def card_proposal_scheduler(
    scheduler: AsyncIOScheduler, services: Services, background: BackgroundWork
) -> Callable[[int, int], None]:
    """After each turn, whether a card is due to be proposed to the host
    (``engine.story.steering.card_proposals``): in the background, never on the turn's path.
    Every turn's job has its own id: the database's claim, not the scheduler, makes sure one
    process proposes once for a turn count."""

    async def propose(adventure_id: int, request_id: int) -> None:
        with background.running(f"a card proposal for adventure {adventure_id}"):
            try:
                await services.card_proposals.after_turn(adventure_id, request_id)
            except Exception:
                # Never retried: the claim is settled; the next multiple proposes again.
                log.warning("card proposal for adventure %s failed", adventure_id, exc_info=True)

    def after_turn(adventure_id: int, request_id: int) -> None:
        try:
            scheduler.add_job(
                propose,
                args=[adventure_id, request_id],
                id=f"card-proposal-{adventure_id}-{request_id}",
                replace_existing=True,
                misfire_grace_time=None,
            )
        except Exception:
            log.warning("could not schedule a card proposal for %s", adventure_id, exc_info=True)

    return after_turn


def memory_job_scheduler(
    scheduler: AsyncIOScheduler, services: Services, background: BackgroundWork
) -> Callable[[int], None]:
    #: Adventures whose memory work was asked for, and those whose work runs now (per process:
    #: a turn's own process asks; across processes the writer's job lease decides). Work asked
    #: for while it runs is not scheduled again (the scheduler would skip it, one instance a
    #: job, with a warning each turn): the running one goes round again for those turns.
    asked: set[int] = set()
    running: set[int] = set()
    # The embedded model reads the next prompt ahead in the players' pause; a model behind an
    # endpoint has nothing to read ahead (and the turn engine is not asked).
    reads_ahead = hasattr(services.models.default.provider, "read_ahead")

    async def memory_work(adventure_id: int) -> None:
        # Under the adventure's job lease, taken by the writer itself.
        running.add(adventure_id)
        try:
            with background.running(f"memory work for adventure {adventure_id}"):
                while True:
                    asked.discard(adventure_id)
                    if reads_ahead:
                        # First: the next turn may come before the memories are written.
                        await services.turns.read_ahead(adventure_id)
                    done = await services.memory.catch_up(adventure_id)
                    if done.summaries and reads_ahead:
                        # The summary goes before the story: the embedded model reads the next
                        # prompt ahead, in the players' pause, rather than on their turn.
                        await services.turns.read_ahead(adventure_id)
                    if adventure_id not in asked:
                        return
        finally:
            running.discard(adventure_id)

    def after_turn(adventure_id: int) -> None:
        asked.add(adventure_id)
        if adventure_id in running:
            return
        try:
            scheduler.add_job(
                memory_work,
                args=[adventure_id],
                id=f"memory-{adventure_id}",
                replace_existing=True,
                max_instances=1,
                misfire_grace_time=None,
            )
        except Exception:
            # Never the turn's problem: the sweep catches the adventure up later.
            log.warning("could not schedule memory work for %s", adventure_id, exc_info=True)

    return after_turn
