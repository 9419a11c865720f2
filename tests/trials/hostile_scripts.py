"""Trial: hostile scripts, uploaded and played through the Discord stand-in.

    python -m tests.trials.hostile_scripts [--verbose] [--only NAME]

Each script of the list below (the issue's, and more: loops in each hook, memory and recursion
bombs, throwing non-Errors, redefined internals, huge state, prototype pollution, Proxy traps,
getters on returned objects, sparse huge arrays, long strings, Symbol and BigInt results…) is
uploaded by a player into an adventure of their own DM, with Campfire on the stand-in and the
fake model server behind it, and then a turn is played. Meanwhile a heartbeat task sleeps 10 ms
at a time and records how late it wakes: the event loop's longest stall.

A script counts as contained when its upload was answered and its turn completed (or failed
politely: a message for the player, nothing logged as an error) within the limits, and the
event loop never stalled more than 250 ms meanwhile. The trial exits non-zero when any was not.
Its last line: ``hostile scripts: <N> tried, <N> contained, loop stall max <ms> ms``.

Outside the test run: pytest collects ``test_*.py`` files only. Script workers import this
module as their main module (multiprocessing's spawn), so it imports only the standard library
at the top; Campfire is imported by ``main``.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: What scripts run under here: small, so a runaway costs a second or two, not the defaults' 6.
SCRIPT_TIME_SECONDS = 0.5
SCRIPT_TURN_SECONDS = 1.5
#: A turn's limit: its scripts' time, the last run's grace, a worker's restart and the model's
#: reply, with room for a loaded machine.
TURN_LIMIT_SECONDS = SCRIPT_TURN_SECONDS + 6.0
UPLOAD_LIMIT_SECONDS = 12.0
STALL_LIMIT_MS = 250.0
HEARTBEAT_SECONDS = 0.01
STATE_CAP = 100_000

LOOP = "while (true) {}"
LOOPING_TOSTRING = "{ toString() { while (true) {} } }"


@dataclass(frozen=True, slots=True)
class Hostile:
    name: str
    #: Script part → code, uploaded in order (library, input, context or output).
    parts: dict[str, str]
    #: Whether the upload is meant to be refused (a syntax check that must not run the code).
    refused_upload: bool = False
    #: How many copies of the script to upload (several scripts sharing one turn's time).
    copies: int = 1


def on(name: str, **parts: str) -> Hostile:
    """A hostile script: its parts by hook (``library``, ``input``, ``context``, ``output``)."""
    return Hostile(name, parts)


#: Played first and not measured: the bot's first turn after start pays for what every process
#: pays once (imports made on first use, statements compiled the first time), which stalled the
#: loop 150-220 ms under whichever script came first. Its stall is shown, not counted; anything
#: else wrong with it counts as with any script.
WARM_UP = Hostile(
    "a harmless script (warm-up: its stall is not counted)",
    {"input": "const modifier = (text) => ({ text });\nmodifier(text);"},
)

LOOP_SET = "{ set() { while (true) {} } }"
LOOP_GET = "{ get() { while (true) {} } }"

HOSTILE: list[Hostile] = [
    # --- the issue's ---
    on("throw an object whose toString loops", input=f"throw {LOOPING_TOSTRING}"),
    on("throw a Proxy whose getter loops", input=f"throw new Proxy({{}}, {LOOP_GET})"),
    Hostile(
        "break out of the syntax check",
        {"library": f"}} throw {LOOPING_TOSTRING}; {{"},
        refused_upload=True,
    ),
    on(
        "redefine __campfire_finish",
        output="globalThis.__campfire_finish = () => 'not json';"
        "Object.defineProperty(globalThis, '__campfire_logs', { value: () => 1 }); text",
    ),
    on(
        "forge cards with non-string fields",
        output="__campfire_finish = () => JSON.stringify({ text: 'x', stop: false, "
        "state: '{}', storyCards: [{ keys: 5, entry: {} }], logs: [] }); text",
    ),
    on("~900 KB of state", output="state.big = 'x'.repeat(900000); text"),
    on("loop in all three hooks", input=LOOP, context=LOOP, output=LOOP),
    Hostile(
        "five scripts looping in all three hooks",
        {"input": LOOP, "context": LOOP, "output": LOOP},
        copies=5,
    ),
    # --- loops in each hook ---
    on("loop in onInput", input=LOOP),
    on("loop in onModelContext", context=LOOP),
    on("loop in onOutput", output=LOOP),
    on("loop in the library", library=LOOP, output="text"),
    on("catastrophic regex", output="/(a+)+$/.test('a'.repeat(40) + 'b'); text"),
    on("Atomics.wait", input="Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0)"),
    on(
        "endless promise jobs",
        output="Promise.resolve().then(function f() { Promise.resolve().then(f) }); text",
    ),
    # --- memory and recursion ---
    on("memory bomb", input="const a = []; for (;;) a.push('x'.repeat(1000) + a.length)"),
    on("one huge string", output="'x'.repeat(2 ** 29)"),
    on("recursion bomb", context="function f() { return f() + 1 } f()"),
    on(
        "caught recursion, then a loop",
        input="for (;;) { try { (function f() { f() })() } catch (e) {} }",
    ),
    on(
        "deeply nested state",
        output="let s = {}; for (let i = 0; i < 100000; i++) s = { s }; state.deep = s; text",
    ),
    on(
        "state nested past the engine's depth",
        output="let s = 1; for (let i = 0; i < 150; i++) s = [s]; state.deep = s; text",
    ),
    Hostile("parser nesting bomb", {"library": "(" * 200_000 + ")" * 200_000}, refused_upload=True),
    # --- throwing non-Errors ---
    *(
        on(f"throw {what}", input=f"throw {what}")
        for what in ("null", "undefined", "42", "Symbol('s')", "10n", "function () {}", "[]")
    ),
    on(
        "throw an object whose message getter loops",
        output="throw { get message() { while (true) {} }, name: 'E' }",
    ),
    on(
        "throw an Error with a looping stack getter",
        output=f"const e = new Error('x'); Object.defineProperty(e, 'stack', {LOOP_GET}); throw e",
    ),
    # --- redefined internals ---
    on(
        "Error.prototype.toString loops, then a loop",
        input="Error.prototype.toString = function () { while (true) {} };" + LOOP,
    ),
    on(
        "InternalError's name getter loops, then a memory bomb",
        output=f"Object.defineProperty(InternalError.prototype, 'name', {LOOP_GET});"
        "const a = []; for (;;) a.push('x'.repeat(9999))",
    ),
    on(
        "replace JSON, String and Array.isArray",
        output="JSON.stringify = () => 1; JSON.parse = () => ({}); String = () => 5;"
        "Array.isArray = () => true; text + ' [x]'",
    ),
    on(
        "replace Function.prototype.call and apply",
        output="Function.prototype.call = Function.prototype.apply = () => 0; text",
    ),
    # --- prototype pollution ---
    on("Object.prototype.toJSON", output="Object.prototype.toJSON = () => 7; text"),
    on("Array.prototype.toJSON", output="Array.prototype.toJSON = () => 'a'; text"),
    on(
        "a setter on Array.prototype[0]",
        output=f"Object.defineProperty(Array.prototype, '0', {LOOP_SET}); text",
    ),
    on(
        "a looping getter on Object.prototype.text",
        output=f"Object.defineProperty(Object.prototype, 'text', {LOOP_GET}); 5",
    ),
    on(
        "Set.prototype and Symbol.iterator replaced",
        output="Set.prototype.has = () => true; Set.prototype.add = () => { throw 1 };"
        "Array.prototype[Symbol.iterator] = function* () { while (true) yield 1 }; text",
    ),
    # --- Proxy traps ---
    on(
        "state is a Proxy whose traps loop",
        output="state = new Proxy({}, "
        "{ ownKeys() { while (true) {} }, get() { while (true) {} } }); text",
    ),
    on(
        "storyCards is a Proxy whose getter loops",
        output=f"storyCards = new Proxy([], {LOOP_GET}); text",
    ),
    on(
        "the result is a Proxy whose has trap loops",
        output="new Proxy({}, { has() { while (true) {} } })",
    ),
    on(
        "a card's keys whose toString loops",
        output=f"storyCards.push({{ keys: {LOOPING_TOSTRING}, entry: 'e' }}); text",
    ),
    # --- getters on returned objects ---
    on("a looping getter for text", output="({ get text() { while (true) {} } })"),
    on(
        "a getter for stop that throws a looping toString",
        output=f"({{ text: 'x', get stop() {{ throw {LOOPING_TOSTRING} }} }})",
    ),
    on("a text whose toString loops", output=f"({{ text: {LOOPING_TOSTRING} }})"),
    on(
        "a state getter that loops",
        output=f"Object.defineProperty(globalThis, 'state', {LOOP_GET}); text",
    ),
    # --- sparse huge arrays, long strings ---
    on("a sparse huge array in state", output="state.a = []; state.a[1e8] = 1; text"),
    on("storyCards.length = 1e9", output="storyCards.length = 1e9; text"),
    on("a 5 M character result", output="text + 'x'.repeat(5e6)"),
    on("60 K characters of text", output="text + 'y'.repeat(60000)"),
    on("state just over the cap", output=f"state.big = 'x'.repeat({STATE_CAP}); text"),
    on(
        "logs of huge strings",
        output="for (let i = 0; i < 1e4; i++) log('z'.repeat(1e5)); text",
    ),
    on("a card entry of 1 M characters", output="addStoryCard('k', 'e'.repeat(1e6)); text"),
    on(
        "a thousand cards",
        output="for (let i = 0; i < 1000; i++) addStoryCard('k' + i, 'e'); text",
    ),
    on("a message of 1 M characters", output="state.message = 'm'.repeat(1e6); text"),
    # --- results Python cannot hold ---
    on("a Symbol result", output="Symbol('s')"),
    on("a BigInt result", output="10n ** 1000n"),
    on("a Symbol as text", output="({ text: Symbol('s') })"),
    on("a BigInt in state", output="state.n = 10n; text"),
    on(
        "lone surrogates and NUL",
        output="state['\\ud800'] = '\\u0000'; text + '\\udc00\\u0000'",
    ),
    on("a cycle in state", output="state.self = state; text"),
    on("stop the action", input="state.message = 'no'.repeat(9); ({ text, stop: true })"),
]


@dataclass(slots=True)
class Heartbeat:
    """How late a 10 ms sleep wakes: the event loop's stalls."""

    worst_ms: float = 0.0
    since_reset_ms: float = 0.0

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            started = loop.time()
            await asyncio.sleep(HEARTBEAT_SECONDS)
            late = (loop.time() - started - HEARTBEAT_SECONDS) * 1000
            self.worst_ms = max(self.worst_ms, late)
            self.since_reset_ms = max(self.since_reset_ms, late)

    def reset(self) -> None:
        self.since_reset_ms = 0.0


