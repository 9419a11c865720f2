"""A client for OpenAI-compatible ``/moderations`` endpoints (the operator's, when configured).

The request is ``{"model", "input": [texts]}``; the answer holds one result per text, each with
``flagged`` and ``categories`` (a boolean per category, such as ``violence/graphic`` or
``sexual/minors``): OpenAI's API reference, "Moderations". Which flagged categories matter is
the rating's to say (``engine.turns.moderation``), not this client's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import httpx

from engine.errors import ModelBadReply
from engine.llm.providers.http_errors import Endpoint, post_answer
from engine.llm.providers.tls import default_tls


@dataclass(frozen=True)
class Verdict:
    flagged: bool
    #: The categories the checker flagged (its own names).
    categories: frozenset[str] = frozenset()


class ModerationClient:
    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout: float = 10.0,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.timeout = timeout
        self.endpoint = Endpoint(self.base_url, model, "moderation model", api_key=api_key)
        self.host = self.endpoint.host
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = client or httpx.AsyncClient(
            headers=headers, timeout=timeout, verify=default_tls()
        )

    async def aclose(self) -> None:
        await self._client.aclose()

    async def check(self, texts: Sequence[str]) -> list[Verdict]:
        """One verdict per text, in the order given. Raises a ``ModelError`` when the checker
        fails or does not answer within ``timeout`` (the caller decides what that means)."""
        response = await post_answer(
            self._client,
            self.endpoint,
            f"{self.base_url}/moderations",
            {"model": self.model, "input": list(texts)},
            self.timeout,
        )
        try:
            results = response.json()["results"]
            verdicts = [
                Verdict(
                    bool(result["flagged"]),
                    frozenset(
                        name for name, on in (result.get("categories") or {}).items() if on is True
                    ),
                )
                for result in results
            ]
        except (ValueError, KeyError, TypeError, AttributeError):
            raise ModelBadReply(
                f"The moderation server at {self.host} sent a reply Campfire could not read."
            ) from None
        if len(verdicts) != len(texts):
            raise ModelBadReply(
                f"The moderation server at {self.host} judged {len(verdicts)} texts of "
                f"{len(texts)}."
            )
        return verdicts
