"""Streaming narration to many channels at once: rate limits, edits, latency, correctness.

Run by hand (it is not part of the normal test run)::

    python -m tests.benchmarks.bench_streaming [--n 1 10 50 200] [--words 120]

For each N, Campfire's real bot (:class:`bot.discord_bot.CampfireBot`) runs on the local Discord
stand-in with N text channels in one guild. ``/start`` in each opens N adventure threads (ten at
a time: setting up is not what is measured); then ``/do`` is issued in every thread at once, so N
narrations of ``--words`` words stream at the same time from the fake model server at 60 tokens
per second (one word per chunk). Measured, across all channels:

* 429s: every request the stand-in answered with a rate limit, over the whole run (target 0),
  split into interaction endpoints (callback, ``@original`` edits) and channel requests;
* failed acks: interactions the stand-in marked failed for want of an answer within 3 s;
* lost: turns whose narration is not stored, or not shown exactly (see correctness below);
* requests per turn: channel message requests (creates, edits, deletes) during the turns, over
  N: the narration's messages, the old buttons taken off the previous turn's message, and an
  action line if one had to be posted in the channel (interaction endpoints do not count: they
  are outside Discord's global and channel limits); target ≤ 2.0 from N = 50, where the
  budget is saturated and narrations are sent whole;
* global requests per turn, beside all requests per turn: the requests during the turns that
  spend the bot's global budget (every one but the interaction endpoints': "Interaction
  endpoints are not bound to the bot's Global Rate Limit", discord-api-docs, Rate Limits), over
  N; a turn asked for by ``/do`` narrates through its interaction's token
  (``cogs.ui.narration_routes``), so the target is ≤ 1.0 from N = 50 (the opening's buttons
  taken off, a channel message);
* edits per turn: PATCHes to the turn's narration messages (the final edit included);
* first text: from the model server writing the first content chunk to the stand-in creating
  the turn's first narration message (p50 target ≤ 0.3 s while the budget has room: under load
  the narration is held back until it ends);
* final edit: from the model server writing the last content chunk to the last edit (or
  creation) of the turn's narration messages (p95 target ≤ 1.5 s up to N = 200: narrations
  through their interactions wait for no global budget); it includes storing the turn, which
  comes before its final edit;
* event-loop lag: p99 of how late a 10 ms sleep wakes up while the turns run, and the CPU the
  bot's process (bot, stand-in and database in one event loop) used meanwhile, as a share of one
  core: near 100 % the loop, not the pacing, sets the pace;
* correctness: each turn's narration messages, in order, show exactly
  ``display_pieces(stored text)`` (the newest narrator node of that adventure in the database).
  An action line the narrator had to post in the channel (editing the interaction response
  failed) is reported apart and left out of the comparison.

The model server runs in a process of its own (``--model-in-process`` puts it in the bot's, where
its threads add to the loop lag). Its chunks and the stand-in's messages and edits are stamped
with ``time.monotonic()``, one system-wide clock on Linux.

One line per N is printed, starting ``streaming N=<n>: 429s <k>, failed acks <k>, lost <k>,
requests/turn <r>, global requests/turn <g> of <a>, first text p50 <s> s, final edit p95 <s>
s``, other figures after a ``|``; missed targets are reported, not fatal. The exit status is
non-zero when any narration is wrong (or a run fails).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import logging
import math
import multiprocessing
import re
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import select

from bot.config import load_settings
from bot.discord_bot import CampfireBot
from bot.standin import RequestRecord, StandIn
from bot.standin.ratelimits import is_interaction_path
from cogs.ui.narration_routes import InteractionRoute
from cogs.ui.text_split import display_pieces
from engine.storage.models import Role, StoryNode
from tests.fakes.openai_server import FakeModelServer, Reply, _Handler

TOKENS_PER_SECOND = 60
FIRST_TEXT_P50_TARGET = 0.3
FINAL_EDIT_P95_TARGET = 1.5  # up to N = 50
FINAL_EDIT_P95_TARGET_MANY = 1.5  # beyond, up to N = 200 (off the global budget)
REQUESTS_PER_TURN_TARGET = 2.0  # from N = 50
GLOBAL_PER_TURN_TARGET = 1.0  # from N = 50
SATURATED_FROM = 50


def final_edit_target(n: int) -> float:
    return FINAL_EDIT_P95_TARGET if n <= SATURATED_FROM else FINAL_EDIT_P95_TARGET_MANY


LAG_TICK = 0.010
ACTION = "follow the humming"
ACTION_LINE = "> You follow the humming."  # what the interaction response shows for it
START_BATCH = 10  # /start commands issued at once while setting up
GLOBAL_WINDOW = 1.0  # Discord's global limit counts requests in any one second

_VOCABULARY = (
    "the lantern sways over black water and reeds whisper of something old that walks "
    "beneath the marsh while a heron watches from the drowned road ahead where fog "
    "gathers thick around broken milestones and the humming grows closer"
).split()


def narration_text(index: int, words: int) -> str:
    """A distinct narration of ``words`` words whose first word names it (``Ember007``)."""
    out = [f"Ember{index:03d}"]
    for i in range(1, words):
        word = _VOCABULARY[(i * 7 + index) % len(_VOCABULARY)]
        if i % 12 == 0:
            word = word.capitalize()
        out.append(word)
    text = ""
    for i, word in enumerate(out):
        text += word
        if i == len(out) - 1:
            text += "."
        elif i % 36 == 35:
            text += ".\n\n"
        elif i % 12 == 11:
            text += ". "
        else:
            text += " "
    return text


# -- the model side: when each content chunk left the server ------------------------------------


@dataclass
class StreamTiming:
    first_token: str = ""
    first_sent: float = 0.0
    last_sent: float = 0.0
    chunks: int = 0


_CONTENT = b'"delta": {"content": "'
_EMPTY_CONTENT = b'"delta": {"content": ""'


class _TimedWriter:
    """Wraps a handler's ``wfile``; stamps every non-empty content chunk once written."""

    def __init__(self, inner: Any, server: TimedModelServer) -> None:
        self._inner = inner
        self._server = server
        self._timing: StreamTiming | None = None

    def write(self, data: bytes) -> int:
        written = self._inner.write(data)
        if _CONTENT in data and _EMPTY_CONTENT not in data:
            now = time.monotonic()
            if self._timing is None:
                self._timing = StreamTiming(first_token=_token_of(data), first_sent=now)
                self._server._add_stream(self._timing)
            self._timing.last_sent = now
            self._timing.chunks += 1
        return written

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _token_of(data: bytes) -> str:
    start = data.index(b"data: ") + len(b"data: ")
    end = data.index(b"\n\n", start)
    event = json.loads(data[start:end])
    return event["choices"][0]["delta"]["content"]


