"""The OpenAI-compatible chat provider, over real HTTP against the fake model server."""

from __future__ import annotations

import asyncio
import base64
import math
import re
from collections.abc import AsyncIterator

import pytest

from engine.errors import (
    ModelBadReply,
    ModelEmptyReply,
    ModelError,
    ModelKeyRefused,
    ModelNotFound,
    ModelRateLimited,
    ModelReplyCutOff,
    ModelServerError,
    ModelTimedOut,
    ModelUnreachable,
    ReasoningExhausted,
)
from engine.llm.providers.base import ChatMessage, GenerationParams, ReplyLimits
from engine.llm.providers.http_errors import ERROR_BODY_BYTES
from engine.llm.providers.openai_compat import MAX_USAGE_TOKENS, OpenAICompatibleProvider
from engine.llm.providers.sse import MAX_LINE_CHARS
from engine.platform.events import ProviderChunk, ReasoningDelta, StreamEnd, TextDelta, Usage
from tests.fakes.openai_server import FakeModelServer, Reply
from tests.fakes.static_server import endless_server, static_server

MESSAGES = [
    ChatMessage("system", "You narrate a text adventure."),
    ChatMessage("user", "look around the cave"),
]
PARAMS = GenerationParams(max_tokens=120, temperature=0.7)
STORY = "The cave is dark.\n\nWater drips somewhere ahead, slow and steady."
LONG_STORY = " ".join(f"word{i}" for i in range(400))

# What a player must never see in an error message.
CODE_LIKE = re.compile(
    r"Traceback|File \"|Error\b|Exception|httpx|httpcore|\b[A-Z][a-z]+(?:[A-Z][a-z]+)+\b"
)


async def collect(
    provider: OpenAICompatibleProvider, params: GenerationParams = PARAMS
) -> list[ProviderChunk]:
    return [chunk async for chunk in provider.stream(MESSAGES, params)]


def text_of(chunks: list[ProviderChunk]) -> str:
    return "".join(c.text for c in chunks if isinstance(c, TextDelta))


def reasoning_of(chunks: list[ProviderChunk]) -> str:
    return "".join(c.text for c in chunks if isinstance(c, ReasoningDelta))


def assert_readable(error: ModelError) -> None:
    """A message a player can read: non-empty, no class names, no traceback."""
    assert error.message
    assert error.message == str(error)
    assert not CODE_LIKE.search(error.message), error.message


async def expect_error(provider: OpenAICompatibleProvider, kind: type[ModelError]) -> ModelError:
    with pytest.raises(kind) as info:
        await collect(provider)
    assert_readable(info.value)
    return info.value


@pytest.fixture
async def quick_provider(
    fake_model: FakeModelServer,
) -> AsyncIterator[OpenAICompatibleProvider]:
    """A provider that gives up on a silent server after half a second."""
    client = OpenAICompatibleProvider(fake_model.base_url, fake_model.model, timeout=0.5)
    try:
        yield client
    finally:
        await client.aclose()


# --------------------------------------------------------------------------- happy paths


async def test_text_deltas_concatenate_to_the_scripted_text(
    fake_model: FakeModelServer, provider: OpenAICompatibleProvider
) -> None:
    fake_model.queue(STORY)
    chunks = await collect(provider)
    deltas = [c for c in chunks if isinstance(c, TextDelta)]
    assert len(deltas) > 1, "streamed in pieces"
    assert text_of(chunks) == STORY
    assert reasoning_of(chunks) == ""
    assert isinstance(chunks[-1], StreamEnd)
    assert sum(isinstance(c, StreamEnd) for c in chunks) == 1
    assert fake_model.errors == []


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
async def test_reasoning_fields_become_reasoning_deltas(
    fake_model: FakeModelServer, provider: OpenAICompatibleProvider, field: str
) -> None:
    fake_model.queue(
        Reply(text=STORY, reasoning="The player wants light. Describe.", reasoning_field=field)
    )
    chunks = await collect(provider)
    assert reasoning_of(chunks) == "The player wants light. Describe."
    assert text_of(chunks) == STORY
    # Reasoning comes first and never leaks into the story.
    kinds = [type(c) for c in chunks if not isinstance(c, StreamEnd)]
    assert kinds == sorted(kinds, key=lambda k: k is TextDelta)
    assert "player wants" not in text_of(chunks)


