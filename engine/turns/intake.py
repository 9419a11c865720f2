"""How a request to play becomes a queued turn: recorded, its turn lease claimed (or passed on
by the turn before), queued in the adventure's order, and its events forwarded to the caller.

``PlayService`` decides what a request plays (an action, a retry) and who may; this module
carries any of them through. A turn costs three write transactions (DESIGN §6): the request
recorded with the lease claimed and the request marked running, when nothing of the adventure
is queued in this process; the store, which records the request's outcome and passes the lease
to the next turn queued here, or gives it up; and the front end's own. A process records and
queues one place's requests one at a time (``_arrival``), so a request that claimed the lease
as it was recorded is queued before any recorded after it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import aclosing, asynccontextmanager
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from engine.errors import (
    CampfireError,
    DatabaseBusy,
    InternalError,
    NoAdventureHere,
    PlayerDeleted,
    StoryMovedOn,
    log_incident,
)
from engine.llm.providers.resolver import ProviderResolver
from engine.people.access.checks import check_may_press
from engine.people.access.rules import NO_ADVENTURE, Actor, active_adventure
from engine.people.accounts import touch_actor
from engine.people.content import note_place
from engine.people.limits import Charge, RateLimited, UsageLimits
from engine.platform.coordination.leases import Lease, TurnLeases
from engine.platform.coordination.request_status import REFUSED
from engine.platform.events import Usage
from engine.platform.observer import NoObserver, PlayObserver
from engine.platform.queue import AdventureQueue, Ticket
from engine.storage.database import Database
from engine.storage.dialect import is_busy
from engine.storage.models import Adventure
from engine.story.place_hints import PlaceHints
from engine.story.tree import MOVED_ON
from engine.turns.events import (
    AlreadyHandled,
    Queued,
    TurnDone,
    TurnEvent,
    TurnFailed,
    TurnInterrupted,
)
from engine.turns.plan import Fence
from engine.turns.requests import NewRequest, RequestLog
from engine.turns.result import TurnResult

log = logging.getLogger(__name__)

_FINAL = (TurnDone, TurnFailed)


@dataclass(frozen=True, slots=True)
class Asked:
    """A request to play, as the front end made it."""

    actor: Actor
    channel_id: int
    #: What the request plays, as its record keeps it (an action, or a retry).
    payload: dict[str, str]
    #: The interaction's id: a request delivered twice is played once.
    request_id: int
    #: The story version a pressed button was drawn for (None: typed).
    seen_version: int | None = None
    #: The adventure a pressed button was drawn for (None: typed).
    drawn_for: int | None = None


@dataclass(frozen=True, slots=True)
class _Recorded:
    """A request recorded to be played."""

    adventure_id: int
    #: The turn's lease, claimed in the request's own transaction when nothing of the
    #: adventure was queued here (None: the queued job claims it when its turn comes).
    lease: Lease | None = None
    #: The turn a dead process was writing, which that claim took over.
    cut_off: TurnInterrupted | None = None
    #: Whom the turn's tokens count against (None: not the operator's model).
    charge: Charge | None = None
    #: The turn the request plays, as its ``Prepare`` decided it.
    turn: Turn | None = None


@dataclass(slots=True)
class _Spent:
    """What a turn's model calls cost, as its generation told the fence (None: the model was
    not asked, or refused at once). Read when the turn is stored or fails, to settle the
    tokens reserved for it. A turn may call the model twice (a narration holding a banned
    word is written again): each call's cost is added to what was counted."""

    usage: Usage | None = None

    def tell(self, usage: Usage | None) -> None:
        if usage is None:
            return  # that call cost nothing: what was counted stands
        if self.usage is None:
            self.usage = usage
            return
        cached = (
            None
            if self.usage.cached_tokens is None and usage.cached_tokens is None
            else (self.usage.cached_tokens or 0) + (usage.cached_tokens or 0)
        )
        self.usage = Usage(
            self.usage.prompt_tokens + usage.prompt_tokens,
            self.usage.completion_tokens + usage.completion_tokens,
            cached,
        )


@dataclass(frozen=True, slots=True)
class _Submitted:
    """A recorded request's turn, in the adventure queue."""

    ticket: Ticket[None]
    events: asyncio.Queue[TurnEvent]
    lease: Lease | None
    request_id: int
    #: The tokens reserved for it (None: not on the operator's model).
    charge: Charge | None = None


#: A check run on a request's adventure in the transaction that records it.
RequestCheck = Callable[[AsyncSession, Adventure], Awaitable[None]]

#: A turn to run once the adventure's lease is held: its events, given the adventure and the
#: fence that stores it.
Turn = Callable[[int, Fence], AsyncGenerator[TurnEvent, None]]

