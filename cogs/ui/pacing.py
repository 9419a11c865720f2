"""Pacing the bot's requests to Discord: one sliding window per channel (about 5 sends or edits
per 5 s, shared by every message there) and one budget for the whole process under Discord's
global limit, so that discord.py's own limiter, and a 429, are rarely met. Requests through an
interaction's token (its response, follow-ups and their edits) count apart: in a window of that
token's own (:func:`interaction_window`), and not on the global budget. Waiting requests are
served by priority (final ones first, streaming edits last), round-robin across channels; work
in progress reserves the requests it needs to end (``cogs.ui.streaming`` explains how the
streams use it).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import IntEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    # discord.py names its channels that have an id and a send() only for type checkers.
    pass

log = logging.getLogger(__name__)


class Priority(IntEnum):
    """Which requests the pacer serves first when several wait (lower first)."""

    #: A narration's final requests (``urgent``): the whole global budget, before anything else.
    FINAL = 0
    #: Anything else that must land: the old buttons taken off, undone marks, notes, deletions.
    ROUTINE = 1
    #: Intermediate streaming requests (the first send of a narration still coming, its edits):
    #: optional, served only while the budget has room beyond what work in progress reserves.
    STREAM = 2


#: Of the bot's global budget, the part the pacer spends. The rest is left for the requests it
#: does not pace (threads opened, messages fetched, the occasional reaction); interaction
#: responses and follow-ups need none of it: "Interaction endpoints are not bound to the bot's
#: Global Rate Limit" (discord-api-docs, Rate Limits: "Global Rate Limit";
#: https://discord.com/developers/docs/topics/rate-limits#global-rate-limit).
PACED_SHARE = 0.8


def process_budget(
    bot_per_second: int, shards_here: int | None = None, shard_count: int | None = None
) -> int:
    """The requests a second this process's pacer may spend: its share of the bot's global
    budget. Discord counts that budget per bot token, across every process, and processes do
    not talk to each other on the hot path, so the split is static: a process running some
    shards takes the part of them it runs (servers are spread over shards evenly by their ids,
    and DMs, all on shard 0, are few). A burst in one process cannot borrow another's idle
    share; discord.py waits out the rare 429 if the shares ever overlap."""
    share = bot_per_second * PACED_SHARE
    if shards_here is not None and shard_count:
        share = share * shards_here / shard_count
    return max(1, math.floor(share))


#: A window's key: a channel's id, or an :func:`interaction_window` (an interaction token's).
WindowKey = int | tuple[str, int]


def interaction_window(interaction_id: int) -> WindowKey:
    """The window of the requests made through one interaction's token (its ``@original``
    response, its follow-ups and their edits). Discord limits them per webhook and token ("webhooks
    (``webhook_id`` or ``webhook_id + webhook_token``)" are a route's top-level resource,
    discord-api-docs, Rate Limits), not per channel, and not on the global budget: "Interaction
    endpoints are not bound to the bot's Global Rate Limit" (same page, Global Rate Limit)."""
    return ("interaction", interaction_id)


@dataclass(eq=False)
class _Waiter:
    #: None: a request that is no message in a channel (a thread opened, a member added to
    #: one), which spends only the global budget.
    channel_id: WindowKey | None
    priority: Priority
    granted: asyncio.Future[float]
    #: False: an interaction endpoint's request, off the bot's global budget.
    global_budget: bool = True