async def test_stream_end_carries_finish_reason_and_usage(
    fake_model: FakeModelServer, provider: OpenAICompatibleProvider
) -> None:
    fake_model.queue(
        Reply(text=STORY, finish_reason="length", prompt_tokens=42, completion_tokens=17)
    )
    end = (await collect(provider))[-1]
    assert end == StreamEnd(finish_reason="length", usage=Usage(42, 17))


async def test_usage_defaults_are_counted_by_the_server(
    fake_model: FakeModelServer, provider: OpenAICompatibleProvider
) -> None:
    fake_model.queue("one two three")
    end = (await collect(provider))[-1]
    assert isinstance(end, StreamEnd)
    assert end.finish_reason == "stop"
    assert end.usage == Usage(prompt_tokens=9, completion_tokens=3)


async def test_request_body(
    fake_model: FakeModelServer, provider: OpenAICompatibleProvider
) -> None:
    fake_model.queue(STORY)
    await collect(provider)
    (body,) = fake_model.requests
    assert body["_path"] == "/v1/chat/completions"
    assert body["model"] == fake_model.model
    assert body["messages"] == [
        {"role": "system", "content": "You narrate a text adventure."},
        {"role": "user", "content": "look around the cave"},
    ]
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["max_tokens"] == 120
    assert body["temperature"] == 0.7
    assert "top_p" not in body
    assert "stop" not in body
    assert "authorization" not in body["_headers"]


async def test_request_body_with_top_p_and_stop(
    fake_model: FakeModelServer, provider: OpenAICompatibleProvider
) -> None:
    fake_model.queue(STORY)
    params = GenerationParams(max_tokens=50, temperature=0.2, top_p=0.9, stop=("\n>", "You:"))
    await collect(provider, params)
    (body,) = fake_model.requests
    assert body["max_tokens"] == 50
    assert body["temperature"] == 0.2
    assert body["top_p"] == 0.9
    assert body["stop"] == ["\n>", "You:"]


async def test_api_key_is_sent_as_bearer_and_a_wrong_one_is_refused() -> None:
    with FakeModelServer(api_key="sk-test") as fake:
        right = OpenAICompatibleProvider(fake.base_url, fake.model, api_key="sk-test", timeout=2)
        wrong = OpenAICompatibleProvider(fake.base_url, fake.model, api_key="sk-nope", timeout=2)
        none = OpenAICompatibleProvider(fake.base_url, fake.model, timeout=2)
        try:
            fake.queue(STORY)
            assert text_of(await collect(right)) == STORY
            assert fake.requests[0]["_headers"]["authorization"] == "Bearer sk-test"
            await expect_error(wrong, ModelKeyRefused)
            await expect_error(none, ModelKeyRefused)
            assert "authorization" not in fake.requests[2]["_headers"]
        finally:
            for p in (right, wrong, none):
                await p.aclose()


async def test_inline_think_tags_become_reasoning(
    fake_model: FakeModelServer, provider: OpenAICompatibleProvider
) -> None:
    fake_model.queue(Reply(text="<think>plan</think>Story."))
    chunks = await collect(provider)
    assert reasoning_of(chunks) == "plan"
    assert text_of(chunks) == "Story."


async def test_inline_think_block_split_across_many_deltas(
    fake_model: FakeModelServer, provider: OpenAICompatibleProvider
) -> None:
    # The fake streams word by word, so the tags and the trace arrive in separate deltas.
    fake_model.queue(Reply(text="<think> the player is lost </think>\n\nA lantern flickers."))
    chunks = await collect(provider)
    assert reasoning_of(chunks) == " the player is lost "
    assert text_of(chunks) == "A lantern flickers."


