"""The QuickJS sandbox: one fresh context per hook run, with limits, and JSON both ways.

This is what runs inside a script worker process (``engine.library.scripting.workers`` keeps the
pool and is what the engine calls); ``serve`` is the worker's loop. Nothing here is run in the bot's
own process, where a script holding the interpreter (a loop in a ``toString`` QuickJS calls
while Python reads an exception) would freeze every server; in a worker it is killed instead.

A run evaluates the prelude (prelude.js, beside this module: the globals AI Dungeon scripts expect),
whose completion value is its ``control`` function, kept here as a handle; then the scenario's
library and hook as one sloppy-mode global script; then ``control("finish", value)`` gives one
JSON text: the result (``text``/``stop``), the ``state`` and ``storyCards`` as the script left
them, and its logs, which ``results.read_result`` checks. No Python object is ever handed to
JavaScript (no callables are registered), and the context has no module loader, timers or I/O:
what a script can touch is what the prelude built.

Limits: memory (16 MB), CPU time (2 s, measured by QuickJS's interrupt handler with the worker's
CPU clock), and the native stack. An exceeded limit is an ordinary error: the hook is skipped,
the turn goes on. Past the limit, the worker's wall clock (``workers``) ends anything else.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from dataclasses import dataclass
from functools import cache
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import quickjs

from engine.library.scripting.results import BadResult, Caps, RunResult, read_logs, read_result
from engine.prompt.card_cap import DEFAULT_MAX_CARDS

#: Package data (pyproject.toml): found beside this module however Campfire was installed.
PRELUDE_PATH = Path(__file__).resolve().parent / "prelude.js"

DEFAULT_MEMORY_BYTES = 16 * 1024 * 1024
DEFAULT_TIME_SECONDS = 2.0
DEFAULT_TURN_SECONDS = 6.0
DEFAULT_STATE_CHARS = 100_000
#: QuickJS's own guard on the native stack; runs happen on a thread with 8 MB, well above it.
DEFAULT_STACK_BYTES = 1024 * 1024
WORKER_STACK_BYTES = 8 * 1024 * 1024
#: Reading logs back after a failed run gets this much time of its own.
LOGS_TIME_SECONDS = 0.2
#: The least time the prelude's reading of the result gets, however much the script used.
FINISH_MIN_SECONDS = 0.05


@dataclass(frozen=True, slots=True)
class Limits:
    """What scripts run under (from the settings)."""

    #: One run's memory, CPU time and native stack.
    memory_bytes: int = DEFAULT_MEMORY_BYTES
    time_seconds: float = DEFAULT_TIME_SECONDS
    stack_bytes: int = DEFAULT_STACK_BYTES
    #: Every run of one turn together, all hooks and scripts: once spent, the rest is skipped.
    turn_seconds: float = DEFAULT_TURN_SECONDS
    #: An adventure's script ``state``, in characters of JSON.
    state_chars: int = DEFAULT_STATE_CHARS


#: What a run may give back when the caller names no caps (the tests, ``/script test``'s text).
DEFAULT_CAPS = Caps(text_chars=1_000_000, state_chars=DEFAULT_STATE_CHARS, cards=DEFAULT_MAX_CARDS)


@cache
def prelude() -> str:
    return PRELUDE_PATH.read_text(encoding="utf-8")


def run_sync(
    source: str,
    payload: dict[str, Any] | str,
    limits: Limits | None = None,
    caps: Caps = DEFAULT_CAPS,
) -> RunResult:
    """Evaluate ``source`` (library + hook) against ``payload`` (or its JSON text, as a worker
    receives it) in a fresh context. Blocking, and only for a worker process (or a test's own
    trusted scripts)."""
    limits = limits or Limits()
    started = time.perf_counter()
    cpu_started = time.thread_time()
    result = _run(source, payload, limits, caps, value_in_javascript=False)
    if result is None:
        # The script's completion value cannot cross to Python (a long string QuickJS keeps as
        # a rope, a BigInt): run it again in a fresh context, reading the value in JavaScript.
        result = _run(source, payload, limits, caps, value_in_javascript=True)
        assert result is not None
    result.ms = int((time.perf_counter() - started) * 1000)
    result.cpu_ms = int((time.thread_time() - cpu_started) * 1000)
    return result


def _context(limits: Limits) -> quickjs.Context:  # pyright: ignore[reportInvalidTypeForm]
    context = quickjs.Context()
    context.set_memory_limit(limits.memory_bytes)
    context.set_max_stack_size(limits.stack_bytes)
    context.set_time_limit(limits.time_seconds)
    return context


def _run(
    source: str,
    payload: dict[str, Any] | str,
    limits: Limits,
    caps: Caps,
    *,
    value_in_javascript: bool,
) -> RunResult | None:
    """One run in a fresh context; None when the completion value could not be read."""
    context = _context(limits)
    control = None
    started = time.thread_time()
    try:
        if not isinstance(payload, str):
            payload = json.dumps(payload, ensure_ascii=False)
        context.set("__campfire_input", payload)
        control = context.eval(prelude())
        if value_in_javascript:
            raw = control("evaluate", source)
        else:
            # Compiled straight from Python's text: no copy of it as a JavaScript string, which
            # for a 2 M character library (they exist) would cost megabytes of the script's.
            try:
                value = context.eval(source)
            except (TypeError, UnicodeDecodeError):
                # A rope, a BigInt, a string with a lone surrogate: not convertible.
                return None
            # Reading the result back (the script's getters and toJSON run in it) gets what is
            # left of the run's time, not a time of its own.
            spent = time.thread_time() - started
            context.set_time_limit(max(limits.time_seconds - spent, FINISH_MIN_SECONDS))
            raw = control("finish", value)
        result = read_result(raw, caps)
    except quickjs.JSException as error:
        # An exceeded limit (interrupted, out of memory, stack overflow), a throw, or a value
        # that cannot be read back (a cycle in state): the run failed; keep what it logged.
        result = RunResult(
            error=_limit_named(_error_text(error), limits), logs=_logs_after(context, control)
        )
    # No ``context.gc()`` here: the context's runtime, everything the script built with it, is
    # freed when the last reference to it goes (when this returns), and the binding's gc()
    # also runs a full collection of the whole Python heap (``gc.collect()``): a tenth of a
    # second in a process that has imported the bot, for every run.
    if result.error == "null":
        # Out of memory, QuickJS may fail to build even the error object and throws null.
        result.error = _limit_named(
            "InternalError: out of memory (the script's error was null)", limits
        )
    return result


def _limit_named(error: str, limits: Limits) -> str:
    """QuickJS's words for an exceeded limit ("InternalError: interrupted") say which limit
    and what it is, for the script's author reading Insights; the error follows as it was."""
    if error.startswith("InternalError: interrupted"):
        said = f"ran past its time limit ({limits.time_seconds:g} s of CPU time) and was stopped"
    elif error.startswith("InternalError: out of memory"):
        said = f"used more than its {limits.memory_bytes / 2**20:g} MiB of memory and was stopped"
    elif error.startswith(("InternalError: stack overflow", "RangeError: Maximum call stack")):
        said = "nested its calls too deep (its stack ran out) and was stopped"
    else:
        return error
    return f"{said}: {error}"


