"""/healthz and /metrics: what one bot process did, in Prometheus's text format.

Every metric here is per process, and that is the point: Prometheus scrapes each process of a
bot on its own port and adds them up (``sum(rate(campfire_turns_total[5m]))``), labelling each
series with the target it came from. Nothing is shared between processes, so nothing needs a
lock or the database: each process counts only what it did itself (its turns, its leases taken
over, its requests to Discord), and a process that restarts starts its counters at zero, which
Prometheus's ``rate`` and ``increase`` read as a counter reset, not as a fall.

The server is an aiohttp app on the bot's own event loop (aiohttp is there already, through
discord.py): /healthz then asks the bot's own database and its readiness directly, and the
queue's depth is read on the loop that owns the queue. prometheus_client's own servers would run
in a thread of their own (``start_http_server``) or need an ASGI server besides; the thread
would read the event loop's objects from outside it.

The metrics live in a registry of each bot's own, not prometheus_client's global one: a process
runs one bot, but the tests run many bots one after another in one process.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from types import SimpleNamespace
from typing import TYPE_CHECKING

import aiohttp
from aiohttp import web
from prometheus_client import (
    GC_COLLECTOR,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
)
from prometheus_client.exposition import choose_encoder
from sqlalchemy import text

from engine.platform.queue import AdventureQueue
from engine.storage.database import Database

if TYPE_CHECKING:
    from engine.platform.observer import TurnFigures

log = logging.getLogger(__name__)

#: How long /healthz waits for the database's answer before calling it unhealthy.
HEALTH_QUERY_SECONDS = 3.0

#: Model latency buckets, in seconds: a first token from a fast hosted model (0.1 s) to a whole
#: reply at CAMPFIRE_MODEL_REPLY_SECONDS' default (180 s).
LATENCY_BUCKETS = (0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120, 180)


class CampfireMetrics:
    """The process's metrics. The engine tells it what happened to turns and leases
    (``engine.platform.observer.PlayObserver``); Discord's requests are seen as discord.py's HTTP
    client sends them (``http_trace``)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        registry = self.registry
        # The process's own figures (memory, CPU, open files, garbage collection), which
        # prometheus_client's global registry would have carried.
        ProcessCollector(registry=registry)
        PlatformCollector(registry=registry)
        registry.register(GC_COLLECTOR)
        self.turns = Counter("campfire_turns", "Turns stored by this process.", registry=registry)
        self.turns_failed = Counter(
            "campfire_turns_failed",
            "Turns that ran here and were rolled back, by the error's kind.",
            ["kind"],
            registry=registry,
        )
        self.lease_takeovers = Counter(
            "campfire_turn_lease_takeovers",
            "Turn leases this process took over from a holder that died.",
            registry=registry,
        )
        self.first_token = Histogram(
            "campfire_model_first_token_seconds",
            "From a stored turn's model request to its first piece of text.",
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.reply = Histogram(
            "campfire_model_reply_seconds",
            "A stored turn's whole model reply, request to end.",
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.prompt_tokens = Counter(
            "campfire_model_prompt_tokens",
            "Prompt tokens of stored turns, as the model reported them.",
            registry=registry,
        )
        self.completion_tokens = Counter(
            "campfire_model_completion_tokens",
            "Reply tokens of stored turns, as the model reported them.",
            registry=registry,
        )
        self.rate_limited = Counter(
            "campfire_discord_rate_limited",
            "Requests Discord answered with 429 (discord.py waits and retries most of them).",
            registry=registry,
        )
        self.edits = Counter(
            "campfire_discord_message_edits",
            "Message edits sent to Discord (streaming narration, buttons taken off, answers).",
            registry=registry,
        )
        self.queue_running = Gauge(
            "campfire_queue_running_adventures",
            "Adventures with a turn being written in this process.",
            registry=registry,
        )
        self.queue_waiting = Gauge(
            "campfire_queue_waiting_actions",
            "Actions waiting behind a turn being written, in this process.",
            registry=registry,
        )

    # --- engine.platform.observer.PlayObserver ----------------------------------------------------

    def turn_done(self, result: TurnFigures) -> None:
        self.turns.inc()
        self.reply.observe(result.latency_ms / 1000)
        if result.first_token_ms is not None:
            self.first_token.observe(result.first_token_ms / 1000)
        if result.usage is not None:
            self.prompt_tokens.inc(result.usage.prompt_tokens)
            self.completion_tokens.inc(result.usage.completion_tokens)

    def turn_failed(self, kind: str) -> None:
        self.turns_failed.labels(kind=kind).inc()

    def lease_taken_over(self, adventure_id: int) -> None:
        self.lease_takeovers.inc()

    # --- the rest ---------------------------------------------------------------------------

    def watch_queue(self, queue: AdventureQueue) -> None:
        """The queue's depth, read at each scrape."""
        self.queue_running.set_function(lambda: queue.depths()[0])
        self.queue_waiting.set_function(lambda: queue.depths()[1])

    def discord_trace(self) -> aiohttp.TraceConfig:
        """For discord.py's HTTP client (``Client(http_trace=…)``): every response it gets.

        Counted here rather than at the pacer: discord.py meets a 429 itself, waits and retries
        without raising, so the bot's own code sees only the rare one it gives up on; and every
        edit of the bot (streamed narration, views taken off, interaction answers) goes through
        this one client."""
        trace = aiohttp.TraceConfig()

        async def on_request_end(
            session: aiohttp.ClientSession,
            context: SimpleNamespace,
            params: aiohttp.TraceRequestEndParams,
        ) -> None:
            if params.response.status == 429:
                self.rate_limited.inc()
            # PATCH …/messages/{id}: a channel message's edit, or an interaction's answer's.
            if params.method == "PATCH" and "/messages/" in params.url.path:
                self.edits.inc()

        trace.on_request_end.append(on_request_end)
        return trace

    def exposition(self, accept: str) -> tuple[bytes, str]:
        """The metrics in the format the scraper asked for (``Accept``: Prometheus's text
        format, or OpenMetrics), and its content type."""
        encode, content_type = choose_encoder(accept)
        return encode(self.registry), content_type


async def health_problem(db: Database, ready: bool) -> str | None:
    """Why this process is not healthy, or None: the bot not connected to Discord, or the
    database not answering a trivial query within ``HEALTH_QUERY_SECONDS``."""
    if not ready:
        return "not connected to Discord yet"
    try:
        async with asyncio.timeout(HEALTH_QUERY_SECONDS):
            async with db.session() as session:
                await session.execute(text("SELECT 1"))
    except Exception as error:
        log.warning("health check: the database did not answer: %s", type(error).__name__)
        return f"the database did not answer ({type(error).__name__})"
    return None


class OperationsServer:
    """/healthz and /metrics on ``host``:``port``, served on the running event loop."""

    def __init__(
        self,
        metrics: CampfireMetrics,
        health: Callable[[], Awaitable[str | None]],
        *,
        host: str,
        port: int,
    ) -> None:
        self.metrics = metrics
        self.health = health
        self.host = host
        self.port = port
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/metrics", self._metrics)
        self._runner = web.AppRunner(app, access_log=None)

    async def start(self) -> None:
        await self._runner.setup()
        await web.TCPSite(self._runner, self.host, self.port).start()
        log.info("/healthz and /metrics on %s:%s", self.host, self.port)

    async def stop(self) -> None:
        await self._runner.cleanup()

    async def _healthz(self, request: web.Request) -> web.Response:
        problem = await self.health()
        if problem is None:
            return web.Response(text="ok\n")
        return web.Response(status=503, text=problem + "\n")

    async def _metrics(self, request: web.Request) -> web.Response:
        body, content_type = self.metrics.exposition(request.headers.get("Accept", ""))
        response = web.Response(body=body)
        # Set whole: the format's version and charset are part of it.
        response.headers["Content-Type"] = content_type
        return response