async def test_provider_can_be_reused_for_several_replies(
    fake_model: FakeModelServer, provider: OpenAICompatibleProvider
) -> None:
    fake_model.queue("First reply.", "Second reply.")
    assert text_of(await collect(provider)) == "First reply."
    assert text_of(await collect(provider)) == "Second reply."


# --------------------------------------------------------------------------- faults


@pytest.mark.parametrize(
    ("fault", "error"),
    [
        ("500", ModelServerError),
        ("401", ModelKeyRefused),
        ("disconnect", ModelBadReply),
        ("malformed", ModelBadReply),
        ("empty", ModelEmptyReply),
    ],
)
async def test_faults_map_to_error_classes(
    fake_model: FakeModelServer,
    provider: OpenAICompatibleProvider,
    fault: str,
    error: type[ModelError],
) -> None:
    fake_model.queue(Reply(text=STORY, fault=fault))
    raised = await expect_error(provider, error)
    assert "127.0.0.1" in raised.message or fault == "empty"


async def test_rate_limit_carries_retry_after(
    fake_model: FakeModelServer, provider: OpenAICompatibleProvider
) -> None:
    fake_model.queue(Reply(fault="429", retry_after=3))
    raised = await expect_error(provider, ModelRateLimited)
    assert isinstance(raised, ModelRateLimited)
    assert raised.retry_after == 3.0
    assert "3 s" in raised.message


async def test_rate_limit_rounds_fractional_retry_after_up(
    fake_model: FakeModelServer, provider: OpenAICompatibleProvider
) -> None:
    fake_model.queue(Reply(fault="429", retry_after=4.2))
    raised = await expect_error(provider, ModelRateLimited)
    assert isinstance(raised, ModelRateLimited)
    assert raised.retry_after == math.ceil(4.2)  # the Retry-After header holds whole seconds
    assert "5 s" in raised.message


async def test_not_found_names_the_model(
    fake_model: FakeModelServer, provider: OpenAICompatibleProvider
) -> None:
    fake_model.queue(Reply(fault="404"))
    raised = await expect_error(provider, ModelNotFound)
    assert f"'{fake_model.model}'" in raised.message


async def test_unknown_model_name_is_not_found(fake_model: FakeModelServer) -> None:
    wrong = OpenAICompatibleProvider(fake_model.base_url, "llama-typo", timeout=2)
    try:
        raised = await expect_error(wrong, ModelNotFound)
    finally:
        await wrong.aclose()
    assert "'llama-typo'" in raised.message


async def test_silent_server_times_out(
    fake_model: FakeModelServer, quick_provider: OpenAICompatibleProvider
) -> None:
    fake_model.queue(Reply(fault="timeout"))
    await expect_error(quick_provider, ModelTimedOut)


async def test_server_that_stops_mid_stream_times_out(
    fake_model: FakeModelServer, quick_provider: OpenAICompatibleProvider
) -> None:
    fake_model.queue(Reply(text="A B", delay=2.0))
    await expect_error(quick_provider, ModelTimedOut)


async def test_reasoning_that_uses_up_the_budget(
    fake_model: FakeModelServer, provider: OpenAICompatibleProvider
) -> None:
    fake_model.queue(
        Reply(reasoning="Let me think about this carefully", text="", finish_reason="length")
    )
    raised = await expect_error(provider, ReasoningExhausted)
    assert "CAMPFIRE_MAX_OUTPUT_TOKENS" in raised.message
    assert "120" in raised.message  # the budget that ran out


async def test_reasoning_only_reply_that_stopped_is_empty(
    fake_model: FakeModelServer, provider: OpenAICompatibleProvider
) -> None:
    fake_model.queue(Reply(reasoning="hmm", text="", finish_reason="stop"))
    await expect_error(provider, ModelEmptyReply)


async def test_whitespace_only_reply_is_empty(
    fake_model: FakeModelServer, provider: OpenAICompatibleProvider
) -> None:
    fake_model.queue(Reply(text="  \n\n "))
    await expect_error(provider, ModelEmptyReply)


async def test_unreachable_endpoint() -> None:
    nowhere = OpenAICompatibleProvider("http://127.0.0.1:9/v1", "any", timeout=2)
    try:
        raised = await expect_error(nowhere, ModelUnreachable)
    finally:
        await nowhere.aclose()
    assert "127.0.0.1:9" in raised.message


