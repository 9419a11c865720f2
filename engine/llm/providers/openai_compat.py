"""A streaming client for any OpenAI-compatible chat-completions endpoint.

Ollama, llama.cpp's server, vLLM, LM Studio, OpenRouter and OpenAI all speak this dialect; they
differ in where a reasoning trace goes (``reasoning_content``, ``reasoning`` or inline
``<think>`` tags), all of which end up as ``ReasoningDelta`` here.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Sequence
from typing import Any

import httpx

from engine.errors import (
    ModelBadReply,
    ModelError,
    ModelServerError,
)
from engine.llm.providers.base import (
    ChatMessage,
    GenerationParams,
    ReplyLimits,
    ThinkTagSplitter,
    checked,
)
from engine.llm.providers.dialects import Dialect, dialect_for
from engine.llm.providers.endpoint_policy import EndpointPolicy, guarded_client
from engine.llm.providers.http_errors import (
    TRANSPORT_ERRORS,
    Endpoint,
    broken_off,
    error_body,
    error_message,
    status_error,
    transport_error,
)
from engine.llm.providers.logit_bias import tiktoken_bias
from engine.llm.providers.sse import EventTooLarge, events, is_event_stream
from engine.llm.providers.tls import default_tls
from engine.platform.events import ProviderChunk, ReasoningDelta, StreamEnd, TextDelta, Usage

REASONING_FIELDS = ("reasoning_content", "reasoning")

#: Where the operator's model server is, as players are told it.
OPERATORS_ADDRESS = "the operator's address"


class OpenAICompatibleProvider:
    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout: float = 60.0,
        connect_timeout: float = 10.0,
        limits: ReplyLimits | None = None,
        client: httpx.AsyncClient | None = None,
        policy: EndpointPolicy | None = None,
        private_address: bool = False,
        tokenizer: str | None = None,
        dialect: Dialect | None = None,
    ) -> None:
        """``policy``: the endpoint is a server's or player's choice, so every connection (and
        each redirect's) is checked by it (``engine.llm.providers.endpoint_policy``); the
        operator's own endpoint has none. ``private_address``: the operator's endpoint, whose
        host and port (often an internal one) no player is told, in Insights, ``/model show``
        or an error. ``tokenizer``: the endpoint's tokenizer as the operator named it
        (``CAMPFIRE_MODEL_TOKENIZER``, one of ``logit_bias.TOKENIZERS``): only then are banned
        words' tokens sent as ``logit_bias``, ids in another tokenizer banning other words.
        ``dialect``: which sampling settings the server takes (the operator's kind,
        ``CAMPFIRE_MODEL_KIND``); None: known by its host (``dialects.dialect_for``)."""
        self.tokenizer = tokenizer
        self.dialect = dialect or dialect_for(base_url)
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.endpoint = Endpoint(
            self.base_url,
            model,
            "model",
            api_key=api_key,
            shown_as=OPERATORS_ADDRESS if private_address else None,
        )
        # Players see the label (Insights, /model show): the host of their own endpoint,
        # never the URL's credentials, and only the model's name on the operator's.
        self.host = self.endpoint.host
        self.label = model if private_address else f"{model} at {self.host}"
        self.limits = limits or ReplyLimits()
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        # ``read`` bounds the silence between two chunks, not the whole reply: a long story
        # streamed steadily never times out, a server that stops sending does. The whole
        # reply is bounded by ``limits``, in ``checked``.
        timeouts = httpx.Timeout(timeout, connect=connect_timeout)
        if client is None and policy is not None:
            client = guarded_client(policy, headers=headers, timeout=timeouts)
        self._client = client or httpx.AsyncClient(
            headers=headers, timeout=timeouts, verify=default_tls()
        )

    async def aclose(self) -> None:
        await self._client.aclose()

    def stream(
        self, messages: Sequence[ChatMessage], params: GenerationParams
    ) -> AsyncGenerator[ProviderChunk, None]:
        return checked(self._stream(messages, params), params, self.limits)

    def _body(self, messages: Sequence[ChatMessage], params: GenerationParams) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": m.role, "content": m.content} for m in messages],
            "stream": True,
            "stream_options": {"include_usage": True},
            "max_tokens": params.max_tokens,
            "temperature": params.temperature,
        }
        body.update(params.sampling(self.dialect).fields)
        if params.avoid and self.tokenizer:
            bias = tiktoken_bias(params.avoid, self.tokenizer)
            if bias:
                body["logit_bias"] = bias
        return body

    async def _stream(
        self, messages: Sequence[ChatMessage], params: GenerationParams
    ) -> AsyncGenerator[ProviderChunk, None]:
        url = f"{self.base_url}/chat/completions"
        splitter = ThinkTagSplitter()
        finish_reason: str | None = None
        usage: Usage | None = None
        done = False
        try:
            async with self._client.stream(
                "POST", url, json=self._body(messages, params), headers=STREAM_HEADERS
            ) as response:
                if response.status_code >= 400:
                    raise status_error(self.endpoint, response, await error_body(response))
                if not is_event_stream(response):
                    # A 200 that is not an event stream: a proxy's HTML page, say.
                    raise ModelBadReply(
                        f"The server at {self.host} did not answer as a streaming model "
                        "server. Check the endpoint URL (it usually ends in /v1)."
                    )
                async for sse in events(response):
                    if sse.data.strip() == "[DONE]":
                        done = True
                        break
                    chunk = self._chunk(sse.data)
                    for delta in _deltas(chunk, splitter):
                        yield delta
                    finish_reason = _finish_reason(chunk) or finish_reason
                    usage = _usage(chunk) or usage
            if not done and finish_reason is None:
                # Without chunked encoding a dropped connection looks like a body that simply
                # ends; every server marks a finished reply with a finish reason or [DONE].
                raise broken_off(self.endpoint)
        except ModelError:
            raise
        except EventTooLarge as error:
            raise ModelBadReply(
                f"The model server at {self.host} sent {error}, more than a reply holds. "
                "Press Retry."
            ) from None
        except TRANSPORT_ERRORS as error:
            raise transport_error(self.endpoint, error) from None
        for delta in splitter.flush():
            yield delta
        yield StreamEnd(finish_reason=finish_reason, usage=usage)

    def _chunk(self, data: str) -> Any:
        """One event's JSON (odd shapes are skipped by the readers below); unreadable JSON
        refuses the reply. Bounded in size by ``events``, so it is parsed on the event loop;
        nesting deep enough to exhaust the parser's recursion is unreadable too."""
        try:
            chunk = json.loads(data)
        except (json.JSONDecodeError, RecursionError):
            raise ModelBadReply(
                f"The model server at {self.host} sent a piece of its reply that "
                "Campfire could not read. Press Retry."
            ) from None
        if isinstance(chunk, dict) and "error" in chunk:
            raise ModelServerError(
                f"The model server at {self.host} reported an error mid-reply: "
                f"{self.endpoint.said(error_message(chunk))}"
            )
        return chunk


#: What a streamed request asks for.
STREAM_HEADERS = {"Accept": "text/event-stream", "Cache-Control": "no-store"}


def _deltas(chunk: Any, splitter: ThinkTagSplitter) -> list[TextDelta | ReasoningDelta]:
    out: list[TextDelta | ReasoningDelta] = []
    if not isinstance(chunk, dict):
        return out
    for choice in _choices(chunk):
        delta = choice.get("delta")
        if not isinstance(delta, dict):
            continue
        for field in REASONING_FIELDS:
            piece = delta.get(field)
            if isinstance(piece, str) and piece:
                out.append(ReasoningDelta(piece))
        content = delta.get("content")
        if isinstance(content, str) and content:
            out.extend(splitter.feed(content))
    return out


def _choices(chunk: Any) -> list[dict[str, Any]]:
    """The well-formed choices of a chunk; a server's odd shapes are skipped, not crashed on."""
    choices = chunk.get("choices") if isinstance(chunk, dict) else None
    if not isinstance(choices, list):
        return []
    return [choice for choice in choices if isinstance(choice, dict)]


def _finish_reason(chunk: Any) -> str | None:
    for choice in _choices(chunk):
        if choice.get("finish_reason"):
            return str(choice["finish_reason"])
    return None


def _usage(chunk: Any) -> Usage | None:
    raw = chunk.get("usage") if isinstance(chunk, dict) else None
    if not isinstance(raw, dict):
        return None
    try:
        counts = [int(raw.get(name) or 0) for name in ("prompt_tokens", "completion_tokens")]
    except (TypeError, ValueError, OverflowError):  # OverflowError: 1e400 reads as infinity
        return None
    # Held to what a reply could cost: the counts are added to the day's spend, in a column.
    prompt, completion = (min(max(0, count), MAX_USAGE_TOKENS) for count in counts)
    cached = _cached(raw, chunk.get("timings"))
    return Usage(prompt, completion, None if cached is None else min(cached, prompt))


def _cached(usage: dict[str, Any], timings: Any) -> int | None:
    """The prompt tokens the server served from its prefix cache, as providers report them in
    their usage (None: it did not say). Each provider names the figure its own way:

    * ``usage.prompt_tokens_details.cached_tokens``: OpenAI, OpenRouter, vLLM, and llama.cpp's
      server in its OpenAI-compatible answers;
    * ``usage.prompt_cache_hit_tokens``: DeepSeek;
    * ``usage.cache_read_input_tokens``: Anthropic's figure, as proxies pass it through;
    * ``usage.cached_tokens``: other OpenAI-compatible layers;
    * ``timings.cache_n`` beside the usage: llama.cpp's server in its own terms.
    """
    details = usage.get("prompt_tokens_details")
    candidates = [
        details.get("cached_tokens") if isinstance(details, dict) else None,
        usage.get("prompt_cache_hit_tokens"),
        usage.get("cache_read_input_tokens"),
        usage.get("cached_tokens"),
        timings.get("cache_n") if isinstance(timings, dict) else None,
    ]
    for value in candidates:
        # A figure that is not a whole number is no figure (bool is an int, and no count).
        if isinstance(value, int) and not isinstance(value, bool):
            return min(max(0, value), MAX_USAGE_TOKENS)
    return None


#: The most tokens one reply's usage is believed to count, each of prompt and completion.
MAX_USAGE_TOKENS = 10_000_000
