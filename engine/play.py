"""What a front end calls to play: start an adventure in a place, act in it, list scenarios.

Each front-end command is one call here. Turns of one adventure run one at a time: in this
process through the adventure queue (so actions that arrive together are played in order and
told their place in line), across processes through the turn lease. Every action is recorded
as a request before it runs (``engine.coordination.requests``), so a turn that fails, or dies
with its process, can be retried, and a request delivered twice is played once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import aclosing, asynccontextmanager
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from engine.access import (
    NO_ADVENTURE,
    PLAYED_AGAIN,
    Actor,
    active_adventure,
    adventure_here,
    check_may_press,
    check_may_retry,
    check_may_retry_request,
    check_may_start_with_scripts,
)
from engine.accounts import touch_server, touch_user
from engine.actions import PlayerAction, format_action
from engine.adventure_caps import AdventureCaps, check_may_begin
from engine.coordination.requests import (
    REFUSED,
    RETRY_PAYLOAD,
    NewRequest,
    RequestLog,
)
from engine.errors import (
    CampfireError,
    DatabaseBusy,
    InternalError,
    NoAdventureHere,
    NotFound,
    PlayerDeleted,
    StoryMovedOn,
    log_incident,
)
from engine.events import (
    AlreadyHandled,
    Queued,
    TurnDone,
    TurnEvent,
    TurnFailed,
    TurnInterrupted,
)
from engine.formats.draft import MAX_OPTIONS, MAX_PLACEHOLDERS, placeholders_in
from engine.leases import Lease, TurnLeases
from engine.place_hints import PlaceHints
from engine.queue import AdventureQueue, Ticket
from engine.scenarios.lookup import resolve_scenario, visible_scenarios
from engine.scenarios.start import scenario_script_names, start_adventure
from engine.storage.database import Database
from engine.storage.dialect import is_busy
from engine.storage.models import (
    ActionType,
    Adventure,
    RequestRecord,
    Scenario,
    StoryNode,
    utcnow,
)
from engine.story_line.read import line_tail
from engine.story_tree import MOVED_ON
from engine.turns import Fence, TurnEngine, TurnResult

log = logging.getLogger(__name__)

_FINAL = (TurnDone, TurnFailed)


@dataclass(frozen=True, slots=True)
class StartedAdventure:
    adventure_id: int
    title: str
    icon: str
    opening: str
    version: int
    #: The opening's story node (the root of the tree), so its message can take buttons again.
    opening_node_id: int | None = None


@dataclass(frozen=True, slots=True)
class StartPlan:
    """What /start must ask before starting a scenario: a choice among its options, or the
    answers to its prompt's ``${placeholders}`` (at most five: one form)."""

    scenario_id: int
    title: str
    icon: str
    intro: str  # a menu scenario's own prompt, shown above its options
    options: list[tuple[str, str]]  # (label, scenario id)
    placeholders: list[str]


@dataclass(frozen=True, slots=True)
class AdventureRef:
    adventure_id: int
    title: str
    version: int


@dataclass(frozen=True, slots=True)
class ThreadAdventure:
    """An adventure running in a thread opened for it from a channel."""

    adventure_id: int
    title: str
    icon: str
    thread_id: int


#: How many of a channel's thread adventures ``adventures_from`` names at most.
THREAD_ADVENTURES_SHOWN = 5


@dataclass(frozen=True, slots=True)
class _Recorded:
    """A request recorded to be played."""

    adventure_id: int
    #: The turn's lease, claimed in the request's own transaction when nothing of the
    #: adventure was queued here (None: the queued job claims it when its turn comes).
    lease: Lease | None = None
    #: The turn a dead process was writing, which that claim took over.
    cut_off: TurnInterrupted | None = None


@dataclass(frozen=True, slots=True)
class _Submitted:
    """A recorded request's turn, in the adventure queue."""

    ticket: Ticket[None]
    events: asyncio.Queue[TurnEvent]
    lease: Lease | None
    request_id: int


#: A check run on a request's adventure in the transaction that records it.
RequestCheck = Callable[[AsyncSession, Adventure], Awaitable[None]]


