"""Group play's action queue: one adventure's actions run one after another, in arrival order.

While a turn is being written, more actions arrive; each is queued behind it and told how many
turns are ahead of it. Jobs of one adventure run strictly one at a time, in submission order;
different adventures run concurrently. A job that fails does not stop the queue. The queue has a
cap on waiting actions and refuses politely beyond it (``QueueFull``).

A job may carry a key (the request it plays); ``drop`` takes the jobs of given keys out, or
cancels them while they run, and their callers get the error ``drop`` was given (a player who
deleted their data: ``engine.people.profiles``).

This queue orders one process's work only and lives in memory: one ``AdventureQueue`` per
process, shared by the front end. Exclusion between processes is the turn lease
(``engine.platform.coordination.leases``): a queued job claims the lease when it runs, and may still
find it busy because another process is playing the same adventure.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Collection
from typing import Any, Generic, TypeVar

from engine.errors import CampfireError

T = TypeVar("T")

#: How many actions may wait behind the running one, per adventure.
DEFAULT_CAP = 5


class QueueFull(CampfireError):
    def __init__(self, cap: int) -> None:
        waiting = "1 action is" if cap == 1 else f"{cap} actions are"
        super().__init__(
            f"{waiting} already waiting in this adventure, the most it queues. "
            "Send yours again once the story has caught up."
        )
        self.cap = cap


class Ticket(Generic[T]):
    """One submitted job: where it stands in the queue, when it starts, what it returned."""

    def __init__(
        self, lane: _Lane, job: Callable[[], Awaitable[T]], position: int, key: int | None
    ) -> None:
        self.adventure_id = lane.adventure_id
        #: Turns ahead of it when it was submitted; 0: it runs now.
        self.position = position
        #: What ``AdventureQueue.drop`` knows it by (the request it plays), if anything.
        self.key = key
        #: Set when the job starts running.
        self.started = asyncio.Event()
        self._lane = lane
        self._job = job
        self._task: asyncio.Task[T] | None = None
        # What result() raises instead of CancelledError when the job was dropped.
        self._dropped: BaseException | None = None
        self._future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        # Its outcome is delivered by result(); nobody awaiting it is not an error to report.
        self._future.add_done_callback(_retrieve)

    @property
    def ahead(self) -> int:
        """Turns ahead of it now (0 once it runs or has finished)."""
        if self.started.is_set() or self._future.done():
            return 0
        lane = self._lane
        if lane.current is self:
            return 0
        return lane.waiting.index(self) + (lane.current is not None)

    def done(self) -> bool:
        return self._future.done()

    def cancelled(self) -> bool:
        return self._future.cancelled()

    async def wait_started(self) -> bool:
        """Wait until the job starts; False if it was cancelled before it could."""
        if not self.started.is_set() and not self._future.done():
            started = asyncio.ensure_future(self.started.wait())
            try:
                await asyncio.wait({started, self._future}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                started.cancel()
        return self.started.is_set()

    async def result(self) -> T:
        """The job's return value, or its exception raised here (``CancelledError`` if the
        ticket was cancelled). Giving up waiting does not cancel the job: ``cancel()`` does."""
        return await asyncio.shield(self._future)

    def cancel(self, error: BaseException | None = None) -> bool:
        """Take a waiting job out of the queue, or cancel a running one. False once done.

        ``error``: what ``result()`` raises then, instead of ``CancelledError``."""
        if self._future.done():
            return False
        self._dropped = error
        if self._task is not None:
            self._task.cancel()
            return True
        if self in self._lane.waiting:
            self._lane.waiting.remove(self)
        if error is not None:
            self._future.set_exception(error)
        else:
            self._future.cancel()
        return True

    async def _run(self) -> None:
        if self._future.done():  # cancelled before its turn came
            return
        self.started.set()
        self._task = asyncio.ensure_future(_call(self._job))
        try:
            await asyncio.wait({self._task})
        except asyncio.CancelledError:  # the queue is being closed
            self._task.cancel()
            await asyncio.wait({self._task})
            self._settle()
            raise
        self._settle()

    def _settle(self) -> None:
        assert self._task is not None and self._task.done()
        if self._future.done():
            return
        if self._task.cancelled():
            if self._dropped is not None:
                self._future.set_exception(self._dropped)
            else:
                self._future.cancel()
        elif (error := self._task.exception()) is not None:
            self._future.set_exception(error)
        else:
            self._future.set_result(self._task.result())


class _Lane:
    """One adventure's running job and the jobs waiting behind it."""

    def __init__(self, adventure_id: int) -> None:
        self.adventure_id = adventure_id
        self.current: Ticket[Any] | None = None
        self.waiting: deque[Ticket[Any]] = deque()
        self.runner: asyncio.Task[None] | None = None