@dataclass(slots=True)
class Outcome:
    name: str
    upload_s: float = 0.0
    turn_s: float = 0.0
    stall_ms: float = 0.0
    played: str = ""
    problems: list[str] = field(default_factory=list)

    @property
    def contained(self) -> bool:
        return not self.problems


class ErrorRecords(logging.Handler):
    """The bot's logged errors (an incident means a turn failed impolitely)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


async def trial(hostile: list[Hostile], *, verbose: bool) -> list[Outcome]:
    from bot.config import load_settings
    from bot.discord_bot import CampfireBot
    from bot.standin import StandIn
    from bot.standin.interactions import StandinFile
    from tests.fakes.openai_server import FakeModelServer

    errors = ErrorRecords()
    logging.getLogger().addHandler(errors)
    heartbeat = Heartbeat()
    outcomes: list[Outcome] = []
    with tempfile.TemporaryDirectory() as folder, FakeModelServer() as model:
        model.default_text = "The story goes on, whatever the scripts did."
        config = load_settings(
            data_dir=Path(folder) / "data",
            database_url=f"sqlite+aiosqlite:///{Path(folder) / 'trial.db'}",
            model_url=model.base_url,
            model_name=model.model,
            model_timeout=3,
            script_time_seconds=SCRIPT_TIME_SECONDS,
            script_turn_seconds=SCRIPT_TURN_SECONDS,
            max_script_state_chars=STATE_CAP,
            # The trial plays faster than a person: the rate limits are not what it checks.
            turns_per_user_per_minute=10_000,
            turns_per_adventure_per_minute=10_000,
            script_tests_per_minute=10_000,
        )
        bot = CampfireBot(config)
        standin = StandIn(bot)
        fake = standin.fake
        guild = fake.add_guild("Trial")
        async with standin:
            beating = asyncio.create_task(heartbeat.run())
            try:
                for number, script in enumerate([WARM_UP, *hostile]):
                    player = fake.add_user(f"player{number}", member_of=[guild])
                    outcome = Outcome(script.name)
                    if script is not WARM_UP:
                        outcomes.append(outcome)
                    dm = fake.dm_channel(player)
                    await fake.slash(player, dm, "start")
                    await standin.idle()
                    logged = len(errors.messages)
                    heartbeat.reset()
                    started = time.perf_counter()
                    for copy in range(script.copies):
                        for part, code in script.parts.items():
                            record = await fake.slash(
                                player,
                                dm,
                                "script upload",
                                hook=part,
                                file=StandinFile(f"{part}.js", code.encode(), "text/javascript"),
                                name=f"hostile {copy + 1}",
                            )
                            await standin.idle()
                            reply = _answer(fake, record)
                            refused = "does not parse" in reply
                            if refused != script.refused_upload or not reply:
                                outcome.problems.append(f"upload answered: {reply[:120]!r}")
                    outcome.upload_s = time.perf_counter() - started
                    if outcome.upload_s > UPLOAD_LIMIT_SECONDS * script.copies:
                        outcome.problems.append(f"upload took {outcome.upload_s:.1f} s")
                    before = _narration(fake, bot, dm)
                    started = time.perf_counter()
                    record = await fake.slash(player, dm, "do", action="look around")
                    await standin.idle()
                    outcome.turn_s = time.perf_counter() - started
                    outcome.stall_ms = heartbeat.since_reset_ms
                    response = _answer(fake, record)
                    if len(_narration(fake, bot, dm)) > len(before):
                        outcome.played = "completed"
                    elif response and response.lstrip().startswith(("⚠", "🛑", "📜", ">")):
                        outcome.played = f"refused: {response[:80]!r}"
                    else:
                        outcome.problems.append(f"no turn and no answer ({response[:80]!r})")
                    if outcome.turn_s > TURN_LIMIT_SECONDS:
                        outcome.problems.append(f"the turn took {outcome.turn_s:.1f} s")
                    if outcome.stall_ms > STALL_LIMIT_MS and script is not WARM_UP:
                        outcome.problems.append(f"the loop stalled {outcome.stall_ms:.0f} ms")
                    if len(errors.messages) > logged:
                        outcome.problems.append(f"logged: {errors.messages[logged][:120]}")
                    if fake.failures:
                        outcome.problems.append(f"unanswered interactions: {fake.failures}")
                        fake.failures.clear()
                    if script is WARM_UP:
                        if outcome.problems:
                            outcomes.append(outcome)
                        outcome.stall_ms = 0.0  # shown in its line below, not in the maximum
                        print(f"warm-up: stall {heartbeat.since_reset_ms:.0f} ms", flush=True)
                    _print(outcome, verbose)
            finally:
                beating.cancel()
    logging.getLogger().removeHandler(errors)
    return outcomes


def _answer(fake: Any, record: Any) -> str:
    """The bot's answer to an interaction ("" when it gave none)."""
    if record.original_message_id is None:
        return ""
    return fake.message(record.original_message_id).content


