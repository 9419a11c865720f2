"""The QuickJS sandbox: one fresh context per hook run, with limits, and JSON both ways.

A run evaluates the prelude (data/scripting/prelude.js: the globals AI Dungeon scripts expect),
then the scenario's library and hook as one sloppy-mode global script, and reads back one JSON
text:
the result (``text``/``stop``), the ``state`` and ``storyCards`` as the script left them, and
its logs. No Python object is ever handed to JavaScript (no callables are registered), and the
context has no module loader, timers or I/O: what a script can touch is what the prelude built.

Limits: memory (16 MB), CPU time (2 s, measured by QuickJS's interrupt handler with the
process's CPU clock, so a busy process gives scripts a little less), and the native stack. An
exceeded limit is an ordinary ``ScriptError``: the hook is skipped, the turn goes on.

QuickJS runtimes must stay on the thread that made them, and deep recursion needs a big native
stack, so runs go to a small pool of worker threads created with 8 MB stacks; the event loop
never waits on JavaScript.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import threading
import time
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import quickjs

PRELUDE_PATH = Path(__file__).resolve().parent.parent.parent / "data" / "scripting" / "prelude.js"

DEFAULT_MEMORY_BYTES = 16 * 1024 * 1024
DEFAULT_TIME_SECONDS = 2.0
#: QuickJS's own guard on the native stack; the worker threads have 8 MB, well above it.
DEFAULT_STACK_BYTES = 1024 * 1024
WORKER_STACK_BYTES = 8 * 1024 * 1024
WORKERS = 2
#: Reading logs back after a failed run gets this much time of its own.
LOGS_TIME_SECONDS = 0.2


@dataclass(frozen=True, slots=True)
class Limits:
    memory_bytes: int = DEFAULT_MEMORY_BYTES
    time_seconds: float = DEFAULT_TIME_SECONDS
    stack_bytes: int = DEFAULT_STACK_BYTES


@dataclass(slots=True)
class RunResult:
    """What one run gave back. ``error`` set means the run failed and nothing else counts
    (except ``logs``, which are kept for Insights)."""

    text: str = ""
    stop: bool = False
    state: dict[str, Any] = field(default_factory=dict)
    cards: list[dict[str, str]] = field(default_factory=list)
    logs: list[str] = field(default_factory=list)
    error: str | None = None
    ms: int = 0
    #: CPU time of the run's thread (what the time limit bounds; wall time may be longer).
    cpu_ms: int = 0

    @property
    def ok(self) -> bool:
        return self.error is None


@cache
def prelude() -> str:
    return PRELUDE_PATH.read_text(encoding="utf-8")


_pool: concurrent.futures.ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _worker_pool() -> concurrent.futures.ThreadPoolExecutor:
    """The worker threads, each started now with a stack deep enough for QuickJS's guard.

    ``threading.stack_size`` applies to threads started while it is set, and the pool starts a
    thread per submit while it has fewer than ``WORKERS``, so the workers are started here,
    held on a barrier until all exist.
    """
    global _pool
    with _pool_lock:
        if _pool is None:
            previous = threading.stack_size()
            try:
                threading.stack_size(WORKER_STACK_BYTES)
                pool = concurrent.futures.ThreadPoolExecutor(
                    max_workers=WORKERS, thread_name_prefix="campfire-js"
                )
                barrier = threading.Barrier(WORKERS)
                started = [pool.submit(barrier.wait) for _ in range(WORKERS)]
                concurrent.futures.wait(started)
            finally:
                threading.stack_size(previous)
            _pool = pool
        return _pool


def run_sync(source: str, payload: dict[str, Any], limits: Limits | None = None) -> RunResult:
    """Evaluate ``source`` (library + hook) against ``payload`` in a fresh context. Blocking."""
    limits = limits or Limits()
    started = time.perf_counter()
    cpu_started = time.thread_time()
    result = _run(source, payload, limits, value_in_javascript=False)
    if result is None:
        # The script's completion value cannot cross to Python (a long string QuickJS keeps as
        # a rope, a BigInt): run it again in a fresh context, reading the value in JavaScript.
        result = _run(source, payload, limits, value_in_javascript=True)
        assert result is not None
    result.ms = _ms(started)
    result.cpu_ms = int((time.thread_time() - cpu_started) * 1000)
    return result


#: Runs the script from a JavaScript string, so its completion value never leaves JavaScript.
_EVAL_IN_JAVASCRIPT = """(function () {
  const source = globalThis.__campfire_source;
  delete globalThis.__campfire_source;
  return __campfire_finish((0, eval)(source));
})()"""


def _run(
    source: str, payload: dict[str, Any], limits: Limits, *, value_in_javascript: bool
) -> RunResult | None:
    """One run in a fresh context; None when the completion value could not be read."""
    context = quickjs.Context()
    context.set_memory_limit(limits.memory_bytes)
    context.set_max_stack_size(limits.stack_bytes)
    context.set_time_limit(limits.time_seconds)
    try:
        context.set("__campfire_input", json.dumps(payload, ensure_ascii=False))
        context.eval(prelude())
        if value_in_javascript:
            context.set("__campfire_source", source)
            raw = context.eval(_EVAL_IN_JAVASCRIPT)
        else:
            # Compiled straight from Python's text: no copy of it as a JavaScript string, which
            # for a 2 M character library (they exist) would cost megabytes of the script's.
            try:
                value = context.eval(source)
            except TypeError:
                return None
            context.set("__campfire_result", value)
            raw = context.eval("__campfire_finish(__campfire_result)")
        result = _read(raw)
    except quickjs.JSException as error:
        # An exceeded limit (interrupted, out of memory, stack overflow) or a value that cannot
        # be read back (a cycle in state): the run failed; keep what it logged.
        result = RunResult(error=_first_lines(str(error)), logs=_logs_after(context))
    finally:
        context.gc()
    if result.error == "null":
        # Out of memory, QuickJS may fail to build even the error object and throws null.
        result.error = "InternalError: out of memory (the script's error was null)"
    return result


async def run(source: str, payload: dict[str, Any], limits: Limits | None = None) -> RunResult:
    """``run_sync`` on a worker thread."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_worker_pool(), run_sync, source, payload, limits)


