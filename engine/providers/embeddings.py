"""A client for OpenAI-compatible ``/embeddings`` endpoints."""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import urlsplit

import httpx
import numpy as np

from engine.errors import (
    ModelBadReply,
    ModelKeyRefused,
    ModelNotFound,
    ModelRateLimited,
    ModelServerError,
    ModelTimedOut,
    ModelUnreachable,
)


class EmbeddingClient:
    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout: float = 30.0,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.host = urlsplit(self.base_url).netloc or self.base_url
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = client or httpx.AsyncClient(headers=headers, timeout=timeout)

    async def aclose(self) -> None:
        await self._client.aclose()

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One float32 row per text, in the order given."""
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        try:
            response = await self._client.post(
                f"{self.base_url}/embeddings", json={"model": self.model, "input": list(texts)}
            )
        except httpx.ConnectError:
            raise ModelUnreachable(f"Couldn't reach the embedding model at {self.host}.") from None
        except httpx.TimeoutException:
            raise ModelTimedOut(
                f"The embedding model at {self.host} did not answer in time."
            ) from None
        except (httpx.UnsupportedProtocol, httpx.InvalidURL):
            raise ModelUnreachable(
                f"'{self.base_url}' is not a usable embedding address. It should look like "
                "http://localhost:11434/v1."
            ) from None
        except httpx.HTTPError:
            raise ModelUnreachable(
                f"Talking to the embedding model at {self.host} failed. Is it running, and is "
                "the address right?"
            ) from None
        status = response.status_code
        if status in (401, 403):
            raise ModelKeyRefused(f"The embedding server at {self.host} refused the API key.")
        if status == 404:
            raise ModelNotFound(
                f"The embedding server at {self.host} has no model called '{self.model}'."
            )
        if status == 429:
            raise ModelRateLimited(
                f"The embedding model at {self.host} is rate limited right now.",
                retry_after=_float_or_none(response.headers.get("retry-after")),
            )
        if status >= 400:
            raise ModelServerError(f"The embedding server at {self.host} answered {status}.")
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


def _float_or_none(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None
