"""Scripts run in worker processes: a small warm pool, each run bounded by a wall clock.

A script's run (``sandbox.run_sync``) and an upload's syntax check happen in a worker process,
never in the bot's own: QuickJS's time limit covers only what it interprets, and a script can
hold the process elsewhere (an exception whose ``toString`` loops, read by Python when the
script fails; a Proxy's trap reached from C). In a worker that freezes one worker, and the
engine kills it when the run passes its wall-clock limit (``wall_seconds``, or less, what is
left of the turn's script time) and starts another.

Workers are started by the "spawn" method (a fresh interpreter: the bot's process, with its
event loop and threads, is never forked), lazily on the first run, and then kept: a start costs
a few tenths of a second (seconds on a loaded machine), a run on a warm worker a few
milliseconds more than in the bot's own process. One spare is kept started, so a killed worker
is replaced at once by a ready one. Runs are driven by the threads of a small executor (one run
each, ``WORKERS`` at once), so the event loop only awaits a future; requests and answers are
pickled plain data over a pipe. ``close`` (the bot's close) kills them all; a later run starts
new ones. They are daemon processes, so they also end with the interpreter, and on Linux the
kernel kills a worker whose bot died (``sandbox.serve``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import multiprocessing
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

from engine.library.scripting import sandbox
from engine.library.scripting.fair_share import FairShare
from engine.library.scripting.results import Caps, RunResult
from engine.library.scripting.sandbox import DEFAULT_CAPS, Limits

log = logging.getLogger(__name__)

WORKERS = 2
#: How long a fresh worker may take to be ready (an interpreter importing QuickJS; seconds on a
#: loaded machine, far less usually).
START_SECONDS = 30.0
#: The syntax check compiles without running; a 2.5 M character library takes a fraction of a
#: second. A file built to parse slowly (QuickJS is quadratic in some shapes: 213k `var`s took
#: 20 s) is refused at this bound rather than waited on, its worker killed, so that it holds
#: one of the workers every scripted adventure shares for seconds at most.
CHECK_SECONDS = 4.0


def wall_seconds(time_seconds: float) -> float:
    """How long a run with a CPU limit of ``time_seconds`` may take before its worker is
    killed: three times the limit (the worker shares the machine: on a busy one, CPU time comes
    slower than the clock, and a script stopped by its CPU limit is not to be killed instead)
    and a second for the round trip. A turn bounds its runs tighter (``hooks``)."""
    return time_seconds * 3 + 1.0


@dataclass(slots=True, eq=False)
class _Worker:
    process: BaseProcess
    connection: Connection
    #: The pool's generation it was started in (``close`` ends a generation).
    generation: int
    ready: bool = False


class _Lost:
    """What came back instead of an answer."""

    def __init__(self, why: str) -> None:
        self.why = why


class _StartFailed(Exception):
    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


class ScriptWorkers:
    """The pool: at most ``size`` runs at once, each on a worker taken from the idle ones, and
    one spare kept started behind them."""

    def __init__(self, size: int = WORKERS) -> None:
        self.size = size
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None
        #: Started workers no run holds (ready, or still starting).
        self._idle: list[_Worker] = []
        #: Every worker not yet ended, idle or running, so ``close`` can end them all.
        self._live: set[_Worker] = set()
        #: Workers being started, not yet in ``_live`` (so two threads start one spare).
        self._starting = 0
        #: Bumped by ``close``: a worker of an earlier generation is ended, never reused.
        self._generation = 0
        self._context = multiprocessing.get_context("spawn")
        #: Which run gets the next worker: a fair share for each adventure (``fair_share``).
        self.share = FairShare(size)

    # --- what the engine awaits ---

    async def run(
        self,
        source: str,
        payload: dict[str, Any],
        limits: Limits,
        caps: Caps = DEFAULT_CAPS,
        *,
        owner: str,
        wall: float | None = None,
    ) -> RunResult:
        """``source`` (library + hook) run on ``payload`` in a worker, killed past ``wall``
        seconds (default ``wall_seconds`` of its time limit), on ``owner``'s share of the pool
        (the adventure it runs for). Never raises for anything the script did: a run that had
        to be stopped is a result with an error. Raises ``ScriptsBusy`` when no worker comes
        free for it (``fair_share``)."""
        wall = wall_seconds(limits.time_seconds) if wall is None else wall
        async with self.share.slot(owner) as waited:
            request = ("run", source, payload, limits, caps)
            answer, ms = await self._ask(request, wall, encode=True)
        queued_ms = int(waited * 1000)
        if isinstance(answer, _Lost):
            return RunResult(error=_lost_run(answer, wall, limits), ms=ms, queued_ms=queued_ms)
        if not isinstance(answer, RunResult):  # pragma: no cover - the worker sends these
            error = "The script's sandbox gave back nothing readable."
            return RunResult(error=error, ms=ms, queued_ms=queued_ms)
        # The time the engine waited, round trip included (what the turn's script time counts;
        # the wait for a worker is not the script's doing and is not counted).
        answer.ms = ms
        answer.queued_ms = queued_ms
        return answer

    async def syntax_error(self, code: str, limits: Limits, *, owner: str) -> str | None:
        """QuickJS's complaint about ``code``'s syntax, or None (``sandbox.syntax_error_sync``,
        in a worker, on ``owner``'s share of the pool)."""
        wall = CHECK_SECONDS
        async with self.share.slot(owner):
            answer, _ = await self._ask(("check", code, limits), wall)
        if isinstance(answer, _Lost):
            return f"the syntax check {answer.why} within {wall:.0f} s, so the code was not checked"
        return answer if isinstance(answer, str) or answer is None else None

    @property
    def processes(self) -> list[BaseProcess]:
        """The worker processes started and not yet ended."""
        with self._lock:
            return [worker.process for worker in self._live]

    def close(self) -> None:
        """Kill every worker; a later run starts new ones. Safe to call more than once."""
        with self._lock:
            self._generation += 1
            executor, self._executor = self._executor, None
            workers, self._live, self._idle = list(self._live), set(), []
        self.share.reset()
        for worker in workers:
            _end(worker)
        if executor is not None:
            # Threads still waiting on a killed worker see it gone and return at once.
            executor.shutdown(wait=False, cancel_futures=True)

    # --- the executor's side ---

    async def _ask(
        self, request: tuple[Any, ...], wall: float, *, encode: bool = False
    ) -> tuple[object, int]:
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._pool(), self._exchange, request, wall, encode)
        except RuntimeError:
            # ``close`` shut the executor between taking it and handing it the request.
            return await loop.run_in_executor(self._pool(), self._exchange, request, wall, encode)

    def _pool(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(
                    max_workers=self.size, thread_name_prefix="campfire-scripts"
                )
            return self._executor

    def _exchange(self, request: tuple[Any, ...], wall: float, encode: bool) -> tuple[object, int]:
        """One request to an idle worker and its answer (on an executor thread). With
        ``encode``, a run's payload goes as its JSON text, made here, off the event loop: the
        worker hands that text to QuickJS as it is."""
        if encode:
            kind, source, payload, *rest = request
            request = (kind, source, json.dumps(payload, ensure_ascii=False), *rest)
        try:
            worker = self._take()
        except _StartFailed as failure:
            return _Lost(failure.why), 0
        started = time.perf_counter()
        try:
            worker.connection.send(request)
            if worker.connection.poll(wall):
                answer = worker.connection.recv()
                self._give_back(worker)
                return answer, _ms(started)
            lost = _Lost("did not finish")
        except (EOFError, OSError):
            # Killed by ``close``, or the worker died under the script (it should not).
            lost = _Lost("stopped unexpectedly")
        self._discard(worker)
        return lost, _ms(started)

    def _take(self) -> _Worker:
        """An idle worker, ready ones first (one is started when none is idle), with a spare
        started behind it."""
        for _ in range(3):
            with self._lock:
                for worker in list(self._idle):
                    if not worker.ready and worker.connection.poll(0):
                        worker.ready = _said_ready(worker)
                ready = [worker for worker in self._idle if worker.ready]
                chosen = ready[0] if ready else (self._idle[0] if self._idle else None)
                if chosen is not None:
                    self._idle.remove(chosen)
            worker = chosen if chosen is not None else self._start()
            self._keep_spare()
            if not worker.ready:
                worker.ready = worker.connection.poll(START_SECONDS) and _said_ready(worker)
            if worker.ready and worker.process.is_alive():
                return worker
            self._discard(worker)  # it died idle, or never started
        log.error("no script worker could be started within %s s", START_SECONDS)
        raise _StartFailed("could not be started")

    def _start(self, *, reserved: bool = False) -> _Worker:
        """A new worker; its readiness is awaited when it is first used. ``reserved``: the
        caller counted it in ``_starting`` already."""
        with self._lock:
            generation = self._generation
            if not reserved:
                self._starting += 1
        try:
            ours, theirs = self._context.Pipe(duplex=True)
            process = self._context.Process(
                target=sandbox.serve, args=(theirs,), name="campfire-script-worker", daemon=True
            )
            process.start()
        finally:
            with self._lock:
                self._starting -= 1
        # The worker holds its end; ours alone stays here, so its death reads as end of file.
        theirs.close()
        worker = _Worker(process, ours, generation)
        with self._lock:
            self._live.add(worker)
        return worker

    def _keep_spare(self) -> None:
        """A spare when none is idle: at most one more worker than runs at once."""
        with self._lock:
            wanted = not self._idle and len(self._live) + self._starting <= self.size
            if wanted:
                self._starting += 1
        if wanted:
            self._give_back(self._start(reserved=True))

    def _give_back(self, worker: _Worker) -> None:
        with self._lock:
            if worker.generation == self._generation and worker in self._live:
                self._idle.append(worker)
                return
        _end(worker)  # from before a ``close``

    def _discard(self, worker: _Worker) -> None:
        """End a worker that overran, died or never started; the spare takes its place, and
        another spare is started."""
        with self._lock:
            self._live.discard(worker)
            current = worker.generation == self._generation
        _end(worker)
        if current:
            self._keep_spare()


def _said_ready(worker: _Worker) -> bool:
    try:
        return worker.connection.recv() == "ready"
    except (EOFError, OSError):
        return False


def _end(worker: _Worker) -> None:
    if worker.process.is_alive():
        worker.process.kill()
    worker.process.join(5)
    worker.connection.close()


def _lost_run(lost: _Lost, wall: float, limits: Limits) -> str:
    if lost.why == "did not finish":
        return (
            f"The script did not finish within {wall:.2g} s of wall-clock time (its limit is "
            f"{limits.time_seconds:.2g} s of CPU), so its sandbox was stopped and its logs are "
            "lost."
        )
    return f"The script's sandbox {lost.why}; the script's changes and logs are lost."


def _ms(started: float) -> int:
    return int((time.perf_counter() - started) * 1000)


#: This process's pool (``engine.platform.coordination.per_process``).
_workers = ScriptWorkers()


async def run(
    source: str,
    payload: dict[str, Any],
    limits: Limits,
    caps: Caps = DEFAULT_CAPS,
    *,
    owner: str,
    wall: float | None = None,
) -> RunResult:
    return await _workers.run(source, payload, limits, caps, owner=owner, wall=wall)


async def syntax_error(code: str, limits: Limits, *, owner: str) -> str | None:
    return await _workers.syntax_error(code, limits, owner=owner)


def owner_of(adventure_id: int | None) -> str:
    """The share a run for this adventure is charged to."""
    return f"adventure {adventure_id}"


def close() -> None:
    """End this process's script workers (the bot's close; a later run starts new ones)."""
    _workers.close()
