"""Job leases: each background job runs in one process at a time.

Every process runs the same scheduler (memory work after turns, the memory sweep, cleanup,
lease reaping), so without a lease each job would run once per process, and two processes
could spend a model call each on the same memory. A job lease is a ``job_leases`` row named
after the job (``memory:<adventure id>`` for an adventure's memory work): whoever claims it
runs the job; everyone else skips it. It is the turn lease's design
(``engine.platform.coordination.leases``) for a name instead of an adventure:

* the claim is one ``INSERT … ON CONFLICT DO UPDATE … WHERE free or expired`` the database runs
  atomically against every other claim, so exactly one contender wins;
* the holder heartbeats while it works; a process that dies stops heartbeating, its lease
  expires, and the next claim takes the job over (``JobLease.taken_over_from`` names it);
* the fencing token grows every time the lease changes hands, and rows are never deleted, so
  a stale holder can neither renew nor release a newer holder's lease;
* a restarted process takes back at once the job leases its instance held before it died
  (holder names: ``engine.platform.coordination.instance``): at its next claim, and all of them at
  start-up (``reap_earlier``), so that no other process waits for them to expire.

A job asked for while another process runs it is not lost: ``claim(…, ask_again=True)`` marks
the row, and the holder, before letting go, looks for work once more
(``release_unless_wanted``). A holder that stalls past its expiry can be overtaken while it
works; the jobs guard their own writes as well (the memory writer's compare-and-set cursors),
so such an overlap costs at most a model call, never a doubled memory.

Times come from this process's clock, so the processes sharing a database need clocks that
agree to well within the lease's time to live.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, TypeVar

from sqlalchemy import and_, not_, select, update

from engine.platform.coordination.instance import earlier_incarnation, this_process
from engine.platform.coordination.leases import FREE, as_utc, claim_statement, dead
from engine.storage.changes import rows_changed
from engine.storage.coordination_models import JobLease as JobLeaseRow
from engine.storage.database import Database
from engine.storage.dialect import locked_read
from engine.storage.models import utcnow

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Seconds a job lease lives without a heartbeat. Longer than a turn lease's: nobody waits on
#: a background job, and a dead one is only a little late.
DEFAULT_TTL = 60.0

# The jobs (names of job_leases rows).
MEMORY_SWEEP = "memory-sweep"
CLEANUP = "cleanup"
LEASE_REAPING = "lease-reaping"


def memory_job(adventure_id: int) -> str:
    """An adventure's memory work: after its turns and from the sweep, one job, one lease."""
    return f"memory:{adventure_id}"


# Core statements: no ORM bookkeeping for a coordination row. The table is looked up in the
# metadata by name, where it is typed as a Table (SQLModel does not declare ``__table__`` to
# type checkers).
_jobs = JobLeaseRow.metadata.tables[JobLeaseRow.__tablename__]


@dataclass(frozen=True, slots=True)
class JobLease:
    name: str
    holder: str
    #: Fencing token: strictly increases every time the lease changes hands.
    token: int
    #: The holder whose expired lease this claim took over (it died, or stalled).
    taken_over_from: str | None = field(default=None, compare=False)


def _held(lease: JobLease) -> Any:
    return and_(
        _jobs.c.name == lease.name,
        _jobs.c.holder == lease.holder,
        _jobs.c.fencing_token == lease.token,
    )


