"""The 3 s acknowledgement clock forgives the event loop's wait for a CPU only where other
programs caused it: the bot's own work (its threads, its child processes: an embedded model,
script workers) is counted as Discord counts it. Real processes burning real CPU, measured
through Linux's scheduler statistics."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from bot.standin.starvation import SCHEDSTAT, StarvedClock, _children_cpu

pytestmark = pytest.mark.skipif(not SCHEDSTAT.exists(), reason="Linux's schedstat")

BURN = "import time\nend = time.monotonic() + 4\nwhile time.monotonic() < end: pass"


def burners() -> int:
    """More CPU-bound processes than this process may use cores, so that the loop waits."""
    return len(os.sched_getaffinity(0)) + 1


def spin(seconds: float, *clocks: StarvedClock) -> None:
    """The loop thread busy (runnable all along), ticking the clocks as the watch does."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for _ in range(10_000):
            pass
        for clock in clocks:
            clock.tick()


def test_the_bots_own_work_is_not_forgiven() -> None:
    clock = StarvedClock()
    console = StarvedClock(counts_own_work=False)  # forgives every wait: the upper bound
    children = [subprocess.Popen([sys.executable, "-c", BURN]) for _ in range(burners())]
    try:
        time.sleep(0.3)  # the interpreters started and burning
        before, console_before = clock.total, console.total
        children_before = _children_cpu(os.getpid())
        spin(1.5, clock, console)
        children_cpu = _children_cpu(os.getpid()) - children_before
        forgiven, waited = clock.total - before, console.total - console_before
    finally:
        for child in children:
            child.kill()
            child.wait()
    # The loop waited for a CPU; the bot's own children explain at least half their CPU time of
    # that wait, which is not forgiven (on a machine shared with other programs, the rest of
    # the wait is theirs, and is).
    assert children_cpu > 0.3
    assert forgiven <= max(0.05, waited - children_cpu / 2)


def test_other_programs_are_forgiven_and_the_console_forgives_the_bots_own() -> None:
    clock = StarvedClock()
    console = StarvedClock(counts_own_work=False)
    # Burners that are not this process's children: started by a shell that exits at once,
    # as another program on the machine would be.
    burn = f"{sys.executable} -c '{BURN}'"
    subprocess.run(["sh", "-c", " & ".join([burn] * burners()) + " &"], check=True)
    time.sleep(0.3)
    before, console_before = clock.total, console.total
    spin(1.5, clock, console)
    time.sleep(3)  # the burners end by themselves
    assert clock.total - before > 0.05
    # The console forgives at least as much (each clock samples on its own spans, so the last
    # span's part may differ by a few milliseconds).
    assert console.total - console_before >= clock.total - before - 0.05
