"""Turn leases: one generation at a time per adventure, across processes.

A lease is a ``turn_leases`` row: who holds the adventure's turn, a fencing token and an expiry
the holder keeps pushing forward with heartbeats. Because it is a row, it holds between
processes (several bot shards, the console and the scheduler sharing one database) and it
survives a crash: a holder that dies stops heartbeating, its lease expires, and the next claim
takes it over.

The fencing token increases every time the lease changes hands, and a row is never deleted
while its adventure exists: releasing a lease (or reaping an expired one) only marks it free
(``holder`` empty). A deleted row would restart the count at 1, and a stale holder from before
the deletion could then pass the fencing check of a newer lease with the same number.

How a turn uses it::

    async with leases.hold(adventure_id) as lease:       # LeaseBusy if a turn is running
        if lease.reclaimed_from:                          # a crashed turn was taken over
            ...tell the players that turn was interrupted
        fence = Fence(holds=leases.fence(lease))
        async for event in engine.play(adventure_id, action, fence=fence):
            ...

A turn's claim, and its release, also come in the caller's transaction (``claim_in``,
``release_in``), so that they commit with what else starts or ends the turn: its request
recorded, its store (``engine.play.service``). ``hold`` then takes the lease already claimed
(``claimed``), and ``let_go`` tells it a committed transaction released it, or passed it on to
the next turn queued in this process.

``hold`` heartbeats in the background. A holder that stalls past its expiry can still be
overtaken; the fence (``still_holds``, run first inside the turn's final transaction) is what
makes sure such a turn stores nothing.

A restarted process does not wait for its own leases to expire: holders are named
``<instance>/<incarnation>`` (``engine.platform.coordination.instance``), and a lease held by this
process's instance in an earlier incarnation was held by this instance before it died. Such a
lease counts as expired, for ``claim`` and for ``reap_expired`` (which the bot runs at start-up),
so play resumes at once after a restart.

Interrupted turns: a crashed turn has stored nothing (a turn writes everything in one final
transaction), so "marking it interrupted" is a message. Whoever notices first tells the players:
the next ``claim`` (``Lease.reclaimed_from``) or the scheduler's ``reap_expired``. Each expired
lease is reported by exactly one of them.

Times come from this process's clock (``clock``), so the processes sharing a database need
clocks that agree to well within the lease's time to live.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, Table, and_, or_, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from engine.errors import CampfireError, NotFound
from engine.platform.coordination.instance import earlier_incarnation
from engine.platform.observer import NoObserver, PlayObserver
from engine.storage.changes import rows_changed
from engine.storage.coordination_models import TurnLease
from engine.storage.database import Database
from engine.storage.dialect import insert_for, locked_read
from engine.storage.models import utcnow

log = logging.getLogger(__name__)

#: Seconds a lease lives without a heartbeat.
DEFAULT_TTL = 30.0

#: The holder of a lease row that nobody holds (released, or reaped after it expired).
FREE = ""

# Core statements: no ORM bookkeeping for a coordination row. The table is looked up in the
# metadata by name, where it is typed as a Table (SQLModel does not declare ``__table__`` to
# type checkers).
_leases = TurnLease.metadata.tables[TurnLease.__tablename__]


@dataclass(frozen=True, slots=True)
class Lease:
    adventure_id: int
    holder: str
    #: Fencing token: strictly increases every time the lease changes hands.
    token: int
    #: The holder whose expired lease this claim took over: its turn was interrupted.
    reclaimed_from: str | None = field(default=None, compare=False)


#: What runs in a claim's own transaction once the lease is taken (``TurnLeases.claim``).
WithClaim = Callable[[AsyncSession, "Lease"], Awaitable[None]]


class LeaseBusy(CampfireError):
    """A turn of this adventure is being written (here or in another process)."""

    def __init__(
        self, adventure_id: int, *, holder: str | None = None, expires_at: datetime | None = None
    ) -> None:
        super().__init__(
            "The narrator is still writing the current turn of this adventure. "
            "Wait for it to finish, then try again."
        )
        self.adventure_id = adventure_id
        self.holder = holder
        self.expires_at = expires_at


def as_utc(moment: datetime) -> datetime:
    """An aware UTC datetime; a naive one is taken to be UTC already.

    SQLite keeps ``DateTime(timezone=True)`` values as naive text and compares them as text, so
    every time written or compared must be in the same zone: UTC.
    """
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def claim_statement(
    session: AsyncSession,
    table: Table,
    key: str,
    value: object,
    *,
    holder: str,
    expires_at: datetime,
    now: datetime,
    **values: Any,
) -> Any:
    """The one statement that decides a claim, for any lease table (a turn's, a job's): it
    writes only where the row is free or expired (``dead``), bumping the fencing token, and the
    database runs it atomically against any other claim. Returns the new token, or no row when
    a live lease is held. ``values`` are further columns set on the claim."""
    insert = insert_for(session, table).values(
        {key: value, "holder": holder, "fencing_token": 1, "expires_at": expires_at, **values}
    )
    return insert.on_conflict_do_update(
        index_elements=[table.c[key]],
        set_={
            "holder": insert.excluded.holder,
            "fencing_token": table.c.fencing_token + 1,
            "expires_at": insert.excluded.expires_at,
            **{name: insert.excluded[name] for name in values},
        },
        where=dead(table, holder, now),
    ).returning(table.c.fencing_token)


def dead(table: Table, holder: str, now: datetime) -> ColumnElement[bool]:
    """The rows of a lease table that nobody alive holds, seen from ``holder``: free, past
    their expiry, or held by ``holder``'s own instance in an earlier incarnation (which died:
    ``engine.platform.coordination.instance``)."""
    return or_(
        table.c.holder == FREE,
        table.c.expires_at <= now,
        earlier_incarnation(table.c.holder, holder),
    )


def _held(lease: Lease) -> Any:
    return and_(
        _leases.c.adventure_id == lease.adventure_id,
        _leases.c.holder == lease.holder,
        _leases.c.fencing_token == lease.token,
    )


class TurnLeases:
    """Claims, heartbeats and releases the turn leases of one holder (a process, usually).

    ``holder`` names this process in the table (and in logs): ``this_process().holder``
    (``engine.platform.coordination.instance``), unique per live process.
    """

    def __init__(
        self,
        db: Database,
        *,
        holder: str,
        ttl: float = DEFAULT_TTL,
        clock: Callable[[], datetime] = utcnow,
        heartbeat_every: float | None = None,
    ) -> None:
        if not holder:
            raise ValueError("a lease holder needs a name")
        if ttl <= 0:
            raise ValueError("a lease's time to live must be positive")
        self.db = db
        self.holder = holder
        self.ttl = timedelta(seconds=ttl)
        self.clock = clock
        #: Seconds between ``hold``'s heartbeats.
        self.heartbeat_every = heartbeat_every if heartbeat_every is not None else ttl / 3
        self._finishing: set[asyncio.Task[None]] = set()
        # Leases held here that a committed transaction already released (``let_go``).
        # Per process, and safe so: it only concerns leases this process holds, and is
        # emptied as each ``hold`` ends.
        self._let_go: set[Lease] = set()
        #: This process is shutting down (``CampfireBot.close``): a turn cancelled now keeps
        #: its lease (``hold``). Per process, as the shutdown is.
        self.closing = False
        #: Told of each lease taken over from a dead holder (the bot's metrics). A claim is
        #: told as it takes the lease, so one whose transaction then rolls back (a request
        #: refused after it) is counted too: rare, and the count is for watching, not for
        #: deciding anything.
        self.observer: PlayObserver = NoObserver()

    def _now(self) -> datetime:
        return as_utc(self.clock())

    # --- the lease ------------------------------------------------------------------------------

    async def claim(self, adventure_id: int, *, also: WithClaim | None = None) -> Lease:
        """Take the adventure's lease, or raise ``LeaseBusy`` if a live one is held by anyone.

        This holder included: one turn at a time. An expired lease is taken over (its token
        bumped) and the returned lease names the previous holder in ``reclaimed_from``.
        ``also`` runs in the claim's transaction once the lease is taken (what must start with
        the turn: its request marked running); what it raises undoes the claim.
        """
        try:
            async with self.db.transaction() as session:
                lease = await self.claim_in(session, adventure_id)
                if lease is None:
                    raise self._busy(adventure_id, await _lock_row(session, adventure_id))
                if also is not None:
                    await also(session, lease)
        except IntegrityError as error:
            raise NotFound("That adventure no longer exists.") from error
        return lease

    async def claim_in(self, session: AsyncSession, adventure_id: int) -> Lease | None:
        """``claim`` in the caller's transaction, so that the claim commits with what else it
        writes (a turn's request: one transaction where there were three); None when a live
        lease is held. The caller turns an ``IntegrityError`` (no such adventure) into its
        own answer."""
        now = self._now()
        previous = await _lock_row(session, adventure_id)
        claim = claim_statement(
            session,
            _leases,
            "adventure_id",
            adventure_id,
            holder=self.holder,
            expires_at=now + self.ttl,
            now=now,
            heartbeat_at=now,
        )
        token = await session.scalar(claim)
        if token is None:
            return None
        reclaimed_from = previous.holder if previous and previous.holder != FREE else None
        if reclaimed_from is not None:
            log.warning(
                "adventure %s: took over the expired turn lease of %s (token %s)",
                adventure_id,
                reclaimed_from,
                token,
            )
            self.observer.lease_taken_over(adventure_id)
        return Lease(adventure_id, self.holder, token, reclaimed_from)

    @staticmethod
    def _busy(adventure_id: int, row: Any) -> LeaseBusy:
        return LeaseBusy(
            adventure_id,
            holder=row.holder if row else None,
            expires_at=as_utc(row.expires_at) if row else None,
        )

    async def heartbeat(self, lease: Lease) -> bool:
        """Push the lease's expiry forward; False if it was lost (taken over, reaped, released).

        A lease that expired but that nobody took over is still this holder's and is renewed.
        """
        now = self._now()
        async with self.db.transaction() as session:
            renewed = await rows_changed(
                session,
                update(_leases)
                .where(_held(lease))
                .values(expires_at=now + self.ttl, heartbeat_at=now),
            )
        return renewed == 1

    async def release(self, lease: Lease) -> None:
        """Give the lease up, if it is still this one (a stale lease changes nothing)."""
        async with self.db.transaction() as session:
            await self.release_in(session, lease)

    async def release_in(self, session: AsyncSession, lease: Lease) -> None:
        """``release`` in the caller's transaction (the one storing the turn, or recording its
        failure): the lease is given up when, and only if, that transaction commits. Then tell
        ``hold`` with ``let_go`` so it does not release the lease again."""
        now = self._now()
        await session.execute(
            update(_leases)
            .where(_held(lease))
            .values(holder=FREE, expires_at=now, heartbeat_at=now)
        )

    def let_go(self, lease: Lease) -> None:
        """``lease`` was released in a transaction that committed (``release_in``): the
        ``hold`` around it stops heartbeating it and has nothing left to release."""
        self._let_go.add(lease)

    async def still_holds(self, session: AsyncSession, lease: Lease) -> bool:
        """The fencing check, for the transaction that stores the turn: call it first there.

        It locks the lease until that transaction ends (the row on PostgreSQL, the database's
        write lock on SQLite), so no claim can take the lease over between the check and the
        commit. A lease that expired but that nobody took over still holds.
        """
        row = await _lock_row(session, lease.adventure_id)
        return row is not None and row.holder == lease.holder and row.fencing_token == lease.token

    def fence(self, lease: Lease) -> Callable[[AsyncSession], Awaitable[bool]]:
        """``still_holds`` for this lease, as a turn's ``Fence.holds``."""

        async def check(session: AsyncSession) -> bool:
            return await self.still_holds(session, lease)

        return check

    async def reap_expired(self) -> list[int]:
        """Free every expired lease, and every one this holder's instance held before it
        restarted; returns their adventures, whose turns were interrupted.

        For the scheduler, to tell those adventures' players, and for start-up, so a restarted
        process plays again at once. A lease reaped here is reported only here: a later claim
        finds it free, not expired.
        """
        now = self._now()
        async with self.db.transaction() as session:
            result = await session.execute(
                update(_leases)
                .where(_leases.c.holder != FREE, dead(_leases, self.holder, now))
                .values(holder=FREE)
                .returning(_leases.c.adventure_id)
            )
            reaped = sorted(result.scalars())
        for adventure_id in reaped:
            self.observer.lease_taken_over(adventure_id)
        return reaped

    # --- holding it for a turn ------------------------------------------------------------------

    @asynccontextmanager
    async def hold(
        self, adventure_id: int, *, claimed: Lease | None = None, also: WithClaim | None = None
    ) -> AsyncIterator[Lease]:
        """Claim the lease (``claim``, with ``also``), heartbeat it in the background, release
        it on the way out, unless a committed transaction released it already (``let_go``).

        ``claimed``: a lease this holder already took (``claim_in``, in the transaction that
        recorded the turn's request); it is held from here on as if claimed here.
        Released also when the body raises or is cancelled, except when this process is
        shutting down (``closing``): then the lease is left as a crash leaves it, so the restart
        (or, once it expires, another process) reports the turn as interrupted, with its Retry,
        rather than leaving its request "running" with nobody to say so. If a heartbeat finds
        the lease lost, the body runs on; its store is refused by the fence.
        """
        lease = claimed if claimed is not None else await self.claim(adventure_id, also=also)
        beating = asyncio.create_task(
            self._keep_alive(lease), name=f"lease-heartbeat-{adventure_id}"
        )
        kept = False
        try:
            yield lease
        except asyncio.CancelledError:
            kept = self.closing
            raise
        finally:
            beating.cancel()
            if not kept:
                # Its own task: a second cancellation of the caller cannot cut it short.
                finishing = asyncio.create_task(self._finish(lease, beating))
                self._finishing.add(finishing)
                finishing.add_done_callback(self._finishing.discard)
                await asyncio.shield(finishing)

    async def _keep_alive(self, lease: Lease) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_every)
            if lease in self._let_go:
                return
            try:
                alive = await self.heartbeat(lease)
            except Exception:
                log.warning(
                    "adventure %s: turn lease heartbeat failed; trying again",
                    lease.adventure_id,
                    exc_info=True,
                )
                continue
            if not alive and lease not in self._let_go:
                log.warning(
                    "adventure %s: lost the turn lease (token %s); this turn will not be stored",
                    lease.adventure_id,
                    lease.token,
                )
                return

    async def _finish(self, lease: Lease, beating: asyncio.Task[None]) -> None:
        await asyncio.wait({beating})
        if lease in self._let_go:
            self._let_go.discard(lease)
            return
        try:
            await self.release(lease)
        except Exception:
            # It expires on its own; the original error, if any, is the one worth raising.
            log.warning(
                "adventure %s: could not release the turn lease", lease.adventure_id, exc_info=True
            )


async def _lock_row(session: AsyncSession, adventure_id: int) -> Any:
    """Read the adventure's lease row and keep it from changing until the transaction ends
    (on SQLite, by taking the database's write lock, which every other claim, heartbeat or
    release waits for)."""
    columns = (_leases.c.holder, _leases.c.fencing_token, _leases.c.expires_at)
    statement = locked_read(session, _leases, columns, _leases.c.adventure_id == adventure_id)
    return (await session.execute(statement)).first()