class RatePacer:
    """Token buckets: one per channel (default 5 per 5 s, sliding), shared by every stream in that
    channel, plus a process-wide budget (default 40/s, under Discord's 50/s: see
    :func:`process_budget` for a process's share when several run the bot).

    Both are sliding windows: at most ``per_channel`` requests in any ``per_seconds`` in a channel
    and at most ``global_per_second`` in any second overall. ``margin`` (seconds) widens the
    channel window a little, so that network jitter does not squeeze requests closer together at
    Discord's end than they left here. Create one per process and share it.

    Waiters are served by :class:`Priority`, then in arrival order (so round-robin among streams,
    each of which waits for one request at a time); one that its channel's window holds back does
    not hold back another channel. Routine and streaming requests may use three quarters of the
    global budget; final ones all of it.

    Streaming requests are also held back while the process is busy: work in progress declares
    the requests it will still need (:meth:`reserve`: an open stream its final edit, a turn being
    shown the old buttons it takes off), and an intermediate request goes out only if the global
    budget of the next ``final_horizon`` seconds, less the requests of the last second, still
    covers all of those after it. With many narrations at once their intermediate edits are thus
    skipped: each gets its final text in one or two requests, and the finals do not queue behind
    everyone's intermediate edits.
    """

    def __init__(
        self,
        *,
        per_channel: int = 5,
        per_seconds: float = 5.0,
        global_per_second: int = 40,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
        margin: float = 0.05,
        final_horizon: float = 2.0,
    ) -> None:
        if per_channel < 1 or global_per_second < 1 or per_seconds <= 0 or final_horizon <= 0:
            raise ValueError("rate limits must be positive")
        self.per_channel = per_channel
        self.per_seconds = per_seconds
        self.global_per_second = global_per_second
        self.margin = margin
        self.final_horizon = final_horizon
        self.clock = clock
        self.sleep = sleep
        self._channels: dict[WindowKey, deque[float]] = {}
        self._swept = -math.inf  # when idle windows were last dropped
        self._global: deque[float] = deque(maxlen=global_per_second)
        # Three quarters of the global budget for routine edits; all of it for final ones.
        self._routine_share = max(1, global_per_second * 3 // 4)
        self._reserved = 0
        self._waiters: dict[Priority, list[_Waiter]] = {p: [] for p in Priority}
        self._changed: asyncio.Event | None = None
        self._dispatcher: asyncio.Task[None] | None = None
        #: Requests granted so far: on the bot's global budget, and through interaction tokens.
        self.global_requests = 0
        self.interaction_requests = 0

    def _hits(self, channel_id: WindowKey) -> deque[float]:
        hits = self._channels.get(channel_id)
        if hits is None:
            self._forget_idle()
            hits = self._channels[channel_id] = deque(maxlen=self.per_channel)
        return hits

    def _forget_idle(self) -> None:
        """Drop the windows whose requests have all left them (an empty window allows as much):
        a window per interaction token would otherwise be kept for the process's life. At most
        once a window's length, so the sweep costs nothing per request."""
        now = self.clock()
        if now < self._swept + self.per_seconds:
            return
        self._swept = now
        horizon = now - self.per_seconds - self.margin
        for key in [k for k, hits in self._channels.items() if not hits or hits[-1] < horizon]:
            del self._channels[key]

    # -- reservations ---------------------------------------------------------------------

    @property
    def reserved(self) -> int:
        """Requests that work in progress has declared it will still need."""
        return self._reserved

    def reserve(self, requests: int = 1) -> None:
        """Declare ``requests`` more that work in progress will need (its final ones)."""
        self._reserved += requests

    def release(self, requests: int = 1) -> None:
        """Those requests were made (or will not be): streaming may take their room again."""
        self._reserved = max(0, self._reserved - requests)
        self._kick()

    @property
    def saturated(self) -> bool:
        """Whether what work in progress reserves leaves no room for any streaming request
        (see the class's note): a stream that finds it so streams no more."""
        return math.floor(self.global_per_second * self.final_horizon) - self._reserved - 1 < 0

    # -- the windows ----------------------------------------------------------------------

    def _wait_for(
        self,
        channel_id: WindowKey | None,
        priority: Priority,
        now: float,
        global_budget: bool = True,
    ) -> float:
        """Seconds until the windows allow this request (inf: not until the reservations
        change); may be negative. ``global_budget`` False: only its own window counts."""
        wait = -math.inf
        hits = None if channel_id is None else self._channels.get(channel_id)
        if hits is not None and len(hits) >= self.per_channel:
            wait = hits[0] + self.per_seconds + self.margin - now
        if not global_budget:
            return wait
        allowed = self.global_per_second if priority is Priority.FINAL else self._routine_share
        recent = self._global
        if len(recent) >= allowed:
            wait = max(wait, recent[-allowed] + 1.0 - now)
        if priority is Priority.STREAM:
            # At most this many requests in the last second leave room for this one and every
            # reserved one within the horizon.
            room = math.floor(self.global_per_second * self.final_horizon) - self._reserved - 1
            if room < 0:
                return math.inf
            if len(recent) > room:
                wait = max(wait, recent[-(room + 1)] + 1.0 - now)
        return wait

    def would_wait(self, channel_id: int, *, urgent: bool = False) -> float:
        """Seconds until both windows allow one more request in the channel (0 if free now),
        queued requests aside.

        Requests that are not ``urgent`` may use only part of the global budget: the rest is
        kept for final edits, so that when many stories stream at once each one still ends
        promptly instead of queueing behind everyone's intermediate edits.
        """
        priority = Priority.FINAL if urgent else Priority.ROUTINE
        return max(self._wait_for(channel_id, priority, self.clock()), 0.0)

    def _record(self, waiter: _Waiter, now: float) -> None:
        if waiter.channel_id is not None:
            self._hits(waiter.channel_id).append(now)
        if waiter.global_budget:
            self._global.append(now)
            self.global_requests += 1
        else:
            self.interaction_requests += 1

    def _unrecord(self, waiter: _Waiter, at: float) -> None:
        """Give back a slot recorded for a waiter that was cancelled before it could use it."""
        channel_id = waiter.channel_id
        channel = None if channel_id is None else self._channels.get(channel_id)
        for hits in (channel, self._global if waiter.global_budget else None):
            if hits is not None and at in hits:
                hits.remove(at)

    # -- serving waiters ------------------------------------------------------------------

    async def acquire(
        self,
        channel_id: WindowKey | None,
        *,
        urgent: bool = False,
        priority: Priority | None = None,
        global_budget: bool = True,
    ) -> None:
        """Wait until both windows allow one request, then record it (cancel-safe).
        ``channel_id`` None: a request that is no channel message (opening a thread, adding a
        member to one), under the global budget alone: unpaced, a burst of them (a hundred
        players starting at once) met Discord's global 429 more often than discord.py retries.
        ``global_budget`` False: a request through an interaction's token (``channel_id`` its
        :func:`interaction_window`), paced by that window alone.

        ``priority`` defaults to :attr:`Priority.FINAL` when ``urgent``, else
        :attr:`Priority.ROUTINE`.
        """
        if priority is None:
            priority = Priority.FINAL if urgent else Priority.ROUTINE
        granted: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        waiter = _Waiter(channel_id, priority, granted, global_budget)
        self._waiters[priority].append(waiter)
        self._grant_ready()
        if granted.done():
            return
        self._kick()
        try:
            await granted
        except asyncio.CancelledError:
            if granted.done() and not granted.cancelled():
                self._unrecord(waiter, granted.result())
            else:
                self._remove(waiter)
            self._kick()
            raise

    def _remove(self, waiter: _Waiter) -> None:
        queue = self._waiters[waiter.priority]
        if waiter in queue:
            queue.remove(waiter)

    def _pending(self) -> bool:
        return any(self._waiters.values())

    def _grant_ready(self) -> float:
        """Grant every waiter the windows allow now, best first. Returns the seconds until the
        next one may go (inf: none until something changes)."""
        now = self.clock()
        soonest = math.inf
        for priority in Priority:
            queue = self._waiters[priority]
            kept: list[_Waiter] = []
            for waiter in queue:
                if waiter.granted.done():  # cancelled meanwhile
                    continue
                wait = self._wait_for(waiter.channel_id, priority, now, waiter.global_budget)
                if wait <= 0:
                    self._record(waiter, now)
                    waiter.granted.set_result(now)
                else:
                    soonest = min(soonest, wait)
                    kept.append(waiter)
            queue[:] = kept
        return soonest

    def _kick(self) -> None:
        """Something changed (a waiter came or went, a reservation ended): serve again."""
        if self._changed is not None:
            self._changed.set()
        if self._dispatcher is None and self._pending():
            self._changed = asyncio.Event()
            self._dispatcher = asyncio.get_running_loop().create_task(
                self._dispatch(), name="rate pacer"
            )

    async def _dispatch(self) -> None:
        changed = self._changed
        assert changed is not None
        try:
            while True:
                changed.clear()
                wait = self._grant_ready()
                if not self._pending():
                    return
                waiters = [asyncio.ensure_future(changed.wait())]
                if wait != math.inf:
                    waiters.append(asyncio.ensure_future(self.sleep(wait)))
                try:
                    await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    for task in waiters:
                        task.cancel()
        finally:
            self._dispatcher = None
            self._changed = None

    @property
    def steady_interval(self) -> float:
        """Spacing at which one stream leaves one slot of its channel's window free."""
        return (self.per_seconds + self.margin) / max(1, self.per_channel - 1)
