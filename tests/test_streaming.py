"""The streaming editor and its rate pacer, against a recording stand-in for a Discord channel.

The stand-in enforces Discord's per-channel window itself (it records a violation and refuses the
request), counts requests in flight per stream, and can fail chosen requests, so these tests show
that the editor stays inside the limits rather than assume it. Pacer unit tests run on a fake
clock; editor tests run in real time with a fast window (5 per 0.5 s) to stay quick.
"""

from __future__ import annotations

import asyncio
import logging
import random
import re
import time
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import discord
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cogs.streaming import EMPTY_TEXT, RatePacer, StreamingMessage
from cogs.text_split import display_pieces

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
    kwargs.setdefault("margin", 0.0)  # the stand-in counts requests as they leave: no jitter
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


# --------------------------------------------------------------------------------------------
# RatePacer on a fake clock


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        await asyncio.sleep(0)


def fake_pacer(clock: FakeClock, **kwargs: Any) -> RatePacer:
    kwargs.setdefault("margin", 0.0)
    return RatePacer(clock=clock, sleep=clock.sleep, **kwargs)


async def test_pacer_lets_a_burst_through_then_holds_the_window() -> None:
    clock = FakeClock()
    pacer = fake_pacer(clock)
    for _ in range(5):
        assert pacer.would_wait(1) == 0
        await pacer.acquire(1)
    assert clock.sleeps == []
    assert pacer.would_wait(1) == pytest.approx(5.0)
    await pacer.acquire(1)
    assert clock.sleeps == [pytest.approx(5.0)]
    assert clock.now == pytest.approx(5.0)


async def test_pacer_window_slides() -> None:
    clock = FakeClock()
    pacer = fake_pacer(clock)
    for t in range(5):
        clock.now = float(t)
        await pacer.acquire(1)
    clock.now = 4.5
    assert pacer.would_wait(1) == pytest.approx(0.5)
    await pacer.acquire(1)
    assert clock.now == pytest.approx(5.0)
    assert pacer.would_wait(1) == pytest.approx(1.0)  # the hit at t=1 leaves at t=6


async def test_pacer_channels_are_separate_but_share_the_global_budget() -> None:
    clock = FakeClock()
    pacer = fake_pacer(clock, global_per_second=40)
    # Routine edits may use three quarters of the global budget...
    for channel in range(6):
        for _ in range(5):
            await pacer.acquire(channel)
    assert clock.sleeps == []
    assert pacer.would_wait(99) == pytest.approx(1.0)
    # ...the rest is kept for final edits, which go out at once...
    for channel in range(10):
        assert pacer.would_wait(100 + channel, urgent=True) == 0
        await pacer.acquire(100 + channel, urgent=True)
    assert clock.sleeps == []
    # ...until the whole budget is spent.
    assert pacer.would_wait(200, urgent=True) == pytest.approx(1.0)
    await pacer.acquire(99)
    assert clock.now == pytest.approx(1.0)


async def test_pacer_margin_widens_the_channel_window() -> None:
    clock = FakeClock()
    pacer = fake_pacer(clock, margin=0.1)
    for _ in range(5):
        await pacer.acquire(1)
    assert pacer.would_wait(1) == pytest.approx(5.1)


async def test_pacer_cancelled_waiter_takes_no_slot() -> None:
    clock = FakeClock()
    forever = asyncio.get_running_loop().create_future()

    async def stuck_sleep(seconds: float) -> None:
        await forever

    pacer = RatePacer(per_channel=1, clock=clock, sleep=stuck_sleep, margin=0)
    await pacer.acquire(1)
    waiter = asyncio.create_task(pacer.acquire(1))
    await asyncio.sleep(0.01)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    clock.now = 5.0
    assert pacer.would_wait(1) == 0  # only the first hit was ever recorded


async def test_pacer_serves_waiters_in_arrival_order() -> None:
    pacer = RatePacer(per_channel=1, per_seconds=0.02)
    served: list[int] = []

    async def take(n: int) -> None:
        await pacer.acquire(5)
        served.append(n)

    tasks = []
    for n in range(6):
        tasks.append(asyncio.create_task(take(n)))
        await asyncio.sleep(0)
    await asyncio.gather(*tasks)
    assert served == list(range(6))


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 2), st.floats(0, 1.5, allow_nan=False)), min_size=1, max_size=60
    ),
    st.integers(1, 5),
    st.integers(2, 8),
)
def test_pacer_never_exceeds_either_window(
    requests: list[tuple[int, float]], per_channel: int, global_per_second: int
) -> None:
    async def run() -> list[tuple[int, float]]:
        clock = FakeClock()
        pacer = fake_pacer(
            clock, per_channel=per_channel, per_seconds=2.0, global_per_second=global_per_second
        )
        hits = []
        for channel, gap in requests:
            clock.now += gap
            expected = pacer.would_wait(channel)
            before = clock.now
            await pacer.acquire(channel)
            assert clock.now - before == pytest.approx(expected)  # waited only as needed
            hits.append((channel, clock.now))
        return hits

    hits = asyncio.run(run())
    eps = 1e-9
    for channel in range(3):
        times = [t for c, t in hits if c == channel]
        for i in range(per_channel, len(times)):
            assert times[i] - times[i - per_channel] >= 2.0 - eps
    times = [t for _, t in hits]
    for i in range(global_per_second, len(times)):
        assert times[i] - times[i - global_per_second] >= 1.0 - eps