async def test_address_without_scheme_is_explained() -> None:
    bad = OpenAICompatibleProvider("localhost:9/v1", "any", timeout=2)
    try:
        raised = await expect_error(bad, ModelUnreachable)
    finally:
        await bad.aclose()
    assert "http://" in raised.message


async def test_stream_cut_without_chunked_encoding_is_a_bad_reply() -> None:
    # Without chunked encoding a dropped connection looks like a body that just ends; a
    # half story must not pass as a finished one.
    with FakeModelServer(chunked=False) as fake:
        fake.queue(Reply(text=STORY, fault="disconnect"))
        client = OpenAICompatibleProvider(fake.base_url, fake.model, timeout=2)
        try:
            await expect_error(client, ModelBadReply)
            fake.queue(STORY)  # a complete reply is fine without chunked encoding
            assert text_of(await collect(client)) == STORY
        finally:
            await client.aclose()


async def test_html_page_instead_of_an_event_stream() -> None:
    page = b"<html><body>Welcome to my router</body></html>"
    with static_server(200, "text/html; charset=utf-8", page) as url:
        client = OpenAICompatibleProvider(url, "any", timeout=2)
        try:
            raised = await expect_error(client, ModelBadReply)
        finally:
            await client.aclose()
    assert "/v1" in raised.message


async def test_error_event_mid_stream() -> None:
    body = (
        b'data: {"choices": [{"index": 0, "delta": {"content": "Once "}}]}\n\n'
        b'data: {"error": {"message": "CUDA out of memory"}}\n\n'
    )
    with static_server(200, "text/event-stream", body) as url:
        client = OpenAICompatibleProvider(url, "any", timeout=2)
        try:
            raised = await expect_error(client, ModelServerError)
        finally:
            await client.aclose()
    assert "CUDA out of memory" in raised.message


async def test_odd_chunk_shapes_are_skipped() -> None:
    body = (
        b": comment\n\n"
        b'data: {"choices": "nope"}\n\n'
        b'data: {"choices": ["nope", {"index": 0, "delta": null}]}\n\n'
        b'data: ["not", "a", "chunk"]\n\n'
        b'data: {"choices": [{"index": 0, "delta": {"content": "Still a story."}}]}\n\n'
        b'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}\n\n'
        b"data: [DONE]\n\n"
    )
    with static_server(200, "text/event-stream", body) as url:
        client = OpenAICompatibleProvider(url, "any", timeout=2)
        try:
            chunks = await collect(client)
        finally:
            await client.aclose()
    assert text_of(chunks) == "Still a story."
    assert chunks[-1] == StreamEnd(finish_reason="stop", usage=None)


@pytest.mark.parametrize("status", [400, 403, 502])
async def test_other_statuses(status: int) -> None:
    body = b'{"error": {"message": "context length exceeded"}}'
    with static_server(status, "application/json", body) as url:
        client = OpenAICompatibleProvider(url, "any", timeout=2)
        try:
            expected = {400: ModelServerError, 403: ModelKeyRefused, 502: ModelServerError}
            raised = await expect_error(client, expected[status])
        finally:
            await client.aclose()
    assert str(status) in raised.message
    if status == 400:
        assert "context length exceeded" in raised.message


# --------------------------------------------------------------------------- cancellation


