"""A client for OpenAI-compatible ``/embeddings`` endpoints."""

from __future__ import annotations

from collections.abc import Sequence

import httpx
import numpy as np

from engine.errors import ModelBadReply
from engine.llm.providers.base import ReplyLimits
from engine.llm.providers.http_errors import Endpoint, post_answer
from engine.llm.providers.tls import default_tls


class EmbeddingClient:
    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout: float = 30.0,
        limits: ReplyLimits | None = None,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.endpoint = Endpoint(self.base_url, model, "embedding model", api_key=api_key)
        self.host = self.endpoint.host
        # A turn waits for the query's vector: a server that trickles its answer must not hold
        # it longer than a model's reply may take (httpx's timeouts bound each read, not all).
        self.limits = limits or ReplyLimits()
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = client or httpx.AsyncClient(
            headers=headers, timeout=timeout, verify=default_tls()
        )

    async def aclose(self) -> None:
        await self._client.aclose()

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One float32 row per text, in the order given."""
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        response = await post_answer(
            self._client,
            self.endpoint,
            f"{self.base_url}/embeddings",
            {"model": self.model, "input": list(texts)},
            self.limits.seconds,
        )
        try:
            data = sorted(response.json()["data"], key=lambda row: row["index"])
            matrix = np.asarray([row["embedding"] for row in data], dtype=np.float32)
        except (ValueError, KeyError, TypeError):
            raise ModelBadReply(
                f"The embedding server at {self.host} sent a reply Campfire could not read."
            ) from None
        if matrix.ndim != 2 or matrix.shape[0] != len(texts):
            raise ModelBadReply(
                f"The embedding server at {self.host} sent {matrix.shape[0]} vectors for "
                f"{len(texts)} texts."
            )
        return matrix