class JobLeases:
    """Claims, heartbeats and releases job leases for one holder: ``this_process().holder``
    (``engine.platform.coordination.instance``); by default a name of its own that no restart
    shares."""

    def __init__(
        self,
        db: Database,
        *,
        holder: str | None = None,
        ttl: float = DEFAULT_TTL,
        clock: Callable[[], datetime] = utcnow,
        heartbeat_every: float | None = None,
    ) -> None:
        if ttl <= 0:
            raise ValueError("a lease's time to live must be positive")
        self.db = db
        self.holder = holder or this_process().holder
        self.ttl = timedelta(seconds=ttl)
        self.clock = clock
        #: Seconds between ``hold``'s heartbeats.
        self.heartbeat_every = heartbeat_every if heartbeat_every is not None else ttl / 3
        self._finishing: set[asyncio.Task[None]] = set()
        # Leases ``release_unless_wanted`` gave up already: ``hold`` has nothing left to
        # release. Per process, and safe so: only this process's own leases, emptied as each
        # ``hold`` ends.
        self._released: set[JobLease] = set()

    def _now(self) -> datetime:
        return as_utc(self.clock())

    # --- the lease ------------------------------------------------------------------------------

    async def claim(self, name: str, *, ask_again: bool = False) -> JobLease | None:
        """Take the job's lease; ``None`` if a live one is held by anyone (this holder too).

        ``ask_again``: when the job is busy, have its holder look for work once more before it
        lets go (the work that made this caller ask may have arrived after the holder looked).
        """
        now = self._now()
        async with self.db.transaction() as session:
            previous = (
                await session.execute(
                    locked_read(
                        session,
                        _jobs,
                        (_jobs.c.holder, _jobs.c.expires_at, _jobs.c.fencing_token),
                        _jobs.c.name == name,
                    )
                )
            ).first()
            claim = claim_statement(
                session,
                _jobs,
                "name",
                name,
                holder=self.holder,
                expires_at=now + self.ttl,
                now=now,
                asked_again=False,
            )
            token = await session.scalar(claim)
            if token is None:
                if not ask_again:
                    return None
                # The row is locked by this transaction, so its holder cannot let go between
                # the claim and this mark; "live" guards the first claim ever, made unlocked.
                marked = await rows_changed(
                    session,
                    update(_jobs)
                    .where(_jobs.c.name == name, _jobs.c.holder != FREE, _jobs.c.expires_at > now)
                    .values(asked_again=True),
                )
                if marked == 1:
                    return None
        if token is None:
            return await self.claim(name, ask_again=True)  # let go meanwhile: free now
        taken_over_from = previous.holder if previous and previous.holder != FREE else None
        if taken_over_from is not None:
            log.warning(
                "job %s: took over the expired lease of %s (token %s)", name, taken_over_from, token
            )
        return JobLease(name, self.holder, token, taken_over_from)

    async def heartbeat(self, lease: JobLease) -> bool:
        """Push the lease's expiry forward; False if it was lost (taken over or released)."""
        async with self.db.transaction() as session:
            renewed = await rows_changed(
                session,
                update(_jobs).where(_held(lease)).values(expires_at=self._now() + self.ttl),
            )
        return renewed == 1

    async def release(self, lease: JobLease) -> None:
        """Give the lease up, if it is still this one (a stale lease changes nothing)."""
        async with self.db.transaction() as session:
            await session.execute(
                update(_jobs).where(_held(lease)).values(holder=FREE, expires_at=self._now())
            )

    async def release_unless_wanted(self, lease: JobLease) -> bool:
        """Release the lease, unless the job was asked for while it ran: then keep it, clear the
        request and return False, so the holder runs the job once more.

        True also when the lease was lost already: another holder has the job now."""
        async with self.db.transaction() as session:
            released = await rows_changed(
                session,
                update(_jobs)
                .where(_held(lease), _jobs.c.asked_again.is_(False))
                .values(holder=FREE, expires_at=self._now()),
            )
            kept = 0
            if released != 1:
                kept = await rows_changed(
                    session,
                    update(_jobs)
                    .where(_held(lease))
                    .values(asked_again=False, expires_at=self._now() + self.ttl),
                )
        if released == 1 or kept != 1:
            # Released, or lost: either way ``hold`` has nothing left to give up.
            self._released.add(lease)
            return True
        return False

    async def running(self, names: Iterable[str]) -> set[str]:
        """Which of these jobs some process holds a live lease on now."""
        wanted = list(names)
        if not wanted:
            return set()
        async with self.db.session() as session:
            rows = await session.scalars(
                select(_jobs.c.name).where(
                    _jobs.c.name.in_(wanted), not_(dead(_jobs, self.holder, self._now()))
                )
            )
            return set(rows)

    async def reap_earlier(self) -> list[str]:
        """Free the job leases this holder's instance held before it restarted (that process is
        dead; its jobs were cut off and run again at their next turn). Returns their names."""
        async with self.db.transaction() as session:
            result = await session.execute(
                update(_jobs)
                .where(earlier_incarnation(_jobs.c.holder, self.holder))
                .values(holder=FREE, expires_at=self._now())
                .returning(_jobs.c.name)
            )
            return sorted(result.scalars())

    # --- holding it for a job -------------------------------------------------------------------

    @asynccontextmanager
    async def hold(self, name: str, *, ask_again: bool = False) -> AsyncIterator[JobLease | None]:
        """Claim the job (``None`` if another holder runs it), heartbeat it in the background,
        release it on the way out, also when the body raises or is cancelled."""
        lease = await self.claim(name, ask_again=ask_again)
        if lease is None:
            yield None
            return
        beating = asyncio.create_task(self._keep_alive(lease), name=f"job-heartbeat-{name}")
        try:
            yield lease
        finally:
            beating.cancel()
            # Its own task: a second cancellation of the caller cannot cut the release short.
            finishing = asyncio.create_task(self._finish(lease, beating))
            self._finishing.add(finishing)
            finishing.add_done_callback(self._finishing.discard)
            await asyncio.shield(finishing)

    async def run_alone(self, name: str, job: Callable[[], Awaitable[T]]) -> T | None:
        """Run ``job`` under its lease; ``None`` without running it if another holder runs it."""
        async with self.hold(name) as lease:
            if lease is None:
                log.debug("job %s runs elsewhere; skipped here", name)
                return None
            return await job()

    async def _keep_alive(self, lease: JobLease) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_every)
            try:
                alive = await self.heartbeat(lease)
            except Exception:
                log.warning("job %s: heartbeat failed; trying again", lease.name, exc_info=True)
                continue
            if not alive:
                log.warning("job %s: lost its lease (token %s)", lease.name, lease.token)
                return

    async def _finish(self, lease: JobLease, beating: asyncio.Task[None]) -> None:
        await asyncio.wait({beating})
        if lease in self._released:
            self._released.discard(lease)
            return
        try:
            await self.release(lease)
        except Exception:
            # It expires on its own; the job's own error, if any, is the one worth raising.
            log.warning("job %s: could not release its lease", lease.name, exc_info=True)