def syntax_error_sync(code: str, limits: Limits | None = None) -> str | None:
    """QuickJS's complaint about ``code``'s syntax as a sloppy-mode script, or None.

    The code is compiled inside a block that never runs (so nothing of it executes), straight
    from Python's text, as a run compiles it.
    """
    limits = limits or Limits()
    context = quickjs.Context()
    context.set_memory_limit(limits.memory_bytes)
    context.set_max_stack_size(limits.stack_bytes)
    context.set_time_limit(limits.time_seconds)
    try:
        # On the first line, so line numbers in the complaint are the script's own.
        context.eval(f"if (false) {{ {code}\n}}")
    except quickjs.JSException as error:
        return _first_lines(str(error), limit=3)
    return None


async def syntax_error(code: str, limits: Limits | None = None) -> str | None:
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_worker_pool(), syntax_error_sync, code, limits)


def _read(raw: Any) -> RunResult:
    if not isinstance(raw, str):
        return RunResult(error="The script's result could not be read.")
    data = json.loads(raw)
    logs = [str(line) for line in data.get("logs") or []]
    state = json.loads(data["state"])
    return RunResult(
        text=data["text"],
        stop=bool(data["stop"]),
        state=state if isinstance(state, dict) else {},
        cards=data["storyCards"],
        logs=logs,
    )


# quickjs.Context is a class of a compiled module without stubs: pyright sees a variable.
def _logs_after(context: quickjs.Context) -> list[str]:  # pyright: ignore[reportInvalidTypeForm]
    try:
        context.set_time_limit(LOGS_TIME_SECONDS)
        raw = context.eval("__campfire_logs()")
        return [str(line) for line in json.loads(raw)] if isinstance(raw, str) else []
    except (quickjs.JSException, ValueError):
        return []


def _first_lines(message: str, limit: int = 12) -> str:
    """An error with the start of its stack: enough to find the line, not a wall of frames.

    Frames from the prelude's call of the script ("at eval (native)" and below) are the
    engine's, not the script's, and are left out.
    """
    lines = message.strip().splitlines()
    if "    at eval (native)" in lines:
        lines = lines[: lines.index("    at eval (native)")]
    if len(lines) > limit:
        lines = [*lines[:limit], f"… {len(lines) - limit} more lines"]
    return "\n".join(lines)


def _ms(started: float) -> int:
    return int((time.perf_counter() - started) * 1000)