class _TimedHandler(_Handler):
    def setup(self) -> None:
        super().setup()
        self.wfile = _TimedWriter(self.wfile, self.server.fake)  # type: ignore[arg-type]


class TimedModelServer(FakeModelServer):
    """The fake model server, recording when each streamed answer's content chunks went out."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.streams: list[StreamTiming] = []
        self._streams_lock = threading.Lock()

    def start(self) -> TimedModelServer:
        super().start()
        assert self._httpd is not None
        self._httpd.RequestHandlerClass = _TimedHandler  # before any request is accepted
        return self

    def _add_stream(self, timing: StreamTiming) -> None:
        with self._streams_lock:
            self.streams.append(timing)

    def stream_starting(self, first_word: str) -> StreamTiming | None:
        with self._streams_lock:
            found = [s for s in self.streams if s.first_token.split() == [first_word]]
        return found[-1] if found else None


class ModelProcess:
    """A :class:`TimedModelServer` in a process of its own, as a real model server would be.

    In the bot's process its handler threads (one per stream, each waking every chunk) would
    compete with the bot's event loop for the interpreter lock and inflate the loop lag. Both
    processes stamp with ``time.monotonic()``, which on Linux is one system-wide clock.
    """

    model = "fake-model"

    def __init__(self) -> None:
        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe()
        self._process = context.Process(
            target=_serve_model, args=(child,), name="bench-model-server", daemon=True
        )

    def __enter__(self) -> ModelProcess:
        self._process.start()
        self.base_url: str = self._conn.recv()
        return self

    def __exit__(self, *exc_info: object) -> None:
        try:
            self._conn.send(("stop",))
            self._conn.recv()
        except (EOFError, OSError):
            pass
        self._process.join(timeout=5)
        if self._process.is_alive():
            self._process.kill()

    def _call(self, *message: Any) -> Any:
        self._conn.send(message)
        return self._conn.recv()

    def queue(self, *replies: Reply) -> None:
        self._call("queue", replies)

    def stream_starting(self, first_word: str) -> StreamTiming | None:
        fields = self._call("stream_starting", first_word)
        return None if fields is None else StreamTiming(*fields)


def _serve_model(conn: Any) -> None:
    with TimedModelServer(model=ModelProcess.model) as server:
        conn.send(server.base_url)
        while True:
            command, *args = conn.recv()
            if command == "queue":
                server.queue(*args[0])
                conn.send(None)
            elif command == "stream_starting":
                timing = server.stream_starting(args[0])
                conn.send(None if timing is None else dataclasses.astuple(timing))
            else:
                conn.send(None)
                return


# -- the loop -----------------------------------------------------------------------------------


class LagProbe:
    """A task sleeping ``LAG_TICK`` over and over, recording how late each wake-up is."""

    def __init__(self) -> None:
        self.lags: list[float] = []
        self._task: asyncio.Task[None] | None = None

    async def _tick(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            before = loop.time()
            await asyncio.sleep(LAG_TICK)
            self.lags.append(max(0.0, loop.time() - before - LAG_TICK))

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._tick(), name="lag-probe")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)


def percentile(values: list[float], pct: float) -> float:
    """Nearest-rank percentile (NaN for no values)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return ordered[rank - 1]


