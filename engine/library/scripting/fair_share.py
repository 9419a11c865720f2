"""Who gets the next script worker: a fair share of the pool for every adventure.

The pool (``workers``) has a few workers that every scripted adventure on this process shares.
Without a rule, one adventure whose scripts loop to their time limit every turn (or a player
uploading files built to parse slowly) would hold them all, and everyone else's scripted turns
would wait behind it. So every run names its *owner* (the adventure it runs for), and:

* an owner holds at most ``share`` workers at once (one less than the pool, so that one owner
  never holds them all);
* when a worker frees, it goes to the waiting run whose owner has used the least worker time
  lately (each owner is charged the seconds its runs held a worker, decaying with a half-life
  of a minute), first come first served among equals: an adventure that keeps the workers busy
  waits behind everyone who does not;
* the queue is bounded, per owner and in all, and a run waits at most ``wait_seconds``: past
  them it is refused with ``ScriptsBusy`` (a turn fails with Retry and nothing saved; an upload
  is to be sent again), never left waiting without end.

This is per-process state, as the pool it guards is (``engine.platform.coordination.
per_process``): each process has its own workers, and a share of them is all this decides. It
lives on the event loop's thread (only coroutines touch it), so it needs no lock.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from itertools import count

from engine.errors import CampfireError

#: Runs waiting for a worker, all owners together; one more is refused at once.
QUEUE_LIMIT = 24
#: Runs one owner may have waiting (a turn's hooks run one after another; a round or an
#: upload beside a turn makes two).
OWNER_WAITING = 2
#: How long a run may wait for a worker before it is refused.
WAIT_SECONDS = 10.0
#: How fast an owner's charged worker time is forgiven.
HALF_LIFE_SECONDS = 60.0
#: Owners remembered after their charge decays below this (seconds) are forgotten.
FORGET_BELOW = 0.001


class ScriptsBusy(CampfireError):
    """Every script worker is taken and the queue for them is full, or the wait for one passed
    its bound: nothing ran and nothing was saved."""

    def __init__(self, why: str) -> None:
        super().__init__(
            f"Scripts are busy on this bot right now ({why}), so this did not run and nothing "
            "was saved. Try again in a moment."
        )


@dataclass(slots=True, eq=False)
class _Waiter:
    owner: str
    arrived: int
    granted: asyncio.Future[None]


class FairShare:
    """Admission to ``slots`` workers, a fair share each (see the module's docstring)."""

    def __init__(
        self,
        slots: int,
        *,
        queue_limit: int = QUEUE_LIMIT,
        owner_waiting: int = OWNER_WAITING,
        wait_seconds: float = WAIT_SECONDS,
        half_life: float = HALF_LIFE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.slots = slots
        #: With one worker there is nothing to share; otherwise one is always left to others.
        self.share = max(1, slots - 1)
        self.queue_limit = queue_limit
        self.owner_waiting = owner_waiting
        self.wait_seconds = wait_seconds
        self.half_life = half_life
        self._clock = clock
        self._running: Counter[str] = Counter()
        self._waiting: list[_Waiter] = []
        #: owner -> (charged seconds, when they were last decayed)
        self._charged: dict[str, tuple[float, float]] = {}
        self._arrivals = count()

    @asynccontextmanager
    async def slot(self, owner: str) -> AsyncIterator[float]:
        """Hold one of the workers for ``owner``'s run; yields the seconds it waited. Raises
        ``ScriptsBusy`` when the queue is full or the wait passes its bound."""
        waited = await self._admit(owner)
        started = self._clock()
        try:
            yield waited
        finally:
            self._release(owner, self._clock() - started)

    def charged(self, owner: str) -> float:
        """The worker seconds ``owner`` is charged now (decayed)."""
        seconds, since = self._charged.get(owner, (0.0, 0.0))
        if not seconds:
            return 0.0
        return seconds * 0.5 ** ((self._clock() - since) / self.half_life)

    def reset(self) -> None:
        """Forget every owner and waiter (the pool was closed: its runs are all ended)."""
        for waiter in self._waiting:
            if not waiter.granted.done():
                waiter.granted.cancel()
        self._waiting.clear()
        self._running.clear()
        self._charged.clear()

    # --- inside ---

    async def _admit(self, owner: str) -> float:
        waiting_here = sum(1 for waiter in self._waiting if waiter.owner == owner)
        if len(self._waiting) >= self.queue_limit:
            raise ScriptsBusy(f"{len(self._waiting)} runs are already waiting for a worker")
        if waiting_here >= self.owner_waiting:
            raise ScriptsBusy("this adventure already has runs waiting for a worker")
        waiter = _Waiter(owner, next(self._arrivals), asyncio.get_running_loop().create_future())
        self._waiting.append(waiter)
        started = self._clock()
        self._grant()
        try:
            async with asyncio.timeout(self.wait_seconds):
                await waiter.granted
        except BaseException as stopped:
            if waiter.granted.done() and not waiter.granted.cancelled():
                # Granted just as the wait ended: give the worker back to the next in line.
                self._release(owner, 0.0)
            else:
                self._waiting.remove(waiter)
                waiter.granted.cancel()
            if isinstance(stopped, TimeoutError):
                raise ScriptsBusy(f"no worker came free within {self.wait_seconds:g} s") from None
            raise
        return self._clock() - started

    def _grant(self) -> None:
        """Hand free workers to the waiting runs whose owners are under their share, least
        charged first."""
        # A waiter of an event loop since closed (a test's) will never take its worker.
        self._waiting = [w for w in self._waiting if not w.granted.get_loop().is_closed()]
        while sum(self._running.values()) < self.slots:
            candidates = [w for w in self._waiting if self._running[w.owner] < self.share]
            if not candidates:
                break
            chosen = min(candidates, key=lambda w: (self.charged(w.owner), w.arrived))
            self._waiting.remove(chosen)
            self._running[chosen.owner] += 1
            chosen.granted.set_result(None)

    def _release(self, owner: str, held: float) -> None:
        self._running[owner] -= 1
        if self._running[owner] <= 0:
            del self._running[owner]
        now = self._clock()
        self._charged[owner] = (self.charged(owner) + held, now)
        if len(self._charged) > 256:
            self._charged = {
                name: (seconds, since)
                for name, (seconds, since) in self._charged.items()
                if name in self._running or self.charged(name) >= FORGET_BELOW
            }
        self._grant()