class AdventureQueue:
    """Per-adventure FIFO queues of jobs. One per process, shared by the front end."""

    def __init__(self, *, cap: int = DEFAULT_CAP) -> None:
        if cap < 0:
            raise ValueError("the queue's cap cannot be negative")
        self.cap = cap
        self._lanes: dict[int, _Lane] = {}

    async def submit(
        self, adventure_id: int, job: Callable[[], Awaitable[T]], *, key: int | None = None
    ) -> Ticket[T]:
        """Queue ``job`` behind the adventure's earlier jobs; ``QueueFull`` past the cap.

        The ticket's ``position`` says how many turns are ahead of it (0: it runs now);
        ``key`` names it for ``drop``.
        """
        # No await before the ticket is in place: submissions keep their arrival order.
        lane = self._lanes.get(adventure_id)
        if lane is None:
            lane = self._lanes[adventure_id] = _Lane(adventure_id)
        position = len(lane.waiting) + (lane.current is not None)
        if position > self.cap:
            raise QueueFull(self.cap)
        ticket = Ticket(lane, job, position, key)
        if lane.current is None and not lane.waiting:
            lane.current = ticket
        else:
            lane.waiting.append(ticket)
        if lane.runner is None:
            lane.runner = asyncio.create_task(
                self._drain(lane), name=f"adventure-queue-{adventure_id}"
            )
        return ticket

    def waiting(self, adventure_id: int) -> int:
        """Jobs queued behind the running one."""
        lane = self._lanes.get(adventure_id)
        return len(lane.waiting) if lane else 0

    def next_key(self, adventure_id: int) -> int | None:
        """The key of the job that runs after the adventure's current one, if one waits."""
        lane = self._lanes.get(adventure_id)
        if lane is None:
            return None
        return next((t.key for t in lane.waiting if not t.done()), None)

    def depths(self) -> tuple[int, int]:
        """In this process: adventures with a job running, and jobs waiting behind them."""
        lanes = list(self._lanes.values())
        return sum(lane.current is not None for lane in lanes), sum(
            len(lane.waiting) for lane in lanes
        )

    def running(self, adventure_id: int) -> bool:
        lane = self._lanes.get(adventure_id)
        return lane is not None and lane.current is not None

    def drop(self, keys: Collection[int], error: BaseException) -> int:
        """Take the jobs of these keys out of the queue, or cancel them while they run; their
        ``result()`` raises ``error``. Returns how many there were."""
        wanted = set(keys)
        tickets = [
            ticket
            for lane in self._lanes.values()
            for ticket in [*([lane.current] if lane.current else []), *lane.waiting]
            if ticket.key is not None and ticket.key in wanted
        ]
        return sum(ticket.cancel(error) for ticket in tickets)

    async def close(self) -> None:
        """Cancel every waiting and running job (at shutdown) and wait for them to stop."""
        lanes = list(self._lanes.values())
        self._lanes.clear()
        for lane in lanes:
            for ticket in [*lane.waiting, *([lane.current] if lane.current else [])]:
                ticket.cancel()
            if lane.runner is not None:
                lane.runner.cancel()
        runners = [lane.runner for lane in lanes if lane.runner is not None]
        if runners:
            await asyncio.wait(runners)

    async def _drain(self, lane: _Lane) -> None:
        try:
            while True:
                if lane.current is None:
                    if not lane.waiting:
                        return
                    lane.current = lane.waiting.popleft()
                await lane.current._run()
                lane.current = None
        finally:
            for ticket in lane.waiting:
                ticket._future.cancel()
            lane.waiting.clear()
            lane.current = None
            if self._lanes.get(lane.adventure_id) is lane:
                del self._lanes[lane.adventure_id]


async def _call(job: Callable[[], Awaitable[T]]) -> T:
    return await job()


def _retrieve(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()