# --------------------------------------------------------------------------------------------
# StreamingMessage in real time


async def test_first_words_appear_fast_with_the_marker_which_goes_at_the_end() -> None:
    recorder = Recorder()
    channel = FakeChannel(recorder)
    stream = StreamingMessage(channel, fast_pacer())
    stream.update("   ")  # nothing to show yet
    await asyncio.sleep(0.02)
    assert recorder.ops == []
    started = time.monotonic()
    stream.update("Once upon")
    await wait_for(lambda: channel.messages)  # the send has been answered
    assert time.monotonic() - started < 0.05
    assert channel.messages[0].content == "Once upon" + MARKER
    messages = await stream.finish("Once upon a time.")
    assert [m.content for m in messages] == ["Once upon a time."]
    assert_window_kept(recorder)


async def test_long_narration_splits_into_ordered_messages_that_rejoin() -> None:
    recorder = Recorder()
    channel = FakeChannel(recorder)
    stream = StreamingMessage(channel, fast_pacer())
    text = narration(4500)
    assert 4500 <= len(text) < 5000
    await stream_in_chunks(stream, text)
    messages = await stream.finish(text)

    assert len(messages) >= 3
    assert messages == channel.messages  # in the order they were sent
    contents = [m.content for m in messages]
    assert contents == display_pieces(text)
    assert all(len(c) <= 2000 and MARKER.strip() not in c for c in contents)
    assert no_space("".join(contents)) == no_space(text)
    assert all(p.endswith(tuple('.!?…"')) for p in contents[:-1])  # cut at boundaries
    # While streaming the marker was there; frozen messages were not touched after freezing.
    assert any(h.endswith(MARKER) for m in messages for h in m.history)
    for message in messages[:-1]:
        assert message.history.index(message.content) == len(message.history) - 1
    assert_window_kept(recorder)
    assert channel.max_in_flight == 1


async def test_a_burst_of_text_then_finish_lands_every_piece_in_order() -> None:
    recorder = Recorder()
    channel = FakeChannel(recorder)
    stream = StreamingMessage(channel, fast_pacer())
    text = narration(5000, seed=3)
    stream.update(text)
    messages = await stream.finish(text)
    assert [m.content for m in messages] == display_pieces(text)
    assert len(messages) >= 3
    assert_window_kept(recorder)


async def test_three_streams_in_one_channel_share_the_window() -> None:
    recorder = Recorder()
    pacer = fast_pacer()
    channels = [FakeChannel(recorder, channel_id=7) for _ in range(3)]
    # No spacing of their own: the shared pacer alone must keep them inside the window.
    streams = [StreamingMessage(c, pacer, min_interval=0) for c in channels]
    texts = [narration(1500, seed=s) for s in (11, 12, 13)]

    async def run(stream: StreamingMessage, text: str) -> list[Any]:
        await stream_in_chunks(stream, text, chunk=10, pause=0.003)
        return await stream.finish(text)

    results = await asyncio.gather(*(run(s, t) for s, t in zip(streams, texts, strict=True)))
    for messages, text in zip(results, texts, strict=True):
        assert [m.content for m in messages] == display_pieces(text)
    assert_window_kept(recorder)
    assert all(c.max_in_flight == 1 for c in channels)
    assert len(recorder.of("send")) + len(recorder.of("edit")) > 2 * PER_CHANNEL  # it was busy
    assert max(o.t for o in recorder.ops) - min(o.t for o in recorder.ops) > PER_SECONDS


async def test_never_more_than_one_request_in_flight_per_stream() -> None:
    recorder = Recorder(latency=(0.01, 0.03))
    channel = FakeChannel(recorder)
    stream = StreamingMessage(channel, fast_pacer(), min_interval=0)
    text = narration(2500, seed=5)
    await stream_in_chunks(stream, text, chunk=25, pause=0.001)
    await stream.finish(text)
    assert channel.max_in_flight == 1
    assert len(recorder.ops) > 3