class _ErrorCounter(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


# -- one run ------------------------------------------------------------------------------------


@dataclass
class Result:
    n: int
    rate_limited: int = 0
    rate_limited_during_setup: int = 0
    rate_limited_during_turns: int = 0
    # of those during turns: interaction callbacks and interaction-token webhook requests
    rate_limited_interactions: int = 0
    edits: list[int] = field(default_factory=list)
    messages: list[int] = field(default_factory=list)
    first_text: list[float] = field(default_factory=list)
    final_edit: list[float] = field(default_factory=list)
    lags: list[float] = field(default_factory=list)
    model_streams: list[float] = field(default_factory=list)  # first to last content chunk
    turn_requests: int = 0
    channel_requests: int = 0  # channel message creates, edits, deletes during the turns
    global_requests: int = 0  # requests during the turns on the bot's global budget
    cpu_seconds: float = 0.0  # the bot process's CPU time during the turns
    cpu_wall_seconds: float = 0.0  # ... over this much time
    turns_seconds: float = 0.0
    seconds: float = 0.0
    wrong: list[str] = field(default_factory=list)
    # action lines the bot posted in the channel because editing the interaction response failed
    fallbacks: list[str] = field(default_factory=list)
    ack_failures: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def correct(self) -> bool:
        return not self.wrong and len(self.final_edit) == self.n

    @property
    def lost(self) -> int:
        """Turns not stored, or not shown exactly as stored."""
        return self.n - len(self.final_edit)

    def line(self) -> str:
        def mark(ok: bool) -> str:
            return "ok" if ok else "MISSED"

        first50, first95 = percentile(self.first_text, 50), percentile(self.first_text, 95)
        final50, final95 = percentile(self.final_edit, 50), percentile(self.final_edit, 95)
        edits = sum(self.edits) / len(self.edits) if self.edits else math.nan
        rate = self.turn_requests / self.turns_seconds if self.turns_seconds else math.nan
        cpu = self.cpu_seconds / self.cpu_wall_seconds if self.cpu_wall_seconds else math.nan
        during = self.rate_limited_during_turns
        requests = self.channel_requests / self.n
        spent = self.global_requests / self.n
        head = (
            f"streaming N={self.n}: 429s {self.rate_limited}, "
            f"failed acks {len(self.ack_failures)}, lost {self.lost}, "
            f"requests/turn {requests:.2f}, "
            f"global requests/turn {spent:.2f} of {self.turn_requests / self.n:.2f}, "
            f"first text p50 {first50:.3f} s, final edit p95 {final95:.3f} s"
        )
        targets = [
            f"429s {mark(self.rate_limited == 0)}",
            f"failed acks {mark(not self.ack_failures)}",
            f"lost {mark(self.lost == 0)}",
        ]
        if self.n >= SATURATED_FROM:
            targets.append(f"requests/turn {mark(requests <= REQUESTS_PER_TURN_TARGET)}")
            targets.append(f"global requests/turn {mark(spent <= GLOBAL_PER_TURN_TARGET)}")
        else:  # with room: the narration streams, first text fast
            targets.append(f"first text {mark(first50 <= FIRST_TEXT_P50_TARGET)}")
        targets.append(f"final edit {mark(final95 <= final_edit_target(self.n))}")
        parts = [
            head,
            "targets: " + ", ".join(targets),
            f"429s setup {self.rate_limited_during_setup}, turns {during} "
            f"({self.rate_limited_interactions} interaction, "
            f"{during - self.rate_limited_interactions} channel)",
            f"edits/turn {edits:.2f} (max {max(self.edits, default=0)}; {sum(self.messages)} msgs)",
            f"first text p95 {first95:.3f} s, final edit p50 {final50:.3f} s",
            f"loop lag p99 {percentile(self.lags, 99) * 1000:.1f} ms "
            f"(max {max(self.lags, default=math.nan) * 1000:.1f} ms), "
            f"bot process CPU {cpu * 100:.0f}% of a core",
            f"correct {self.n - len(self.wrong)}/{self.n} [{'ok' if self.correct else 'FAILED'}]",
            f"turns {self.turns_seconds:.1f} s, {self.turn_requests / self.n:.1f} requests/turn "
            f"in all ({rate:.1f}/s); model streams p50 {percentile(self.model_streams, 50):.2f} s",
            f"run {self.seconds:.1f} s",
        ]
        if self.fallbacks:
            parts.append(f"{len(self.fallbacks)} action lines fell back to the channel")
        if self.warnings:
            parts.append(f"{len(self.warnings)} warnings")
        return " | ".join(parts)


_CHANNEL_MESSAGES = re.compile(r"/channels/\d+/messages(/\d+)?$")


def _is_channel_message_request(request: RequestRecord) -> bool:
    """A create, edit or delete of a channel message: what Discord's channel window counts."""
    return request.method in ("POST", "PATCH", "DELETE") and bool(
        _CHANNEL_MESSAGES.search(request.path)
    )


async def _newest_narration(bot: CampfireBot, channel_id: int) -> str | None:
    adventure = await bot.services.play.adventure_in(channel_id)
    if adventure is None:
        return None
    async with bot.services.db.session() as session:
        node = (
            await session.execute(
                select(StoryNode)
                .where(
                    StoryNode.adventure_id == adventure.adventure_id,
                    StoryNode.role == Role.NARRATOR,
                )
                .order_by(StoryNode.index.desc(), StoryNode.id.desc())  # type: ignore[union-attr]
                .limit(1)
            )
        ).scalar_one_or_none()
    return None if node is None else node.text


async def run_once(n: int, words: int, data_dir: Path, *, model_in_process: bool = False) -> Result:
    """Start the bot with ``n`` channels, stream ``n`` turns at once, measure them.

    The model server runs in a process of its own unless ``model_in_process``.
    """
    result = Result(n)
    started = time.monotonic()
    counter = _ErrorCounter()
    logging.getLogger().addHandler(counter)
    try:
        with TimedModelServer() if model_in_process else ModelProcess() as model:
            await _run(n, words, data_dir, model, result)
    finally:
        logging.getLogger().removeHandler(counter)
    result.warnings = [f"{r.name}: {r.getMessage()}" for r in counter.records]
    result.seconds = time.monotonic() - started
    return result


async def _run(
    n: int, words: int, data_dir: Path, model: TimedModelServer | ModelProcess, result: Result
) -> None:
    settings = load_settings(
        data_dir=data_dir,
        model_url=model.base_url,
        model_name=model.model,
        model_timeout=30,
        # One player starts every adventure and plays every turn here: lift the caps on
        # adventures and the turn rate limits per player (they are not what is measured).
        adventures_per_hour=max(10, n),
        active_adventures_per_user=max(25, n),
        turns_per_user_per_minute=10_000,
        turns_per_adventure_per_minute=10_000,
    )
    bot = CampfireBot(settings)
    standin = StandIn(bot)
    fake = standin.fake
    guild = fake.add_guild("The Hearth")
    channels = [fake.add_channel(guild, f"camp-{i:03d}") for i in range(n)]
    alice = fake.add_user("alice", member_of=[guild], manage_guild=True)
    async with standin:
        # Setting up is not what is measured: open the threads a batch at a time, so that the
        # /start bursts stay clear of the global limit, then let its window empty.
        starts = []
        for i in range(0, n, START_BATCH):
            batch = channels[i : i + START_BATCH]
            starts += await asyncio.gather(*(fake.slash(alice, c, "start") for c in batch))
            await standin.idle()
            await asyncio.sleep(GLOBAL_WINDOW)
        result.rate_limited_during_setup = len(fake.rate_limited)
        threads = []
        for channel, record in zip(channels, starts, strict=True):
            found = fake.threads(channel)
            if record.failed is not None or len(found) != 1:
                raise RuntimeError(f"/start in channel {channel} failed: {record.failed}")
            threads.append(found[0])

        texts = [narration_text(i, words) for i in range(n)]
        model.queue(*(Reply(text=t, delay=1 / TOKENS_PER_SECOND) for t in texts))
        before = {t: {m.id for m in fake.messages(t)} for t in threads}
        limited_before = len(fake.rate_limited)
        requests_before = len(fake.requests)

        probe = LagProbe()
        probe.start()
        cpu_started = time.process_time()
        turns_started = time.monotonic()
        dos = await asyncio.gather(*(fake.slash(alice, t, "do", action=ACTION) for t in threads))
        await standin.idle()
        result.cpu_seconds = time.process_time() - cpu_started
        result.cpu_wall_seconds = time.monotonic() - turns_started
        await probe.stop()
        turn_requests = [r for r in fake.requests[requests_before:] if r.time >= turns_started]
        last_request = max((r.time for r in turn_requests), default=turns_started)
        result.turns_seconds = last_request - turns_started
        result.turn_requests = sum(1 for r in turn_requests if r.status != 429)
        result.channel_requests = sum(
            1 for r in turn_requests if r.status != 429 and _is_channel_message_request(r)
        )
        result.global_requests = sum(
            1 for r in turn_requests if r.status != 429 and not is_interaction_path(r.path)
        )
        result.lags = probe.lags
        during = fake.rate_limited[limited_before:]
        result.rate_limited_during_turns = len(during)
        result.rate_limited_interactions = sum(
            1 for _, path, _ in during if "/interactions/" in path or "/webhooks/" in path
        )

        for thread, record in zip(threads, dos, strict=True):
            await _check_turn(bot, fake, model, thread, record, before[thread], result)
        result.ack_failures = list(fake.failures)
    result.rate_limited = len(fake.rate_limited)


async def _check_turn(
    bot: CampfireBot,
    fake: Any,
    model: TimedModelServer | ModelProcess,
    thread: int,
    record: Any,
    before: set[int],
    result: Result,
) -> None:
    assert bot.user is not None
    turn = [
        m
        for m in fake.messages(thread)
        if m.id not in before
        and m.author_id == bot.user.id
        and not m.is_response
        and not m.ephemeral
        and not m.deleted
    ]
    turn.sort(key=lambda m: m.id)
    if record.failed is not None:
        result.wrong.append(f"thread {thread}: /do failed ({record.failed})")
        return
    # When editing the interaction response fails, the narrator says the action line in the
    # channel instead: not narration, but worth reporting.
    original = record.original_message_id
    if original is None or fake.message(original).content != ACTION_LINE:
        fallen = [m for m in turn if m.content == ACTION_LINE]
        if fallen:
            result.fallbacks.append(f"thread {thread}: the action line was posted to the channel")
            turn = [m for m in turn if m not in fallen]
    stored = await _newest_narration(bot, thread)
    if stored is None:
        result.wrong.append(f"thread {thread}: no narration stored")
        return
    shown = [m.content for m in turn]
    expected = display_pieces(stored)
    if shown != expected:  # one problem per thread: this one, or one of those above/below
        result.wrong.append(f"thread {thread}: shows {shown!r}, stored {expected!r}")
        return
    first_word = stored.split()[0]  # shown == display_pieces(stored): not blank
    stream = model.stream_starting(first_word)
    if stream is None:
        result.wrong.append(f"thread {thread}: no model stream starting {first_word!r}")
        return
    result.edits.append(sum(len(m.edits) for m in turn))
    result.messages.append(len(turn))
    result.model_streams.append(stream.last_sent - stream.first_sent)
    result.first_text.append(turn[0].created - stream.first_sent)
    last_change = max(max([m.created, *(t for t, _ in m.edits)]) for m in turn)
    result.final_edit.append(last_change - stream.last_sent)


# -- the command --------------------------------------------------------------------------------


@contextlib.contextmanager
def narrating(route: str) -> Iterator[None]:
    """``by channel``: every narration goes by channel messages, as a token too old to start
    one with sends it (``cogs.ui.narration_routes``), for a before and after in one run."""
    if route != "by channel":
        yield
        return
    fresh = InteractionRoute.fresh
    InteractionRoute.fresh = staticmethod(lambda interaction: False)  # type: ignore[method-assign]
    try:
        yield
    finally:
        InteractionRoute.fresh = fresh  # type: ignore[method-assign]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.benchmarks.bench_streaming",
        description="N narrations streaming at once through Campfire on the Discord stand-in.",
    )
    parser.add_argument("--n", type=int, nargs="+", default=[1, 10, 50], help="channel counts")
    parser.add_argument("--words", type=int, default=120, help="words per narration")
    parser.add_argument(
        "--model-in-process",
        action="store_true",
        help="run the fake model server in the bot's process (its threads then add loop lag)",
    )
    parser.add_argument(
        "--compare",
        action="store_true",
        help="run each N twice: narrations by channel messages first (as before they went "
        "through their interactions), then through the interactions",
    )
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="show warnings and problems in full"
    )
    args = parser.parse_args(argv)
    if any(n < 1 for n in args.n) or args.words < 1:
        parser.error("--n and --words must be positive")

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    for handler in logging.getLogger().handlers:
        # Warnings (discord.py's 429 retries among them) are counted on each line; -v shows them.
        handler.setLevel(logging.WARNING if args.verbose else logging.ERROR)
    print(
        f"{args.words} words per narration at {TOKENS_PER_SECOND} tokens/s "
        f"(~{args.words / TOKENS_PER_SECOND:.1f} s of streaming); targets: 0 429s, "
        f"first text p50 <= {FIRST_TEXT_P50_TARGET} s (with room), final edit p95 <= "
        f"{FINAL_EDIT_P95_TARGET} s to N={SATURATED_FROM} and <= {FINAL_EDIT_P95_TARGET_MANY} s "
        f"beyond, requests/turn <= {REQUESTS_PER_TURN_TARGET} and global requests/turn <= "
        f"{GLOBAL_PER_TURN_TARGET} from N={SATURATED_FROM}",
        flush=True,
    )
    failed = False
    routes = ["by channel", "through interactions"] if args.compare else [""]
    with tempfile.TemporaryDirectory(prefix="campfire-bench-") as tmp:
        for n, route in ((n, route) for n in args.n for route in routes):
            try:
                with narrating(route):
                    result = asyncio.run(
                        run_once(
                            n,
                            args.words,
                            Path(tmp) / f"n{n}{route.replace(' ', '-')}",
                            model_in_process=args.model_in_process,
                        )
                    )
            except Exception as exc:  # one broken N must not hide the others
                print(f"N={n:<3} | run failed: {exc!r}", flush=True)
                failed = True
                continue
            print(f"[{route}] {result.line()}" if route else result.line(), flush=True)
            failed |= not result.correct
            details = result.wrong + result.fallbacks + result.ack_failures
            for problem in details if args.verbose else details[:3]:
                print(f"    {problem[:300] if not args.verbose else problem}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
