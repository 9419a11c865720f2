"""What a provider's usage says a reply cost: the prompt tokens it served from its prefix cache,
under each provider's own name for the figure (``engine.llm.providers.openai_compat``)."""

from __future__ import annotations

import pytest

from engine.llm.providers.base import ChatMessage, GenerationParams
from engine.llm.providers.openai_compat import OpenAICompatibleProvider
from engine.platform.events import ProviderChunk, StreamEnd, Usage
from tests.fakes.openai_server import FakeModelServer, Reply
from tests.fakes.static_server import static_server

MESSAGES = [ChatMessage("user", "> You light the lantern.")]


async def end_of(provider: OpenAICompatibleProvider) -> StreamEnd:
    chunks: list[ProviderChunk] = [
        chunk async for chunk in provider.stream(MESSAGES, GenerationParams())
    ]
    end = chunks[-1]
    assert isinstance(end, StreamEnd)
    return end


async def test_cached_prompt_tokens_are_read_from_the_usage(
    fake_model: FakeModelServer, provider: OpenAICompatibleProvider
) -> None:
    """OpenAI's ``prompt_tokens_details.cached_tokens`` (the fake's), and None when unsaid."""
    fake_model.queue(
        Reply(text="It glows.", prompt_tokens=42, completion_tokens=17, cached_tokens=30)
    )
    fake_model.queue(Reply(text="It glows.", prompt_tokens=42, completion_tokens=17))
    assert (await end_of(provider)).usage == Usage(42, 17, cached_tokens=30)
    assert (await end_of(provider)).usage == Usage(42, 17, cached_tokens=None)


@pytest.mark.parametrize(
    ("extra", "cached"),
    [
        ('"usage": {"prompt_tokens": 50, "prompt_tokens_details": {"cached_tokens": 40}}', 40),
        ('"usage": {"prompt_tokens": 50, "prompt_cache_hit_tokens": 32}', 32),  # DeepSeek
        ('"usage": {"prompt_tokens": 50, "cache_read_input_tokens": 20}', 20),  # Anthropic's
        ('"usage": {"prompt_tokens": 50, "cached_tokens": 10}', 10),
        ('"usage": {"prompt_tokens": 50}, "timings": {"cache_n": 45}', 45),  # llama.cpp's own
        ('"usage": {"prompt_tokens": 50, "cached_tokens": 99}', 50),  # never past the prompt
        ('"usage": {"prompt_tokens": 50, "cached_tokens": "lots"}', None),
        ('"usage": {"prompt_tokens": 50, "prompt_tokens_details": null}', None),
    ],
)
async def test_each_providers_cached_tokens_field_is_read(extra: str, cached: int | None) -> None:
    body = (
        b'data: {"choices": [{"index": 0, "delta": {"content": "Hi."}, '
        b'"finish_reason": "stop"}]}\n\n'
        b'data: {"choices": [], ' + extra.encode() + b"}\n\ndata: [DONE]\n\n"
    )
    with static_server(200, "text/event-stream", body) as url:
        client = OpenAICompatibleProvider(url, "any", timeout=5)
        try:
            end = await end_of(client)
        finally:
            await client.aclose()
    assert end.usage == Usage(50, 0, cached)