#: The syntax check's first statement: the script is parsed whole, then this throws before any
#: of it runs. A statement before the code (not a block around it, as ``if (false) { … }``
#: was) has no closing part for the code to break out of; and a value of the engine's own, not
#: the script's, is what Python then reads.
_CHECKED = "campfire:parsed"
_CHECK_PREFIX = f'throw "{_CHECKED}"; '


def syntax_error_sync(code: str, limits: Limits | None = None) -> str | None:
    """QuickJS's complaint about ``code``'s syntax as a sloppy-mode script, or None.

    Compiles without running: the ``quickjs`` package offers no compile-only evaluation
    (``Context.eval`` always runs, and QuickJS's ``JS_EVAL_FLAG_COMPILE_ONLY`` is not
    exposed; ``new Function(code)`` would parse a function body, where ``return`` is allowed,
    and QuickJS builds it by pasting the code into a text it evaluates). So the code is
    evaluated after ``throw "campfire:parsed";`` on its first line: QuickJS compiles the whole
    script first (any syntax error is reported then), and running it starts with that throw.
    Before the first statement only declarations are instantiated (functions created, not
    called; nothing of the code runs). Line numbers in a complaint are the script's own.
    """
    context = _context(limits or Limits())
    try:
        context.eval(_CHECK_PREFIX + code)
    except quickjs.JSException as error:
        message = str(error)
        return None if message.startswith(_CHECKED) else _first_lines(message, limit=3)
    return None  # pragma: no cover - the check always throws


def _logs_after(
    context: quickjs.Context,  # pyright: ignore[reportInvalidTypeForm]
    control: Any,
) -> list[str]:
    if control is None:
        return []
    try:
        context.set_time_limit(LOGS_TIME_SECONDS)
        raw = control("logs", None)
        return read_logs(json.loads(raw)) if isinstance(raw, str) else []
    except (quickjs.JSException, ValueError, BadResult):
        return []


def _error_text(error: Exception) -> str:
    """What the script threw, as text. The binding makes it from the thrown value (a script's
    own ``toString`` may run: a worker that hangs in it is killed); a value it cannot even
    convert (a string with a lone surrogate) is named, not shown."""
    try:
        return _first_lines(str(error))
    except UnicodeError:
        return "The script threw a value that cannot be shown as text."


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


# --- the worker process ---------------------------------------------------------------------


def serve(connection: Connection) -> None:
    """A worker process's life: answer requests from the engine until it goes away.

    Requests are ``("run", source, payload_json, limits, caps)`` and ``("check", code, limits)``;
    answers a ``RunResult`` and ``str | None``. It says ``"ready"`` first, once QuickJS is
    loaded, so its start is not counted against a script's time. Runs happen on a thread with
    a deep native stack (deep recursion must meet QuickJS's guard, not the end of the stack).
    """
    # Ctrl-C reaches the whole process group; the engine ends its workers itself.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent()
    threading.stack_size(WORKER_STACK_BYTES)
    worker = threading.Thread(target=_answer, args=(connection,), name="campfire-js")
    worker.start()
    worker.join()


def _answer(connection: Connection) -> None:
    prelude()
    connection.send("ready")
    while True:
        try:
            request = connection.recv()
        except (EOFError, OSError):
            return  # the engine closed its end (or is gone)
        kind, *arguments = request
        try:
            if kind == "run":
                answer: object = run_sync(*arguments)
            elif kind == "check":
                answer = syntax_error_sync(*arguments)
            else:  # pragma: no cover - the engine sends only these
                answer = None
        except Exception as error:  # noqa: BLE001 - whatever a script provoked, it is its error
            message = f"The script's sandbox failed ({type(error).__name__})."
            answer = RunResult(error=message) if kind == "run" else message
        connection.send(answer)


def _die_with_parent() -> None:
    """On Linux, have the kernel end this worker when the process that started it dies: a
    worker stuck in a script (the reason it may be killed) would otherwise outlive a bot that
    was killed itself."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL)
    except (OSError, AttributeError):  # pragma: no cover - a libc without prctl
        return