async def test_cancelling_the_consumer_closes_the_stream(
    fake_model: FakeModelServer, provider: OpenAICompatibleProvider
) -> None:
    fake_model.queue(Reply(text=LONG_STORY, delay=0.02))
    got_text = asyncio.Event()

    async def consume() -> None:
        async for chunk in provider.stream(MESSAGES, PARAMS):
            if isinstance(chunk, TextDelta):
                got_text.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(got_text.wait(), timeout=5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await asyncio.to_thread(fake_model.wait_for_disconnect, 3)


async def test_breaking_out_and_closing_closes_the_stream(
    fake_model: FakeModelServer, provider: OpenAICompatibleProvider
) -> None:
    fake_model.queue(Reply(text=LONG_STORY, delay=0.02))
    stream = provider.stream(MESSAGES, PARAMS)
    seen = []
    async for chunk in stream:
        seen.append(chunk)
        if len(seen) == 3:
            break
    await stream.aclose()  # type: ignore[attr-defined]
    assert await asyncio.to_thread(fake_model.wait_for_disconnect, 3)
    # The provider is still usable afterwards.
    fake_model.queue("After the break.")
    assert text_of(await collect(provider)) == "After the break."


# --------------------------------------------------------------------------- limits per reply


async def test_a_reply_that_never_ends_is_cut_off_at_the_time_limit(
    fake_model: FakeModelServer,
) -> None:
    # Pieces keep coming, so the read timeout (2 s of silence) never fires: only the total does.
    client = OpenAICompatibleProvider(
        fake_model.base_url, fake_model.model, timeout=2, limits=ReplyLimits(seconds=0.5)
    )
    fake_model.queue(Reply(fault="endless", delay=0.01))
    started = asyncio.get_running_loop().time()
    try:
        raised = await expect_error(client, ModelReplyCutOff)
        took = asyncio.get_running_loop().time() - started
        assert "still writing after 0.5 seconds" in raised.message
        assert "press Retry" in raised.message
        assert 0.5 <= took < 5
        assert await asyncio.to_thread(fake_model.wait_for_disconnect, 3)  # connection dropped
    finally:
        await client.aclose()


async def test_a_silent_server_is_cut_off_at_the_time_limit_before_its_read_timeout(
    fake_model: FakeModelServer,
) -> None:
    client = OpenAICompatibleProvider(
        fake_model.base_url, fake_model.model, timeout=5, limits=ReplyLimits(seconds=0.3)
    )
    fake_model.queue(Reply(fault="timeout"))
    try:
        raised = await expect_error(client, ModelReplyCutOff)
    finally:
        await client.aclose()
    assert "had not answered in 0.3 seconds" in raised.message


async def test_a_reply_past_the_length_limit_is_cut_off_counting_its_reasoning(
    fake_model: FakeModelServer,
) -> None:
    client = OpenAICompatibleProvider(
        fake_model.base_url, fake_model.model, timeout=2, limits=ReplyLimits(chars=300)
    )
    # 200 characters of reasoning and 200 of story: each alone is under the limit.
    fake_model.queue(Reply(reasoning="think " * 33 + "ok", text="story " * 33 + "ok"))
    fake_model.queue(Reply(fault="endless"))
    try:
        raised = await expect_error(client, ModelReplyCutOff)
        assert "300 characters" in raised.message
        raised = await expect_error(client, ModelReplyCutOff)
        assert await asyncio.to_thread(fake_model.wait_for_disconnect, 3)
    finally:
        await client.aclose()


async def test_a_reply_within_the_limits_is_whole(fake_model: FakeModelServer) -> None:
    client = OpenAICompatibleProvider(
        fake_model.base_url, fake_model.model, limits=ReplyLimits(seconds=5, chars=len(STORY))
    )
    fake_model.queue(Reply(text=STORY, delay=0.001))
    try:
        assert text_of(await collect(client)) == STORY
    finally:
        await client.aclose()


# --------------------------------------------------------------------------- credentials


@pytest.mark.parametrize("fault", ["500", "401", "404", "disconnect"])
async def test_an_endpoints_credentials_never_reach_the_error_or_the_label(
    fake_model: FakeModelServer, fault: str
) -> None:
    url = fake_model.base_url.replace("http://", "http://bob:hunter2@")
    client = OpenAICompatibleProvider(url, fake_model.model, timeout=2)
    fake_model.queue(Reply(fault=fault, text="Half a story, then nothing."))
    try:
        raised = await expect_error(client, ModelError)
    finally:
        await client.aclose()
    host = fake_model.base_url.split("//")[1].split("/")[0]
    for shown in (raised.message, client.label, client.host):
        assert "hunter2" not in shown and "bob" not in shown
    assert host in raised.message and client.label == f"{fake_model.model} at {host}"
    # The credentials were still used, as HTTP basic auth.
    basic = base64.b64encode(b"bob:hunter2").decode()
    assert fake_model.requests[-1]["_headers"]["authorization"] == f"Basic {basic}"


async def test_what_a_server_echoes_of_the_key_is_masked() -> None:
    body = b'{"error": {"message": "key sk-operator-key is not valid for this model"}}'
    with static_server(400, "application/json", body) as url:
        client = OpenAICompatibleProvider(url, "any", api_key="sk-operator-key", timeout=2)
        try:
            raised = await expect_error(client, ModelServerError)
        finally:
            await client.aclose()
    assert "sk-operator-key" not in raised.message and "is not valid" in raised.message


# ------------------------------------------------------------------ a hostile endpoint
# Any player may point Campfire at an endpoint of their own (/model set in a DM): what it
# sends is read within bounds, and whatever it sends ends as a model error the player can read.


async def test_a_line_that_never_ends_is_refused_after_a_bounded_read() -> None:
    head = b'data: {"choices": [{"index": 0, "delta": {"content": "'
    with endless_server(200, "text/event-stream", head, b"a" * 65536) as (url, sent):
        client = OpenAICompatibleProvider(url, "any", timeout=5)
        try:
            raised = await expect_error(client, ModelBadReply)
        finally:
            await client.aclose()
        await asyncio.sleep(0.2)  # the server notices the closed connection
    assert "more than" in raised.message
    # Read up to the bound (and what the sockets' buffers held), not the server's 512 MB.
    assert sent and sent[0] < 32 * MAX_LINE_CHARS


async def test_an_error_with_an_endless_body_is_read_only_in_part() -> None:
    head = b'{"error": {"message": "overloaded"}, "pad": "'
    with endless_server(500, "application/json", head, b"x" * 65536) as (url, sent):
        client = OpenAICompatibleProvider(url, "any", timeout=5)
        try:
            await expect_error(client, ModelServerError)
        finally:
            await client.aclose()
        await asyncio.sleep(0.2)
    assert sent and sent[0] < 32 * ERROR_BODY_BYTES + 8 * 1024 * 1024


async def test_nesting_deep_enough_to_exhaust_the_parser_is_a_bad_reply() -> None:
    body = b"data: " + b"[" * 100_000 + b"]" * 100_000 + b"\n\n"
    with static_server(200, "text/event-stream", body) as url:
        client = OpenAICompatibleProvider(url, "any", timeout=5)
        try:
            await expect_error(client, ModelBadReply)
        finally:
            await client.aclose()


@pytest.mark.parametrize(
    ("header", "believed"), [("inf", 3600.0), ("1e400", 3600.0), ("nan", None), ("-5", 0.0)]
)
async def test_a_retry_after_past_reason_is_held(header: str, believed: float | None) -> None:
    body = b'{"error": {"message": "slow down"}}'
    with static_server(429, "application/json", body, {"Retry-After": header}) as url:
        client = OpenAICompatibleProvider(url, "any", timeout=5)
        try:
            raised = await expect_error(client, ModelRateLimited)
        finally:
            await client.aclose()
    assert isinstance(raised, ModelRateLimited)
    assert raised.retry_after == believed


async def test_usage_past_reason_is_held() -> None:
    body = (
        b'data: {"choices": [{"index": 0, "delta": {"content": "Hi."}, '
        b'"finish_reason": "stop"}], "usage": {"prompt_tokens": 1e400, "completion_tokens": 3}}'
        b"\n\n"
        b'data: {"choices": [], "usage": {"prompt_tokens": -7, "completion_tokens": 99999999999}}'
        b"\n\ndata: [DONE]\n\n"
    )
    with static_server(200, "text/event-stream", body) as url:
        client = OpenAICompatibleProvider(url, "any", timeout=5)
        try:
            chunks = await collect(client)
        finally:
            await client.aclose()
    end = chunks[-1]
    assert isinstance(end, StreamEnd)
    assert end.usage == Usage(0, MAX_USAGE_TOKENS)
