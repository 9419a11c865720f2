"""Scripts run in worker processes: a small warm pool, each run bounded by a wall clock.

A script's run (``sandbox.run_sync``) and an upload's syntax check happen in a worker process,
never in the bot's own: QuickJS's time limit covers only what it interprets, and a script can
hold the process elsewhere (an exception whose ``toString`` loops, read by Python when the
script fails; a Proxy's trap reached from C). In a worker that freezes one worker, and the
engine kills it when the run passes its wall-clock limit (``wall_seconds``, or less, what is
left of the turn's script time) and starts another.

Workers are started by the "spawn" method (a fresh interpreter: the bot's process, with its
event loop and threads, is never forked), lazily on the first run, and then kept: a start costs
a tenth of a second or more, a run on a warm worker a millisecond or two of overhead. Each
worker is driven by one thread of a small executor, so the event loop only awaits a future;
requests and answers are pickled plain data over a pipe. ``close`` (the bot's close) kills
them; a later run starts new ones. They are daemon processes, so they also end with the
interpreter, and on Linux the kernel kills a worker whose bot died (``sandbox.serve``).
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

from engine.scripting import sandbox
from engine.scripting.results import Caps, RunResult
from engine.scripting.sandbox import DEFAULT_CAPS, Limits

log = logging.getLogger(__name__)

WORKERS = 2
#: How long a fresh worker may take to be ready (an interpreter importing QuickJS; seconds on a
#: loaded machine, far less usually).
START_SECONDS = 30.0
#: The syntax check compiles without running; a 2.5 M character library takes a fraction of a
#: second, so this is only a bound.
CHECK_SECONDS = 10.0


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
    ready: bool = False


class _Lost:
    """What came back instead of an answer."""

    def __init__(self, why: str) -> None:
        self.why = why


class ScriptWorkers:
    """The pool: one worker process per executor thread, started when that thread first needs
    one and replaced when it is killed."""

    def __init__(self, size: int = WORKERS) -> None:
        self.size = size
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None
        self._local = threading.local()
        #: Every live worker, so ``close`` can end them from any thread.
        self._live: set[_Worker] = set()
        #: Bumped by ``close``: a thread whose worker is from before drops it.
        self._generation = 0
        self._context = multiprocessing.get_context("spawn")

    # --- what the engine awaits ---

    async def run(
        self,
        source: str,
        payload: dict[str, Any],
        limits: Limits,
        caps: Caps = DEFAULT_CAPS,
        *,
        wall: float | None = None,
    ) -> RunResult:
        """``source`` (library + hook) run on ``payload`` in a worker, killed past ``wall``
        seconds (default ``wall_seconds`` of its time limit). Never raises for anything the
        script did: a run that had to be stopped is a result with an error."""
        wall = wall_seconds(limits.time_seconds) if wall is None else wall
        answer, ms = await self._ask(("run", source, payload, limits, caps), wall, encode=True)
        if isinstance(answer, _Lost):
            return RunResult(error=_lost_run(answer, wall, limits), ms=ms)
        if not isinstance(answer, RunResult):  # pragma: no cover - the worker sends these
            return RunResult(error="The script's sandbox gave back nothing readable.", ms=ms)
        # The time the engine waited, round trip included (what the turn's script time counts).
        answer.ms = ms
        return answer

    async def syntax_error(self, code: str, limits: Limits) -> str | None:
        """QuickJS's complaint about ``code``'s syntax, or None (``sandbox.syntax_error_sync``,
        in a worker)."""
        wall = max(wall_seconds(limits.time_seconds), CHECK_SECONDS)
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
            workers, self._live = list(self._live), set()
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
        """One request to this thread's worker and its answer (on an executor thread). With
        ``encode``, a run's payload goes as its JSON text, made here, off the event loop: the
        worker hands that text to QuickJS as it is."""
        if encode:
            kind, source, payload, *rest = request
            request = (kind, source, json.dumps(payload, ensure_ascii=False), *rest)
        try:
            worker = self._ready_worker()
        except _StartFailed as failure:
            return _Lost(failure.why), 0
        started = time.perf_counter()
        try:
            worker.connection.send(request)
            if worker.connection.poll(wall):
                return worker.connection.recv(), _ms(started)
            lost = _Lost("did not finish")
        except (EOFError, OSError):
            # Killed by ``close``, or the worker died under the script (it should not).
            lost = _Lost("stopped unexpectedly")
        self._replace(worker)
        return lost, _ms(started)

    def _ready_worker(self) -> _Worker:
        worker: _Worker | None = getattr(self._local, "worker", None)
        if worker is None or getattr(self._local, "generation", None) != self._generation:
            worker = self._start()
        elif not worker.process.is_alive():
            self._forget(worker)
            worker = self._start()
        if not worker.ready:
            try:
                ready = worker.connection.poll(START_SECONDS) and worker.connection.recv()
            except (EOFError, OSError):
                ready = False
            if ready != "ready":
                self._forget(worker)
                _end(worker)
                log.error("a script worker did not start within %s s", START_SECONDS)
                raise _StartFailed("could not be started")
            worker.ready = True
        return worker

    def _start(self) -> _Worker:
        """A new worker for this thread; its readiness is awaited when it is first used."""
        ours, theirs = self._context.Pipe(duplex=True)
        process = self._context.Process(
            target=sandbox.serve, args=(theirs,), name="campfire-script-worker", daemon=True
        )
        process.start()
        # The worker holds its end; ours alone stays here, so its death reads as end of file.
        theirs.close()
        worker = _Worker(process, ours)
        with self._lock:
            self._live.add(worker)
            self._local.worker = worker
            self._local.generation = self._generation
        return worker

    def _replace(self, worker: _Worker) -> None:
        """Kill a worker that overran or died, and start its successor now, so the next run
        finds it (nearly) ready."""
        self._forget(worker)
        _end(worker)
        with self._lock:
            current = getattr(self._local, "generation", None) == self._generation
        if current:
            self._start()

    def _forget(self, worker: _Worker) -> None:
        with self._lock:
            self._live.discard(worker)
            if getattr(self._local, "worker", None) is worker:
                self._local.worker = None


class _StartFailed(Exception):
    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


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


#: This process's pool (``engine.coordination.per_process``).
_workers = ScriptWorkers()


async def run(
    source: str,
    payload: dict[str, Any],
    limits: Limits,
    caps: Caps = DEFAULT_CAPS,
    *,
    wall: float | None = None,
) -> RunResult:
    return await _workers.run(source, payload, limits, caps, wall=wall)


async def syntax_error(code: str, limits: Limits) -> str | None:
    return await _workers.syntax_error(code, limits)


def close() -> None:
    """End this process's script workers (the bot's close; a later run starts new ones)."""
    _workers.close()