class PlayService:
    def __init__(
        self,
        db: Database,
        turns: TurnEngine,
        leases: TurnLeases,
        queue: AdventureQueue,
        *,
        caps: AdventureCaps | None = None,
    ) -> None:
        self.db = db
        self.turns = turns
        self.leases = leases
        self.queue = queue
        #: The operator's caps on adventures per player (None: none, for tools and tests).
        self.caps = caps
        self.requests = RequestLog(db)
        #: What this process last saw running in each place (a hint: ``engine.place_hints``).
        self.places = PlaceHints()
        # Per place: the lock that records and queues its requests one at a time (``_enter``),
        # with how many hold or wait for it. Per process, and safe so: it only orders this
        # process's own requests; across processes the turn lease decides.
        self._arriving: dict[int, tuple[asyncio.Lock, int]] = {}
        # Turn leases passed on by a turn that ended to the next one queued here, by that
        # one's request, until its job takes it (``_pass_on``). Per process, and safe so: the
        # lease row names this process as holder all along, and the queue that orders the
        # turns is this process's own.
        self._handed: dict[int, Lease] = {}
        #: Called with the adventure's id after each turn is stored (the bot schedules the
        #: memory bank's work there). Must not block: it runs on the turn's path.
        self.after_turn: Callable[[int], None] | None = None

    # --- scenarios and adventures -------------------------------------------------------------

    async def scenario_choices(
        self, actor: Actor, typed: str, *, limit: int = 25
    ) -> list[tuple[str, str]]:
        """(label, value) pairs for autocomplete: titles containing what was typed."""
        async with self.db.session() as session:
            scenarios = await visible_scenarios(session, actor.server_id, actor.user_id)
        typed = typed.casefold().strip()
        return [
            (f"{s.icon} {s.title}".strip()[:100], str(s.id))
            for s in scenarios
            if typed in s.title.casefold()
        ][:limit]

    async def start_plan(self, actor: Actor, query: str | None, place: int | None) -> StartPlan:
        """The scenario ``query`` names, with the options and questions it needs at /start.

        ``place`` is where the adventure will run (None: a thread not opened yet). Whatever
        would refuse the start there (the adventure running there, the caps, the scenario's
        scripts) refuses it now, before a question is asked or a thread opened; ``start``
        checks again as it writes."""
        async with self.db.session() as session:
            scenario = await resolve_scenario(
                session, query, server_id=actor.server_id, user_id=actor.user_id
            )
            await check_may_begin(session, actor, place, self.caps)
            assert scenario.id is not None
            check_may_start_with_scripts(
                scenario, actor, await scenario_script_names(session, scenario.id)
            )
            options = await session.scalars(
                select(Scenario)
                .where(col(Scenario.parent_id) == scenario.id)
                .order_by(col(Scenario.id))
                .limit(MAX_OPTIONS)
            )
            return StartPlan(
                scenario.id,
                scenario.title,
                scenario.icon,
                scenario.prompt,
                [(f"{o.icon} {o.title}".strip()[:100], str(o.id)) for o in options],
                # Asked once each, wherever they appear: the opening first, then the steering.
                placeholders_in(
                    "\n".join((scenario.prompt, scenario.plot_essentials, scenario.authors_note))
                )[:MAX_PLACEHOLDERS],
            )

    async def start(
        self,
        actor: Actor,
        channel_id: int,
        query: str | None,
        answers: dict[str, str] | None = None,
        *,
        opened_from: int | None = None,
    ) -> StartedAdventure:
        """Start an adventure in a channel, thread or DM; one already running there ends, if
        ``actor`` may end it (``check_may_begin``, with the caps).

        ``answers`` fill the scenario's ``${placeholders}``; ``opened_from`` is the channel a
        thread was opened from for it (``adventures_from`` finds it there)."""
        async with self.db.transaction() as session:
            # First: the user's row lock queues this player's starts (see adventure_caps).
            await self._touch(session, actor)
            scenario = await resolve_scenario(
                session, query, server_id=actor.server_id, user_id=actor.user_id
            )
            running = await check_may_begin(session, actor, channel_id, self.caps)
            assert scenario.id is not None
            check_may_start_with_scripts(
                scenario, actor, await scenario_script_names(session, scenario.id)
            )
            if running is not None:
                running.ended_at = utcnow()
            adventure = await start_adventure(
                session,
                scenario.id,
                channel_id=channel_id,
                server_id=actor.server_id,
                host_id=actor.user_id,
                answers=answers,
            )
            adventure.parent_channel_id = opened_from
            assert adventure.id is not None
            self.places.seen(channel_id, adventure.id, adventure.version)
            return StartedAdventure(
                adventure.id,
                adventure.title,
                adventure.icon,
                adventure.prompt,
                adventure.version,
                adventure.head_node_id,
            )

    async def check_list(self, channel_id: int, drawn_for: int | None = None) -> int:
        """The adventure running here, whose lists a list command shows (anyone may read
        them); raises the reason when there is none, or when it is not ``drawn_for``, the one
        a pager's button was drawn for (an ended one's, or another place's)."""
        async with self.db.session() as session:
            adventure = await adventure_here(session, channel_id)
            check_may_press(adventure, drawn_for)
            assert adventure.id is not None
            return adventure.id

    async def adventure_in(self, channel_id: int) -> AdventureRef | None:
        async with self.db.session() as session:
            adventure = await active_adventure(session, channel_id)
            if adventure is None:
                self.places.seen(channel_id, None)
                return None
            assert adventure.id is not None
            self.places.seen(channel_id, adventure.id, adventure.version)
            return AdventureRef(adventure.id, adventure.title, adventure.version)

    async def adventures_from(self, channel_id: int) -> list[ThreadAdventure]:
        """The adventures running in threads opened from this channel, newest first (at most
        ``THREAD_ADVENTURES_SHOWN``): what an action or /start there points the player to,
        since a thread drops out of the channel's list once archived."""
        async with self.db.session() as session:
            adventures = await session.scalars(
                select(Adventure)
                .where(
                    col(Adventure.parent_channel_id) == channel_id,
                    col(Adventure.ended_at).is_(None),
                )
                .order_by(col(Adventure.id).desc())
                .limit(THREAD_ADVENTURES_SHOWN)
            )
            return [
                ThreadAdventure(a.id, a.title, a.icon, a.channel_id)
                for a in adventures
                if a.id is not None and a.channel_id is not None
            ]

    async def recent_story(self, channel_id: int, entries: int = 4) -> list[str]:
        """The newest entries of the story running in a channel (for a returning reader)."""
        async with self.db.session() as session:
            adventure = await active_adventure(session, channel_id)
            if adventure is None or adventure.head_node_id is None:
                return []
            nodes = await line_tail(session, adventure.head_node_id, entries)
        return [node.text for node in nodes if node.text.strip()]

    # --- turns --------------------------------------------------------------------------------

    async def act(
        self,
        actor: Actor,
        channel_id: int,
        action: PlayerAction,
        *,
        request_id: int,
        seen_version: int | None = None,
        drawn_for: int | None = None,
    ) -> AsyncGenerator[TurnEvent, None]:
        """Play an action in the adventure running in ``channel_id``.

        A button's press names the story it was drawn for: ``drawn_for`` (the adventure) and
        ``seen_version``; it acts on nothing else.

        Yields ``Queued`` when other turns are ahead, then the turn's events. Ends with
        ``TurnDone`` or ``TurnFailed``; or is only ``AlreadyHandled`` when ``request_id`` was
        played before (a repeated delivery of the same interaction).
        """
        played = self._play(actor, channel_id, action, request_id, seen_version, drawn_for)
        async with aclosing(played) as events:
            async for event in events:
                yield event

    async def retry_turn(
        self,
        actor: Actor,
        channel_id: int,
        *,
        request_id: int,
        seen_version: int | None = None,
        drawn_for: int | None = None,
    ) -> AsyncGenerator[TurnEvent, None]:
        """Write the newest narrator turn again as another take (``TurnEngine.retry``).

        Who may: the author of the turn's action, the host, server managers. Queued like any
        turn; a button press acts once per story version, on its own adventure only.
        """
        retaken = self._retake(actor, channel_id, request_id, seen_version, drawn_for)
        async with aclosing(retaken) as events:
            async for event in events:
                yield event

    async def retry_request(
        self, actor: Actor, channel_id: int, request_id: int, *, new_request_id: int
    ) -> AsyncGenerator[TurnEvent, None]:
        """Play again the action of a request of the adventure here that failed, was refused
        or was interrupted (``check_may_retry_request``, asked in the new request's own
        transaction), once; a request of another adventure, or one played already, is
        refused."""
        payload = await self.requests.payload_of(request_id)
        if not payload:
            yield TurnFailed(NotFound("That action is no longer available to retry."))
            return

        async def unplayed(session: AsyncSession, adventure: Adventure) -> None:
            check_may_retry_request(adventure, await session.get(RequestRecord, request_id))
            # A Retry button plays its action once: a second press (a double click) that
            # raced this one past the check above is refused here.
            if not await self.requests.take_for_retry(session, request_id):
                raise StoryMovedOn(PLAYED_AGAIN)

        if payload == RETRY_PAYLOAD:
            # A retry of a turn that failed: write the newest turn again once more.
            replayed = self._retake(actor, channel_id, new_request_id, None, None, unplayed)
        else:
            action = PlayerAction(
                ActionType(payload["type"]), payload.get("text", ""), actor.user_id
            )
            replayed = self._play(actor, channel_id, action, new_request_id, None, None, unplayed)
        async with aclosing(replayed) as events:
            async for event in events:
                yield event

    async def _play(
        self,
        actor: Actor,
        channel_id: int,
        action: PlayerAction,
        request_id: int,
        seen_version: int | None,
        drawn_for: int | None,
        check: RequestCheck | None = None,
    ) -> AsyncGenerator[TurnEvent, None]:
        try:
            format_action(action, max_chars=self.turns.max_action_chars)  # fail fast
        except CampfireError as error:
            yield TurnFailed(error)
            return
        payload = {"type": str(action.type), "text": action.text}

        def turn(adventure_id: int, fence: Fence) -> AsyncGenerator[TurnEvent, None]:
            return self.turns.play(adventure_id, action, fence=fence)

        entered = self._enter(
            actor, channel_id, payload, request_id, seen_version, drawn_for, [check], turn
        )
        async with aclosing(entered) as events:
            async for event in events:
                yield event

    async def _retake(
        self,
        actor: Actor,
        channel_id: int,
        request_id: int,
        seen_version: int | None,
        drawn_for: int | None,
        check: RequestCheck | None = None,
    ) -> AsyncGenerator[TurnEvent, None]:
        asked_for: list[int] = []

        async def allowed(session: AsyncSession, adventure: Adventure) -> None:
            assert adventure.head_node_id is not None
            head = await session.get(StoryNode, adventure.head_node_id)
            assert head is not None
            await check_may_retry(session, adventure, head, actor)
            # The turn retried is the newest one now, even if the retry waits in the queue.
            asked_for.append(adventure.head_node_id)

        def turn(adventure_id: int, fence: Fence) -> AsyncGenerator[TurnEvent, None]:
            return self.turns.retry(adventure_id, node_id=asked_for[0], fence=fence)

        entered = self._enter(
            actor,
            channel_id,
            RETRY_PAYLOAD,
            request_id,
            seen_version,
            drawn_for,
            [check, allowed],
            turn,
        )
        async with aclosing(entered) as events:
            async for event in events:
                yield event

    async def _enter(
        self,
        actor: Actor,
        channel_id: int,
        payload: dict[str, str],
        request_id: int,
        seen_version: int | None,
        drawn_for: int | None,
        checks: list[RequestCheck | None],
        turn: Callable[[int, Fence], AsyncGenerator[TurnEvent, None]],
    ) -> AsyncGenerator[TurnEvent, None]:
        """Record the request and queue its turn, then forward the turn's events.

        The two happen under the place's arrival lock, so that the requests of one place are
        queued in the order they were recorded: a request that found the adventure's queue
        idle has claimed the turn lease as it was recorded, and must run before any request
        recorded after it."""
        async with self._arrival(channel_id):
            try:
                recorded = await self._record(
                    actor, channel_id, payload, request_id, seen_version, drawn_for, checks
                )
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
                submitted = await self._submit(recorded, turn, request_id, channel_id)
        if not isinstance(submitted, _Submitted):
            yield submitted
            return
        async with aclosing(self._forward(submitted)) as events:
            async for event in events:
                yield event

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

    async def _record(
        self,
        actor: Actor,
        channel_id: int,
        payload: dict[str, str],
        request_id: int,
        seen_version: int | None,
        drawn_for: int | None,
        checks: list[RequestCheck | None],
    ) -> _Recorded | AlreadyHandled:
        """Record the request before it runs; its adventure (and the turn's lease, when it
        could be claimed at once), or its stored outcome when ``request_id`` was recorded
        before. Every check after the record rolls it back."""
        async with self.db.transaction() as session:
            await self._touch(session, actor)
            adventure = await active_adventure(session, channel_id)
            request = NewRequest(
                request_id,
                actor.user_id,
                payload,
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
            if seen_version is not None and (
                seen_version != adventure.version
                or await self.requests.button_pressed(
                    session, adventure.id, seen_version, besides=request_id
                )
            ):
                raise StoryMovedOn(MOVED_ON)
            for check in checks:
                if check is not None:
                    await check(session, adventure)
            self.places.seen(channel_id, adventure.id, adventure.version)
            if self.queue.running(adventure.id) or self.queue.waiting(adventure.id):
                return _Recorded(adventure.id)
            # Nothing of this adventure is queued here: the turn runs as soon as it is queued,
            # so its lease is claimed now, with the request, in one transaction rather than
            # three (the request, the claim, its status). Busy elsewhere: claimed in the job.
            lease = await self.leases.claim_in(session, adventure.id)
            if lease is None:
                return _Recorded(adventure.id)
            await self.requests.start(session, request_id)
            cut_off = None
            if lease.reclaimed_from is not None:
                cut_off = await self.requests.interrupted(session, adventure.id, besides=request_id)
            return _Recorded(adventure.id, lease, cut_off)

    def _fence(self, lease: Lease, request_id: int, passed: list[int]) -> Fence:
        """The turn's fence: the lease still held; and, in the transaction that stores the
        turn, the request's outcome (so a process killed after that commit leaves a request
        that is done, never one still "running" that a restart would call interrupted) and the
        lease passed on (``_pass_on``): one transaction where there were three."""
        request_done = self.requests.stored

        async def stored(session: AsyncSession, result: TurnResult) -> None:
            await request_done(session, request_id, result)
            await self._pass_on(session, lease, passed)

        return Fence(holds=self.leases.fence(lease), stored=stored)

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
        self,
        recorded: _Recorded,
        turn: Callable[[int, Fence], AsyncGenerator[TurnEvent, None]],
        request_id: int,
        channel_id: int,
    ) -> _Submitted | TurnFailed:
        """Queue the turn behind the adventure's earlier ones; its events go to the queue
        returned, as they come."""
        adventure_id = recorded.adventure_id
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

        async def job() -> None:
            # Claimed with the request, or passed on by the turn before: its request is
            # running already. Otherwise claimed now.
            claimed = recorded.lease or self._handed.pop(request_id, None)
            try:
                async with self.leases.hold(adventure_id, claimed=claimed, also=started) as lease:
                    for event in interrupted:
                        events.put_nowait(event)
                    passed: list[int] = []
                    stream = turn(adventure_id, self._fence(lease, request_id, passed))
                    async with aclosing(stream) as running:
                        async for event in running:
                            if isinstance(event, TurnFailed):
                                await self._finish_failed(lease, request_id, event)
                            elif isinstance(event, TurnDone):
                                self._let_go(lease, passed)
                                # Buttons drawn before this turn are stale now.
                                self.places.seen(channel_id, adventure_id, event.result.version)
                            events.put_nowait(event)
                            if isinstance(event, TurnDone) and self.after_turn is not None:
                                self.after_turn(adventure_id)
            except CampfireError as error:
                await self.requests.fail(request_id, TurnFailed(error))
                events.put_nowait(TurnFailed(error))

        try:
            ticket = await self.queue.submit(adventure_id, job, key=request_id)
        except CampfireError as error:
            if recorded.lease is not None:
                await self.leases.release(recorded.lease)
            await self.requests.fail(request_id, TurnFailed(error), status=REFUSED)
            return TurnFailed(error)
        return _Submitted(ticket, events, recorded.lease, request_id)

    async def _finish_failed(self, lease: Lease, request_id: int, event: TurnFailed) -> None:
        """A turn that failed: its request's outcome stored and its lease passed on, in one
        transaction. Should that fail, ``hold`` releases the lease on its own."""
        passed: list[int] = []
        try:
            async with self.db.transaction() as session:
                await self.requests.failed(session, request_id, event)
                await self._pass_on(session, lease, passed)
        except Exception:
            log.warning("could not record the failure of request %s", request_id, exc_info=True)
            await self.requests.fail(request_id, event)
            return
        self._let_go(lease, passed)

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
                    # Dropped before it ran: a lease claimed for it, or passed to it, goes back.
                    lease = submitted.lease or self._handed.pop(submitted.request_id, None)
                    if lease is not None:
                        await self.leases.release(lease)
                error = outcome.exception()
                if isinstance(error, CampfireError):  # dropped from the queue (engine.profiles)
                    yield TurnFailed(error)
                elif error is not None:
                    reference = log_incident("turn job failed", error)
                    yield TurnFailed(InternalError(reference))
                return
            event = getter.result()
            yield event
            if isinstance(event, _FINAL):
                return

    async def reap_interrupted(self) -> list[tuple[int, TurnInterrupted]]:
        """Expired leases (their process died): each adventure's cut-off turn, by channel."""
        found = []
        for adventure_id in await self.leases.reap_expired():
            event = await self.requests.cut_off(adventure_id)
            if event is None:
                continue
            async with self.db.session() as session:
                adventure = await session.get(Adventure, adventure_id)
            if adventure is not None and adventure.channel_id is not None:
                found.append((adventure.channel_id, event))
        return found

    async def _touch(self, session: AsyncSession, actor: Actor) -> None:
        await touch_user(session, actor.user_id, actor.user_name)
        if actor.server_id is not None:
            await touch_server(session, actor.server_id, actor.server_name)