#: What a request plays, decided in the transaction that records it, on the adventure read
#: there: its rights checked, whatever it needs of the story then read (who the actor is
#: written as, the round's actions, the turn retried), and the turn returned. A refusal it
#: raises rolls the record back.
Prepare = Callable[[AsyncSession, Adventure], Awaitable[Turn]]


class TurnIntake:
    def __init__(
        self,
        db: Database,
        leases: TurnLeases,
        queue: AdventureQueue,
        requests: RequestLog,
        places: PlaceHints,
        *,
        limits: UsageLimits | None = None,
        providers: ProviderResolver | None = None,
    ) -> None:
        self.db = db
        self.leases = leases
        self.queue = queue
        self.requests = requests
        self.places = places
        #: The rate limits and the operator's budget, asked as a request is recorded and told
        #: the tokens as its turn is stored (None: none, for tools and tests); ``providers``
        #: says whether an adventure narrates on the operator's model.
        self.limits = limits
        self.providers = providers
        # Per place: the lock that records and queues its requests one at a time (``enter``),
        # with how many hold or wait for it. Per process, and safe so: it only orders this
        # process's own requests; across processes the turn lease decides.
        self._arriving: dict[int, tuple[asyncio.Lock, int]] = {}
        # Turn leases passed on by a turn that ended to the next one queued here, by that
        # one's request, until its job takes it (``_pass_on``). Per process, and safe so: the
        # lease row names this process as holder all along, and the queue that orders the
        # turns is this process's own.
        self._handed: dict[int, Lease] = {}
        #: Called with the adventure's id and the turn's request id after each turn is stored
        #: (the bot schedules the memory bank's work there, and a card proposal). Must not
        #: block: it runs on the turn's path.
        self.after_turn: Callable[[int, int], None] | None = None
        #: Told of each turn that ran, stored or failed (the bot's metrics).
        self.observer: PlayObserver = NoObserver()

    async def enter(self, asked: Asked, prepare: Prepare) -> AsyncGenerator[TurnEvent, None]:
        """Record the request and queue its turn, then forward the turn's events.

        The two happen under the place's arrival lock, so that the requests of one place are
        queued in the order they were recorded: a request that found the adventure's queue
        idle has claimed the turn lease as it was recorded, and must run before any request
        recorded after it."""
        request_id, channel_id = asked.request_id, asked.channel_id
        async with self._arrival(channel_id):
            try:
                recorded = await self._record(asked, prepare)
            except RateLimited as error:
                recorded = TurnFailed(await self._strike(asked, error))
            except CampfireError as error:
                recorded = TurnFailed(error)
            except Exception as error:
                if not is_busy(error):
                    raise
                # Not Campfire's fault: other writers held the database past our wait.
                log.warning("request %s not recorded: the database stayed locked", request_id)
                recorded = TurnFailed(DatabaseBusy(recorded=False))
            if not isinstance(recorded, _Recorded):
                submitted: _Submitted | TurnEvent = recorded
            else:
                submitted = await self._submit(recorded, request_id, channel_id)
        if not isinstance(submitted, _Submitted):
            yield submitted
            return
        async with aclosing(self._forward(submitted)) as events:
            async for event in events:
                yield event

    async def _strike(self, asked: Asked, refusal: RateLimited) -> RateLimited:
        """A request a rate limit refused: recorded as a strike (the refusal rolled back the
        request's own transaction), which may lengthen the wait."""
        assert self.limits is not None
        try:
            return await self.limits.strike(asked.actor.user_id, refusal)
        except Exception as error:
            if not is_busy(error):
                raise
            log.warning("could not record a refusal of request %s", asked.request_id)
            return refusal

    @asynccontextmanager
    async def _arrival(self, channel_id: int) -> AsyncIterator[None]:
        """One request of a place at a time is recorded and queued (see ``_enter``); the lock
        is dropped once nobody waits on it."""
        lock, users = self._arriving.get(channel_id, (asyncio.Lock(), 0))
        self._arriving[channel_id] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._arriving[channel_id]
            if users == 1:
                del self._arriving[channel_id]
            else:
                self._arriving[channel_id] = (lock, users - 1)

    async def _record(self, asked: Asked, prepare: Prepare) -> _Recorded | AlreadyHandled:
        """Record the request before it runs; its adventure (and the turn's lease, when it
        could be claimed at once), or its stored outcome when ``request_id`` was recorded
        before. Every check after the record rolls it back."""
        actor, channel_id, request_id = asked.actor, asked.channel_id, asked.request_id
        seen_version, drawn_for = asked.seen_version, asked.drawn_for
        async with self.db.transaction() as session:
            await touch_actor(session, actor)
            adventure = await active_adventure(session, channel_id)
            request = NewRequest(
                request_id,
                actor.user_id,
                asked.payload,
                version=adventure.version if adventure else None,
                from_button=seen_version is not None,
            )
            repeat = await self.requests.open(session, request, adventure.id if adventure else None)
            if repeat is not None:
                return repeat
            if adventure is None:
                self.places.seen(channel_id, None)
                raise NoAdventureHere(NO_ADVENTURE)
            assert adventure.id is not None
            check_may_press(adventure, drawn_for)
            note_place(adventure, actor)
            if seen_version is not None and (
                seen_version != adventure.version
                or await self.requests.button_pressed(
                    session, adventure.id, seen_version, besides=request_id
                )
            ):
                raise StoryMovedOn(MOVED_ON)
            turn = await prepare(session, adventure)
            charge = None
            if self.limits is not None:
                # Last of the checks, before the lease: nothing of a refused request is kept.
                # Whose model narrates is read here, in the request's own transaction: a server
                # or player who brought their own since this process last looked is not capped.
                on_operator_model = True
                if self.providers is not None:
                    await self.providers.read(session, adventure)
                    on_operator_model = self.providers.is_operator_default(adventure)
                charge = await self.limits.check_turn(
                    session, actor, adventure, on_operator_model=on_operator_model
                )
            self.places.seen(channel_id, adventure.id, adventure.version)
            if self.queue.running(adventure.id) or self.queue.waiting(adventure.id):
                return _Recorded(adventure.id, charge=charge, turn=turn)
            # Nothing of this adventure is queued here: the turn runs as soon as it is queued,
            # so its lease is claimed now, with the request, in one transaction rather than
            # three (the request, the claim, its status). Busy elsewhere: claimed in the job.
            lease = await self.leases.claim_in(session, adventure.id)
            if lease is None:
                return _Recorded(adventure.id, charge=charge, turn=turn)
            await self.requests.start(session, request_id)
            cut_off = None
            if lease.reclaimed_from is not None:
                cut_off = await self.requests.interrupted(session, adventure.id, besides=request_id)
            return _Recorded(adventure.id, lease, cut_off, charge, turn)

    def _fence(
        self,
        lease: Lease,
        request_id: int,
        passed: list[int],
        charge: Charge | None,
        spent: _Spent,
    ) -> Fence:
        """The turn's fence: the lease still held; and, in the transaction that stores the
        turn, the request's outcome (so a process killed after that commit leaves a request
        that is done, never one still "running" that a restart would call interrupted), the
        lease passed on (``_pass_on``) and the tokens reserved for it settled to what its
        model call cost (``spent``): one transaction where there were four. A turn that fails
        stores none of it (``_finish_failed`` settles its tokens)."""
        request_done = self.requests.stored
        limits = self.limits

        async def stored(session: AsyncSession, result: TurnResult) -> None:
            await request_done(session, request_id, result)
            await self._pass_on(session, lease, passed)
            if charge is not None and limits is not None:
                await limits.settle_in(session, charge, spent.usage, played=True)

        return Fence(holds=self.leases.fence(lease), stored=stored, spent=spent.tell)

    async def _pass_on(self, session: AsyncSession, lease: Lease, passed: list[int]) -> None:
        """In the transaction that ends a turn: the lease goes to the next turn queued here
        for the adventure, whose request is marked running (so that turn claims nothing), or
        is given up. ``passed`` gets the request it went to; ``_handed`` learns it only once
        that transaction has committed (``_let_go``)."""
        following = self.queue.next_key(lease.adventure_id)
        if (
            following is not None
            # A failed turn may have lost the lease: then it has nothing to pass on.
            and await self.leases.still_holds(session, lease)
            and await self.requests.start(session, following)
        ):
            passed.append(following)
        else:
            await self.leases.release_in(session, lease)

    def _let_go(self, lease: Lease, passed: list[int]) -> None:
        """The transaction that ended the turn committed: the lease was given up, or passed to
        the request in ``passed``, whose job takes it from ``_handed``."""
        for request_id in passed:
            self._handed[request_id] = lease
        self.leases.let_go(lease)

    async def _submit(
        self, recorded: _Recorded, request_id: int, channel_id: int
    ) -> _Submitted | TurnFailed:
        """Queue the turn behind the adventure's earlier ones; its events go to the queue
        returned, as they come."""
        adventure_id, turn = recorded.adventure_id, recorded.turn
        assert turn is not None
        events: asyncio.Queue[TurnEvent] = asyncio.Queue()

        async def started(session: AsyncSession, lease: Lease) -> None:
            # In the claim's transaction: a dead process's turn marked cut off, this one's
            # request marked running; both or neither.
            if lease.reclaimed_from is not None:
                cut_off = await self.requests.interrupted(session, adventure_id, besides=request_id)
                if cut_off is not None:
                    interrupted.append(cut_off)
            if not await self.requests.start(session, request_id):
                # Its record went with its player's data (/profile delete).
                raise PlayerDeleted()

        interrupted: list[TurnInterrupted] = []
        if recorded.cut_off is not None:
            interrupted.append(recorded.cut_off)

        spent = _Spent()

        async def job() -> None:
            # Claimed with the request, or passed on by the turn before: its request is
            # running already. Otherwise claimed now.
            claimed = recorded.lease or self._handed.pop(request_id, None)
            try:
                async with self.leases.hold(adventure_id, claimed=claimed, also=started) as lease:
                    for event in interrupted:
                        events.put_nowait(event)
                    passed: list[int] = []
                    fence = self._fence(lease, request_id, passed, recorded.charge, spent)
                    stream = turn(adventure_id, fence)
                    async with aclosing(stream) as running:
                        async for event in running:
                            if isinstance(event, TurnFailed):
                                await self._finish_failed(
                                    lease, request_id, event, recorded.charge, spent.usage
                                )
                                self.observer.turn_failed(type(event.error).__name__)
                            elif isinstance(event, TurnDone):
                                self._let_go(lease, passed)
                                self.observer.turn_done(event.result)
                                # Buttons drawn before this turn are stale now.
                                self.places.seen(channel_id, adventure_id, event.result.version)
                            events.put_nowait(event)
                            if isinstance(event, TurnDone) and self.after_turn is not None:
                                self.after_turn(adventure_id, request_id)
            except CampfireError as error:
                self.observer.turn_failed(type(error).__name__)
                await self.requests.fail(request_id, TurnFailed(error))
                await self._settle(recorded.charge, spent.usage)
                events.put_nowait(TurnFailed(error))
            except Exception:
                # Answered as an InternalError (``_forward``).
                self.observer.turn_failed(InternalError.__name__)
                raise

        try:
            ticket = await self.queue.submit(adventure_id, job, key=request_id)
        except CampfireError as error:
            if recorded.lease is not None:
                await self.leases.release(recorded.lease)
            await self.requests.fail(request_id, TurnFailed(error), status=REFUSED)
            await self._settle(recorded.charge, None)
            return TurnFailed(error)
        return _Submitted(ticket, events, recorded.lease, request_id, recorded.charge)

    async def _finish_failed(
        self,
        lease: Lease,
        request_id: int,
        event: TurnFailed,
        charge: Charge | None,
        spent: Usage | None,
    ) -> None:
        """A turn that failed: its request's outcome stored, its lease passed on and its
        reserved tokens settled to what its model call cost (a reply cut off, timed out or
        broken off was still paid for), in one transaction. Should that fail, ``hold``
        releases the lease on its own."""
        passed: list[int] = []
        try:
            async with self.db.transaction() as session:
                await self.requests.failed(session, request_id, event)
                await self._pass_on(session, lease, passed)
                if charge is not None and self.limits is not None:
                    await self.limits.settle_in(session, charge, spent, played=False)
        except Exception:
            log.warning("could not record the failure of request %s", request_id, exc_info=True)
            await self.requests.fail(request_id, event)
            await self._settle(charge, spent)
            return
        self._let_go(lease, passed)

    async def _settle(self, charge: Charge | None, spent: Usage | None) -> None:
        """The tokens reserved for a turn that failed or never ran, settled to what it cost;
        a failure here leaves the reservation standing (the budget errs on the side of the
        operator) and is logged."""
        if charge is None or self.limits is None:
            return
        try:
            await self.limits.settle(charge, spent)
        except Exception:
            log.warning("could not settle the tokens of a failed turn", exc_info=True)

    async def _forward(self, submitted: _Submitted) -> AsyncGenerator[TurnEvent, None]:
        """The queued turn's events, as they come."""
        ticket, events = submitted.ticket, submitted.events
        if ticket.position > 0:
            yield Queued(ticket.position)
        # A caller that stops listening does not stop the turn: it runs in the queue and is
        # saved all the same, so the story stays whole for the next player.
        outcome = asyncio.ensure_future(ticket.result())
        while True:
            getter = asyncio.ensure_future(events.get())
            await asyncio.wait({getter, outcome}, return_when=asyncio.FIRST_COMPLETED)
            if not getter.done():
                getter.cancel()
                while not events.empty():
                    yield events.get_nowait()
                if not ticket.started.is_set():
                    # Dropped before it ran: a lease claimed for it, or passed to it, goes back,
                    # and so do the tokens reserved for it.
                    lease = submitted.lease or self._handed.pop(submitted.request_id, None)
                    if lease is not None:
                        await self.leases.release(lease)
                    await self._settle(submitted.charge, None)
                error = outcome.exception()
                if isinstance(
                    error, CampfireError
                ):  # dropped from the queue (engine.people.profiles)
                    yield TurnFailed(error)
                elif error is not None:
                    reference = log_incident("turn job failed", error)
                    yield TurnFailed(InternalError(reference))
                return
            event = getter.result()
            yield event
            if isinstance(event, _FINAL):
                return
