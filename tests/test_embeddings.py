"""The embeddings client, over real HTTP against the fake model server."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest

from engine.errors import (
    ModelBadReply,
    ModelError,
    ModelKeyRefused,
    ModelNotFound,
    ModelRateLimited,
    ModelServerError,
    ModelTimedOut,
    ModelUnreachable,
)
from engine.llm.providers.embeddings import EmbeddingClient
from tests.fakes.openai_server import FakeModelServer, fake_embedding
from tests.fakes.static_server import static_server

TEXTS = ["The cave is dark.", "A lantern flickers.", "", "The cave is dark."]

# What a player must never see in an error message.
CODE_LIKE = re.compile(
    r"Traceback|File \"|Error\b|Exception|httpx|httpcore|\b[A-Z][a-z]+(?:[A-Z][a-z]+)+\b"
)


@pytest.fixture
async def embedder(fake_model: FakeModelServer) -> AsyncIterator[EmbeddingClient]:
    client = EmbeddingClient(fake_model.base_url, fake_model.embedding_model, timeout=0.5)
    try:
        yield client
    finally:
        await client.aclose()


async def expect_error(client: EmbeddingClient, kind: type[ModelError]) -> ModelError:
    with pytest.raises(kind) as info:
        await client.embed(["hello"])
    message = info.value.message
    assert message
    assert not CODE_LIKE.search(message), message
    return info.value


@contextmanager
def tiny_server(payload: Any) -> Iterator[str]:
    """A plain HTTP server answering every POST with the same JSON; yields a base URL."""
    with static_server(200, "application/json", json.dumps(payload).encode()) as url:
        yield f"{url}/v1"


# --------------------------------------------------------------------------- vectors


async def test_shape_and_dtype(fake_model: FakeModelServer, embedder: EmbeddingClient) -> None:
    matrix = await embedder.embed(TEXTS)
    assert matrix.shape == (len(TEXTS), fake_model.embedding_dim)
    assert matrix.dtype == np.float32
    (body,) = fake_model.requests
    assert body["_path"] == "/v1/embeddings"
    assert body["model"] == fake_model.embedding_model
    assert body["input"] == TEXTS


async def test_rows_follow_the_input_order(
    fake_model: FakeModelServer, embedder: EmbeddingClient
) -> None:
    matrix = await embedder.embed(TEXTS)
    for row, text in zip(matrix, TEXTS, strict=True):
        expected = np.asarray(fake_embedding(text, fake_model.embedding_dim), dtype=np.float32)
        np.testing.assert_array_equal(row, expected)
    np.testing.assert_array_equal(matrix[0], matrix[3])  # same text, same vector
    assert not np.array_equal(matrix[0], matrix[1])


async def test_same_text_same_vector_across_calls(embedder: EmbeddingClient) -> None:
    first = await embedder.embed(["The cave is dark."])
    second = await embedder.embed(["Something else", "The cave is dark."])
    np.testing.assert_array_equal(first[0], second[1])


async def test_rows_are_put_back_in_index_order() -> None:
    # Servers may list the rows in any order; "index" says which input each belongs to.
    payload = {
        "data": [
            {"index": 2, "embedding": [2.0, 2.0]},
            {"index": 0, "embedding": [0.0, 0.0]},
            {"index": 1, "embedding": [1.0, 1.0]},
        ]
    }
    with tiny_server(payload) as url:
        client = EmbeddingClient(url, "any", timeout=2)
        try:
            matrix = await client.embed(["a", "b", "c"])
        finally:
            await client.aclose()
    np.testing.assert_array_equal(matrix, np.asarray([[0, 0], [1, 1], [2, 2]], np.float32))


@pytest.mark.parametrize(
    "payload",
    [
        {"data": [{"index": 0, "embedding": [1.0]}]},  # one vector for two texts
        {"data": [{"index": 0, "embedding": [1.0, 2.0]}, {"index": 1, "embedding": [1.0]}]},
        {"data": "nope"},
        {"object": "list"},
        ["not", "an", "object"],
    ],
)
async def test_unreadable_replies_are_bad_replies(payload: Any) -> None:
    with tiny_server(payload) as url:
        client = EmbeddingClient(url, "any", timeout=2)
        try:
            with pytest.raises(ModelBadReply) as info:
                await client.embed(["a", "b"])
        finally:
            await client.aclose()
    assert info.value.message
    assert not CODE_LIKE.search(info.value.message)


async def test_empty_input_is_an_empty_array_without_a_request(
    fake_model: FakeModelServer, embedder: EmbeddingClient
) -> None:
    matrix = await embedder.embed([])
    assert isinstance(matrix, np.ndarray)
    assert matrix.shape[0] == 0
    assert matrix.size == 0
    assert matrix.dtype == np.float32
    assert fake_model.requests == []


# --------------------------------------------------------------------------- faults


async def test_wrong_model_is_not_found(fake_model: FakeModelServer) -> None:
    client = EmbeddingClient(fake_model.base_url, "no-such-embedder", timeout=2)
    try:
        raised = await expect_error(client, ModelNotFound)
    finally:
        await client.aclose()
    assert "'no-such-embedder'" in raised.message


async def test_server_error(fake_model: FakeModelServer, embedder: EmbeddingClient) -> None:
    fake_model.queue_embedding_fault("500")
    raised = await expect_error(embedder, ModelServerError)
    assert "500" in raised.message
    # The fault was one-off: the next request works.
    assert (await embedder.embed(["hello"])).shape == (1, fake_model.embedding_dim)


async def test_rate_limited(fake_model: FakeModelServer, embedder: EmbeddingClient) -> None:
    fake_model.queue_embedding_fault("429", retry_after=7)
    raised = await expect_error(embedder, ModelRateLimited)
    assert isinstance(raised, ModelRateLimited)
    assert raised.retry_after == 7.0


async def test_timeout(fake_model: FakeModelServer, embedder: EmbeddingClient) -> None:
    fake_model.queue_embedding_fault("timeout")
    await expect_error(embedder, ModelTimedOut)


async def test_api_key() -> None:
    with FakeModelServer(api_key="sk-test") as fake:
        right = EmbeddingClient(fake.base_url, fake.embedding_model, api_key="sk-test", timeout=2)
        wrong = EmbeddingClient(fake.base_url, fake.embedding_model, api_key="sk-bad", timeout=2)
        try:
            assert (await right.embed(["hi"])).shape == (1, fake.embedding_dim)
            assert fake.requests[0]["_headers"]["authorization"] == "Bearer sk-test"
            await expect_error(wrong, ModelKeyRefused)
        finally:
            await right.aclose()
            await wrong.aclose()


async def test_unreachable() -> None:
    client = EmbeddingClient("http://127.0.0.1:9/v1", "any", timeout=2)
    try:
        raised = await expect_error(client, ModelUnreachable)
    finally:
        await client.aclose()
    assert "127.0.0.1:9" in raised.message


async def test_address_without_scheme() -> None:
    client = EmbeddingClient("localhost:9/v1", "any", timeout=2)
    try:
        raised = await expect_error(client, ModelUnreachable)
    finally:
        await client.aclose()
    assert "http://" in raised.message