async def test_unchanged_text_is_not_sent_again() -> None:
    recorder = Recorder()
    channel = FakeChannel(recorder)
    stream = StreamingMessage(channel, fast_pacer(), min_interval=0)
    stream.update("Hello")
    await wait_for(lambda: stream.messages)
    for variant in ("Hello", "Hello ", "Hello\n\n", "  Hello", "Hello"):
        stream.update(variant)
        await asyncio.sleep(0.02)
    assert [o.op for o in recorder.ops] == ["send"]
    await stream.finish("Hello")
    assert [(o.op, o.content) for o in recorder.ops] == [
        ("send", "Hello" + MARKER),
        ("edit", "Hello"),
    ]
    await stream.finish("Hello")  # a second finish with nothing new does nothing
    assert len(recorder.ops) == 2


async def test_finish_puts_the_view_on_the_last_message_only() -> None:
    recorder = Recorder()
    channel = FakeChannel(recorder)
    stream = StreamingMessage(channel, fast_pacer())
    text = narration(3000, seed=8)
    await stream_in_chunks(stream, text, chunk=40)
    view = discord.ui.View(timeout=None)
    messages = await stream.finish(text, view=view)
    assert len(messages) >= 2
    assert messages[-1].view is view
    assert all(m.view is None for m in messages[:-1])
    assert [o.view for o in recorder.ops if o.view not in (None, discord.utils.MISSING)] == [view]
    # Every request asked Discord not to ping anyone the model happened to name.
    assert all(
        o.allowed_mentions is not None and o.allowed_mentions.to_dict()["parse"] == []
        for o in recorder.ops
    )


async def test_finish_with_a_suffix_keeps_it_on_the_last_message() -> None:
    recorder = Recorder()
    channel = FakeChannel(recorder)
    stream = StreamingMessage(channel, fast_pacer())
    stream.update("The gate opens.")
    messages = await stream.finish("The gate opens.", suffix="\n-# hp 55/100")
    assert [m.content for m in messages] == ["The gate opens.\n-# hp 55/100"]


async def test_fail_leaves_the_partial_text_and_the_note() -> None:
    recorder = Recorder()
    channel = FakeChannel(recorder)
    stream = StreamingMessage(channel, fast_pacer())
    stream.update("The door creaks open and")
    await wait_for(lambda: stream.messages)
    stream.update("The door creaks open and a cold")
    await stream.fail("⚠ *The narration stopped here.*")
    assert [m.content for m in stream.messages] == [
        "The door creaks open and a cold\n\n⚠ *The narration stopped here.*"
    ]
    stream.update("ignored after the end")
    await asyncio.sleep(0.02)
    assert stream.messages[0].content.endswith("stopped here.*")

    empty = StreamingMessage(FakeChannel(recorder), fast_pacer())
    await empty.fail("⚠ Nothing came.")
    assert [m.content for m in empty.messages] == ["⚠ Nothing came."]


async def test_an_intermediate_error_does_not_stop_the_stream(caplog) -> None:
    recorder = Recorder()
    channel = FakeChannel(recorder)
    stream = StreamingMessage(channel, fast_pacer(), min_interval=0.01)
    stream.update("First words")
    await wait_for(lambda: stream.messages)
    recorder.failures = [http_error(500, message="Server Error")]
    caplog.set_level(logging.WARNING, logger="cogs.streaming")
    stream.update("First words and then")
    await asyncio.sleep(0.05)
    stream.update("First words and then some more")
    await wait_for(lambda: channel.messages[0].content == "First words and then some more" + MARKER)
    assert "failed" in caplog.text
    messages = await stream.finish("First words and then some more.")
    assert [m.content for m in messages] == ["First words and then some more."]


async def test_a_deleted_message_is_replaced_by_a_new_one() -> None:
    recorder = Recorder()
    channel = FakeChannel(recorder)
    stream = StreamingMessage(channel, fast_pacer(), min_interval=0.01)
    stream.update("A story begins")
    await wait_for(lambda: stream.messages)
    channel.messages[0].deleted = True  # a moderator removed it
    stream.update("A story begins, and goes on")
    await wait_for(lambda: len(channel.messages) == 2)
    messages = await stream.finish("A story begins, and goes on.")
    assert messages == [channel.messages[1]]
    assert messages[0].content == "A story begins, and goes on."


async def test_a_message_deleted_before_the_final_edit_is_replaced_in_order() -> None:
    recorder = Recorder()
    channel = FakeChannel(recorder)
    stream = StreamingMessage(channel, fast_pacer(), limit=60)
    text = "First paragraph is here.\n\nSecond paragraph is here.\n\nThird paragraph."
    stream.update(text)
    await wait_for(lambda: len(channel.messages) == 2)
    await asyncio.sleep(0.05)
    channel.messages[0].deleted = True
    final = text.replace("First", "The first") + " The end."  # the first piece must change
    messages = await stream.finish(final)
    assert [m.content for m in messages] == display_pieces(final, 60)
    assert not any(m.deleted for m in messages)
    assert messages[0] is channel.messages[1]  # the survivor moved up; a new one follows it