def _narration(fake: Any, bot: Any, channel: int) -> list[str]:
    return [
        m.content
        for m in fake.messages(channel)
        if m.author_id == bot.user.id and not m.is_response and not m.ephemeral
    ]


def _print(outcome: Outcome, verbose: bool) -> None:
    mark = "ok " if outcome.contained else "NOT"
    line = (
        f"{mark} {outcome.name}: {outcome.played or 'no turn'}; upload {outcome.upload_s:.2f} s, "
        f"turn {outcome.turn_s:.2f} s, loop stall {outcome.stall_ms:.0f} ms"
    )
    print(line, flush=True)
    for problem in outcome.problems if (verbose or not outcome.contained) else []:
        print(f"    {problem}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Hostile scripts through the stand-in.")
    parser.add_argument("--verbose", action="store_true", help="every problem of every script")
    parser.add_argument("--only", help="only the scripts whose name contains this")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    chosen = [h for h in HOSTILE if not args.only or args.only.lower() in h.name.lower()]
    outcomes = asyncio.run(trial(chosen, verbose=args.verbose))
    contained = sum(outcome.contained for outcome in outcomes)
    worst = max((outcome.stall_ms for outcome in outcomes), default=0.0)
    print(
        f"hostile scripts: {len(outcomes)} tried, {contained} contained, "
        f"loop stall max {worst:.0f} ms"
    )
    return 0 if contained == len(outcomes) else 1


if __name__ == "__main__":
    from tests.trials.needs import run_trial

    sys.exit(run_trial("hostile scripts", main))
