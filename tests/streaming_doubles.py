"""Test doubles shared by the streaming editor tests: a recording stand-in for a Discord channel.

The stand-in enforces Discord's per-channel window itself (it records a violation and refuses the
request), counts requests in flight per stream, and can fail chosen requests, so the tests show
that the editor stays inside the limits rather than assume it. The window is a fast one (5 per
0.5 s) so that tests running in real time stay quick.
"""

from __future__ import annotations

import asyncio
import random
import re
import time
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import discord

from cogs.ui.pacing import RatePacer
from cogs.ui.streaming import StreamingMessage

MARKER = " ▌"
PER_CHANNEL = 5
PER_SECONDS = 0.5
# The pacer and the stand-in read the clock microseconds apart (the stand-in counts a request as
# it leaves the bot, before its simulated latency).
TOLERANCE = 0.001


# --------------------------------------------------------------------------------------------
# A recording stand-in for a channel and its messages


def http_error(status: int, code: int = 0, message: str = "error") -> discord.HTTPException:
    response = SimpleNamespace(status=status, reason=message)
    body = {"code": code, "message": message}
    if status == 404:
        return discord.NotFound(response, body)
    if status == 403:
        return discord.Forbidden(response, body)
    if status >= 500:
        return discord.DiscordServerError(response, body)
    return discord.HTTPException(response, body)


class WindowExceeded(AssertionError):
    pass


@dataclass
class Op:
    t: float
    channel_id: int
    op: str
    message_id: int
    content: str | None
    view: Any
    allowed_mentions: Any
    failed: bool = False


@dataclass
class Recorder:
    """Everything every stand-in channel did, with Discord's window enforced per channel id."""

    per_channel: int = PER_CHANNEL
    per_seconds: float = PER_SECONDS
    latency: tuple[float, float] = (0.001, 0.004)
    ops: list[Op] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    # Exceptions to raise from the next requests (None: let that request through).
    failures: list[BaseException | None] = field(default_factory=list)
    rng: random.Random = field(default_factory=lambda: random.Random(7))
    next_id: int = 1000

    def hit(self, channel_id: int, op: str, message_id: int, content, view, mentions) -> None:
        """Record a request as it leaves the bot (every attempt counts, as at Discord)."""
        now = time.monotonic()
        recent = [
            o
            for o in self.ops
            if o.channel_id == channel_id
            and o.op in ("send", "edit")
            and o.t > now - self.per_seconds + TOLERANCE
        ]
        if op in ("send", "edit") and len(recent) >= self.per_channel:
            self.violations.append(f"{op} at {now:.4f}: {[round(o.t, 4) for o in recent]}")
            raise WindowExceeded(self.violations[-1])
        self.ops.append(Op(now, channel_id, op, message_id, content, view, mentions))
        if self.failures:
            failure = self.failures.pop(0)
            if failure is not None:
                self.ops[-1].failed = True
                raise failure

    async def delay(self) -> None:
        await asyncio.sleep(self.rng.uniform(*self.latency))

    def of(self, op: str) -> list[Op]:
        return [o for o in self.ops if o.op == op]


class FakeMessage:
    def __init__(self, channel: FakeChannel, message_id: int, content: str, view: Any) -> None:
        self.channel = channel
        self.id = message_id
        self.content = content
        self.view = view
        self.deleted = False
        self.history = [content]

    async def edit(
        self,
        *,
        content: Any = discord.utils.MISSING,
        view: Any = discord.utils.MISSING,
        allowed_mentions: Any = None,
    ) -> FakeMessage:
        async with self.channel.in_flight():
            self.channel.recorder.hit(
                self.channel.id, "edit", self.id, content, view, allowed_mentions
            )
            await self.channel.recorder.delay()
            if self.deleted:
                raise http_error(404, 10008, "Unknown Message")
            if content is not discord.utils.MISSING:
                self.content = content
                self.history.append(content)
            if view is not discord.utils.MISSING:
                self.view = view
            return self

    async def delete(self) -> None:
        self.channel.recorder.hit(self.channel.id, "delete", self.id, None, None, None)
        self.deleted = True


class FakeChannel:
    """One stream's handle on a channel: several may share an id (and so Discord's window)."""

    def __init__(self, recorder: Recorder, channel_id: int = 1) -> None:
        self.recorder = recorder
        self.id = channel_id
        self.messages: list[FakeMessage] = []
        self.current = 0
        self.max_in_flight = 0
        self.nonces: dict[str, FakeMessage] = {}

    def in_flight(self) -> _InFlight:
        return _InFlight(self)

    async def send(
        self,
        content: str | None = None,
        *,
        view: Any = None,
        allowed_mentions: Any = None,
        nonce: str | None = None,
        **_: Any,
    ) -> FakeMessage:
        async with self.in_flight():
            assert content and content.strip() == content, "Discord would strip or refuse this"
            assert len(content) <= 2000
            self.recorder.next_id += 1
            message_id = self.recorder.next_id
            self.recorder.hit(self.id, "send", message_id, content, view, allowed_mentions)
            await self.recorder.delay()
            if nonce is not None and nonce in self.nonces:
                return self.nonces[nonce]  # enforce_nonce: Discord answers with the first one
            message = FakeMessage(self, message_id, content, view)
            self.messages.append(message)
            if nonce is not None:
                self.nonces[nonce] = message
            return message


class _InFlight:
    def __init__(self, channel: FakeChannel) -> None:
        self.channel = channel

    async def __aenter__(self) -> None:
        self.channel.current += 1
        self.channel.max_in_flight = max(self.channel.max_in_flight, self.channel.current)

    async def __aexit__(self, *exc: object) -> None:
        self.channel.current -= 1


def fast_pacer(**kwargs: Any) -> RatePacer:
    # The recorder counts a request as it leaves, which is the moment it was granted plus the
    # event loop's delay in resuming it: a few milliseconds on a loaded machine, never more.
    kwargs.setdefault("margin", 0.01)
    return RatePacer(per_channel=PER_CHANNEL, per_seconds=PER_SECONDS, **kwargs)


def narration(chars: int = 4500, seed: int = 1) -> str:
    """Paragraphs of sentences, at least ``chars`` long."""
    rng = random.Random(seed)
    words = "lantern road river mist stranger cloak ember whisper gate crow old silver".split()
    out: list[str] = []
    while sum(len(p) + 2 for p in out) < chars:
        sentences = []
        for _ in range(rng.randint(3, 6)):
            sentence = " ".join(rng.choice(words) for _ in range(rng.randint(5, 12)))
            sentences.append(sentence.capitalize() + rng.choice([".", "!", "?", "…", '."']))
        out.append(" ".join(sentences))
    return "\n\n".join(out)


async def stream_in_chunks(
    stream: StreamingMessage, text: str, *, chunk: int = 12, pause: float = 0.001
) -> None:
    for end in range(chunk, len(text) + chunk, chunk):
        stream.update(text[:end])
        await asyncio.sleep(pause)


async def wait_for(predicate, within: float = 2.0) -> None:
    deadline = time.monotonic() + within
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.001)


def no_space(text: str) -> str:
    return re.sub(r"\s+", "", text)


def assert_window_kept(recorder: Recorder) -> None:
    assert recorder.violations == []
    by_channel: dict[int, list[float]] = {}
    for o in recorder.ops:
        if o.op in ("send", "edit"):
            by_channel.setdefault(o.channel_id, []).append(o.t)
    for times in by_channel.values():
        for i in range(PER_CHANNEL, len(times)):
            assert times[i] - times[i - PER_CHANNEL] >= PER_SECONDS - TOLERANCE
