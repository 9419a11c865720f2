"""What the stand-in's 3 s acknowledgement clock leaves out: time the event loop was kept from
a CPU by other programs on a shared test machine.

Discord's clock counts every second between an interaction and its acknowledgement, whatever
held the bot up. On a real deployment the bot's machine is its own, so the only thing that can
keep its event loop from a CPU is the bot's own work: the embedded model's threads, the script
workers, the database driver's threads. A test machine also runs other test processes, which
can deny the loop seconds at a time; that is no fault of the bot, and a test failing on it
would be noise. So the stand-in forgives the loop's wait for a CPU less the CPU time the bot's
own other work took meanwhile (its process's other threads and its live child processes):
whatever of the wait its own work could explain counts, as on Discord. Time on the CPU (the
bot blocking its own loop included) and time blocked on I/O always count.

The console forgives all of it (``counts_own_work=False``): it runs on a player's machine,
where an embedded model may take every core, and a late acknowledgement there would only turn
a turn into "This interaction failed" with nobody to report it to (DESIGN's conformance list
says so).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

#: Linux's scheduler statistics for the calling thread: its first field is the time it ran,
#: its second the time it spent runnable but waiting for a CPU, in nanoseconds (the kernel's
#: Documentation/scheduler/sched-stats.rst, "/proc/<pid>/schedstat").
SCHEDSTAT = Path("/proc/thread-self/schedstat")
#: The shortest span a sample covers. A child process's CPU time is counted in clock ticks
#: (10 ms), the loop thread's wait in nanoseconds: over a shorter span the children's share
#: would read as nothing while the wait read in full.
SAMPLE_SPAN_S = 0.25
#: Clock ticks per second, the unit of /proc/<pid>/stat's CPU times (proc(5)).
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _this_thread() -> tuple[float, float] | None:
    """(time on a CPU, time waiting for one) of the calling thread; None off Linux."""
    try:
        ran, waited = SCHEDSTAT.read_text().split()[:2]
        return int(ran) / 1e9, int(waited) / 1e9
    except (OSError, ValueError):
        return None


def _children_cpu(pid: int) -> float:
    """CPU time of ``pid``'s live child processes (the script workers), from proc(5): each
    thread's ``children`` file, and fields 14 and 15 (utime, stime) of each child's ``stat``."""
    total = 0.0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0.0
    for task in tasks:
        try:
            children = Path(f"/proc/{pid}/task/{task}/children").read_text().split()
        except OSError:
            continue
        for child in children:
            try:
                stat = Path(f"/proc/{child}/stat").read_text()
            except OSError:
                continue  # gone meanwhile
            fields = stat[stat.rindex(")") + 2 :].split()
            total += (int(fields[11]) + int(fields[12])) / _TICKS
    return total


class StarvedClock:
    """The loop thread's wait for a CPU that others caused, summed (``total``). Read on the
    loop's thread: the watch and the callback that tick it run there."""

    def __init__(self, *, counts_own_work: bool = True) -> None:
        self.counts_own_work = counts_own_work
        self.total = 0.0
        self._last = self._sample()

    def _sample(self) -> tuple[float, float, float, float] | None:
        """(when, the loop thread's CPU time, its wait for a CPU, the CPU time of the whole
        bot)."""
        thread = _this_thread()
        if thread is None:
            return None  # not Linux: nothing is forgiven
        own = time.process_time() + _children_cpu(os.getpid()) if self.counts_own_work else 0.0
        return time.monotonic(), thread[0], thread[1], own

    def tick(self) -> None:
        """Count the span since the last sample, once it is at least ``SAMPLE_SPAN_S`` long
        (so ``total`` may lag by that much, and forgive that much less)."""
        if self._last is None or time.monotonic() - self._last[0] < SAMPLE_SPAN_S:
            return
        now = self._sample()
        if now is None:
            return
        _, ran, waited, own = (b - a for a, b in zip(self._last, now, strict=True))
        self._last = now
        # The bot's own work beside the loop (its other threads, its children) explains that
        # much of the wait; only the rest is the machine's.
        elsewhere = max(0.0, own - ran) if self.counts_own_work else 0.0
        self.total += max(0.0, waited - elsewhere)
