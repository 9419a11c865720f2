"""The write gate: one SQLite write transaction of this process at a time, in arrival order,
urgent ones first.

SQLite has one writer at a time. Left to itself, a writer that finds the database locked polls
(its busy handler sleeps up to 100 ms between tries) and gives up after the busy timeout, so
under load (200 turns at once) the unlucky ones fail while others pass them. Within a process
this gate lines the writers up instead, so they wait their turn without polling; across
processes SQLite's lock and busy timeout still decide. An urgent writer (a turn's store, which
its player's final text waits for) goes before the others waiting; among equals, first come,
first served. Written by hand: asyncio's Lock is fair but has no priority.
"""

from __future__ import annotations

import asyncio
from collections import deque


class WriteGate:
    def __init__(self) -> None:
        self._held = False
        self._urgent: deque[asyncio.Future[None]] = deque()
        self._routine: deque[asyncio.Future[None]] = deque()

    async def acquire(self, *, urgent: bool = False) -> None:
        """Wait for the gate (cancel-safe: a waiter cancelled, or timed out, leaves no trace,
        and one cancelled just as the gate was handed to it hands it on)."""
        if not self._held and not self._urgent and not self._routine:
            self._held = True
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        line = self._urgent if urgent else self._routine
        line.append(waiter)
        try:
            await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self.release()  # handed over as it was cancelled: the next one's turn
            elif waiter in line:
                line.remove(waiter)
            raise

    def release(self) -> None:
        """Hand the gate to the next waiter (urgent ones first), or open it."""
        for line in (self._urgent, self._routine):
            while line:
                waiter = line.popleft()
                if not waiter.done():
                    waiter.set_result(None)  # it holds the gate now
                    return
        self._held = False
