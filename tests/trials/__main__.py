"""The trials as CI runs them: each in a quick form that keeps its meaning, one after another.

    python -m tests.trials [--only NAME]

``scripts/test`` runs this after the lint when it is given no arguments, so a change lands
only if every trial passes. Each trial runs as its own process (they start bot processes, fake
servers and PostgreSQL databases of their own, and a trial that hangs or dies must not take the
others with it), its output streamed here as it comes, its summary line included. Then one
line per trial (its summary, its time, passed / FAILED / COULD NOT RUN) and a closing line
``trials: <N> passed, <N> failed``. The exit status is 0 when all passed, 1 when one found a
fault or stopped with a traceback, 2 when one could not run (``needs``: a missing extra or
server), which fails CI too.

The quick forms (figures of a 2-core machine in docs/testing.md, Trials):

* ``faults`` on SQLite and on PostgreSQL, all four parts: the whole trial, it is quick;
* ``hostile_scripts``: the whole list;
* ``abuse``: the whole trial (a player abusing the budget, blocks, host controls, a hostile
  endpoint and the script workers beside two honest players), on SQLite;
* ``cluster`` on PostgreSQL: 2 processes and 36 adventures instead of 3 and 1,000, 4 of them
  played on to the memory and the summary, one process killed with SIGKILL in round 2 and
  restarted; the same code and the same checks as the long run (lost, duplicated, one
  generation at a time per adventure, jobs run once, the database check), without the
  one-process baseline that only measures throughput.

PostgreSQL: ``CAMPFIRE_TEST_POSTGRES_URL`` when set (``scripts/test`` sets it), else each trial
starts a throwaway server.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

from tests.trials.needs import COULD_NOT_RUN, ROOT

#: name, module, arguments, the start of its summary line, a bound on its time in seconds.
TRIALS: tuple[tuple[str, str, tuple[str, ...], str, float], ...] = (
    (
        "faults",
        "tests.trials.faults",
        ("--backend", "sqlite", "--backend", "postgresql"),
        "faults:",
        900.0,
    ),
    ("hostile scripts", "tests.trials.hostile_scripts", (), "hostile scripts:", 600.0),
    ("abuse", "tests.trials.abuse", (), "abuse:", 600.0),
    (
        "cluster",
        "tests.trials.cluster",
        (
            "--processes",
            "2",
            "--adventures",
            "36",
            "--long",
            "4",
            "--spread",
            "3",
            "--no-baseline",
        ),
        "cluster:",
        900.0,
    ),
)


@dataclass
class Ran:
    name: str
    status: int
    seconds: float
    summary: str

    @property
    def verdict(self) -> str:
        if self.status == 0:
            return "passed"
        return "COULD NOT RUN" if self.status == COULD_NOT_RUN else "FAILED"


def run(name: str, module: str, arguments: tuple[str, ...], prefix: str, bound: float) -> Ran:
    print(f"\n=== trial: {name} (python -m {module} {' '.join(arguments)})", flush=True)
    started = time.monotonic()
    summary = ""
    # A session of its own, so that a trial past its bound is stopped with everything it
    # started (bot processes, script workers, a PostgreSQL server's clients).
    with subprocess.Popen(
        [sys.executable, "-m", module, *arguments],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
        start_new_session=True,
    ) as child:
        overdue = threading.Timer(bound, os.killpg, (child.pid, signal.SIGKILL))
        overdue.start()
        try:
            assert child.stdout is not None
            for line in child.stdout:
                print(line, end="", flush=True)
                if line.startswith(prefix):
                    summary = line.strip()
            status = child.wait()
        finally:
            overdue.cancel()
    if time.monotonic() - started >= bound:
        print(f"(stopped: still running after {bound:.0f} s)", flush=True)
        status = 1
    if status == 0 and not summary:
        status = 1  # it said nothing of what it found: no pass without its figures
        summary = f"(no line starting {prefix!r})"
    return Ran(name, status, time.monotonic() - started, summary or "(no summary line)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.trials", description=__doc__)
    parser.add_argument("--only", help="only the trials whose name contains this")
    args = parser.parse_args(argv)
    chosen = [t for t in TRIALS if not args.only or args.only in t[0]]
    ran = [run(*trial) for trial in chosen]
    print("\n=== trials", flush=True)
    for one in ran:
        print(f"{one.name}: {one.verdict} in {one.seconds:.0f} s: {one.summary}", flush=True)
    failed = [one for one in ran if one.status != 0]
    print(f"trials: {len(ran) - len(failed)} passed, {len(failed)} failed", flush=True)
    if not failed:
        return 0
    return COULD_NOT_RUN if all(one.status == COULD_NOT_RUN for one in failed) else 1


if __name__ == "__main__":
    sys.exit(main())