async def test_final_edit_retries_transient_errors_then_lands() -> None:
    recorder = Recorder()
    channel = FakeChannel(recorder)
    stream = StreamingMessage(channel, fast_pacer(), final_retry_delays=(0.01, 0.01, 0.01))
    stream.update("Almost")
    await wait_for(lambda: stream.messages)
    await asyncio.sleep(0.01)
    recorder.failures = [http_error(503), OSError("connection reset")]
    messages = await stream.finish("Almost done.")
    assert [m.content for m in messages] == ["Almost done."]


async def test_final_edit_gives_up_after_its_retries_and_on_client_errors() -> None:
    recorder = Recorder()
    channel = FakeChannel(recorder)
    stream = StreamingMessage(channel, fast_pacer(), final_retry_delays=(0.01, 0.01))
    stream.update("Almost")
    await wait_for(lambda: stream.messages)
    await asyncio.sleep(0.01)
    recorder.failures = [http_error(500)] * 3
    with pytest.raises(discord.DiscordServerError):
        await stream.finish("Almost done.")
    recorder.failures = [http_error(403, 50013, "Missing Permissions"), None]
    with pytest.raises(discord.Forbidden):
        await stream.finish("Almost done.")  # not retried
    assert recorder.failures == [None]


async def test_a_lost_send_answer_is_not_duplicated_on_retry() -> None:
    recorder = Recorder()
    channel = FakeChannel(recorder)
    real_send = channel.send
    calls = 0

    async def flaky_send(*args: Any, **kwargs: Any) -> FakeMessage:
        nonlocal calls
        calls += 1
        message = await real_send(*args, **kwargs)
        if calls == 1:
            raise OSError("the answer was lost")  # it landed, but we never heard back
        return message

    channel.send = flaky_send  # type: ignore[method-assign]
    stream = StreamingMessage(channel, fast_pacer(), final_retry_delays=(0.01,))
    messages = await stream.finish("Hello there.")
    assert len(channel.messages) == 1
    assert [m.content for m in messages] == ["Hello there."]


async def test_the_final_edit_waits_for_a_full_window_and_lands() -> None:
    recorder = Recorder()
    channel = FakeChannel(recorder)
    pacer = fast_pacer()
    stream = StreamingMessage(channel, pacer)
    stream.update("Waiting")
    await wait_for(lambda: stream.messages)
    while pacer.would_wait(channel.id) == 0:
        await pacer.acquire(channel.id)  # someone else uses up the window
    started = time.monotonic()
    messages = await stream.finish("Waiting is over.")
    assert time.monotonic() - started >= PER_SECONDS * 0.8
    assert [m.content for m in messages] == ["Waiting is over."]
    assert_window_kept(recorder)


async def test_a_final_text_that_is_not_an_extension_reflows_and_drops_extras() -> None:
    recorder = Recorder()
    channel = FakeChannel(recorder)
    stream = StreamingMessage(channel, fast_pacer(), limit=120)
    prose = "The river is wide. The ferryman waits.\n\nHe asks for a coin."
    block = '\n\n```state\n{"hp": -5, "gold": -1, "flags": {"crossed_river": true}, "x": 1}\n```'
    await stream_in_chunks(stream, prose + block, chunk=7)
    await wait_for(lambda: len(channel.messages) == 2)
    messages = await stream.finish(prose)
    assert [m.content for m in messages] == [prose]
    assert channel.messages[1].deleted
    assert messages == [channel.messages[0]]


async def test_finishing_without_any_text_shows_a_placeholder() -> None:
    recorder = Recorder()
    stream = StreamingMessage(FakeChannel(recorder), fast_pacer())
    messages = await stream.finish("  ")
    assert [m.content for m in messages] == [EMPTY_TEXT]


async def test_first_edit_delay_gathers_more_words() -> None:
    recorder = Recorder()
    channel = FakeChannel(recorder)
    stream = StreamingMessage(channel, fast_pacer(), first_edit_delay=0.05)
    stream.update("One")
    await asyncio.sleep(0.01)
    stream.update("One two three")
    await wait_for(lambda: stream.messages)
    assert recorder.ops[0].content == "One two three" + MARKER
    await stream.finish("One two three.")


async def test_aclose_stops_without_a_final_edit() -> None:
    recorder = Recorder()
    channel = FakeChannel(recorder)
    stream = StreamingMessage(channel, fast_pacer())
    stream.update("Half a")
    await wait_for(lambda: stream.messages)
    await stream.aclose()
    stream.update("Half a sentence")
    await asyncio.sleep(0.02)
    assert [o.content for o in recorder.ops] == ["Half a" + MARKER]
