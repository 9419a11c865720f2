"""What every chat provider offers, and the checks every reply goes through."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from typing import Literal, Protocol

from engine.errors import ModelEmptyReply, ModelReplyCutOff, ReasoningExhausted
from engine.llm.providers.dialects import Dialect, SamplingSent, sampling_for
from engine.platform.events import ProviderChunk, ReasoningDelta, StreamEnd, TextDelta


@dataclass(frozen=True, slots=True)
class ChatMessage:
    role: Literal["system", "user", "assistant"]
    content: str


@dataclass(frozen=True, slots=True)
class GenerationParams:
    max_tokens: int = 300
    temperature: float = 0.8
    # The sampling settings below, None where unset (the server's own default): each goes only
    # to a server that takes it (``sampling``; ``engine.llm.providers.dialects``).
    top_p: float | None = None
    min_p: float | None = None
    repetition_penalty: float | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    stop: tuple[str, ...] = ()
    #: Words and phrases the reply must not hold (the banned words where the adventure runs,
    #: lower-case): a provider that can bans their tokens (``logit_bias``); the output is
    #: checked whatever it did.
    avoid: tuple[str, ...] = ()

    def sampling(self, dialect: Dialect) -> SamplingSent:
        """The sampling settings as a server of ``dialect`` takes them."""
        return sampling_for(
            dialect,
            top_p=self.top_p,
            min_p=self.min_p,
            repetition_penalty=self.repetition_penalty,
            presence_penalty=self.presence_penalty,
            frequency_penalty=self.frequency_penalty,
            stop=self.stop,
        )


@dataclass(frozen=True, slots=True)
class ReplyLimits:
    """The most one reply may take, whatever the server does.

    A model that never stops (a sampling loop, a server that ignores ``max_tokens``) would
    otherwise hold its turn, the adventure's lease and the channel's messages for ever: the
    client's read timeout bounds only the silence between two pieces, and a steady stream has
    none. Both count from the request and cover the reasoning trace as well as the story.
    """

    #: Wall-clock seconds from the request to the reply's end.
    seconds: float = 180.0
    #: Characters of text and reasoning together.
    chars: int = 20_000


class ChatProvider(Protocol):
    """A model that streams a reply to a list of chat messages."""

    #: A name for logs and Insights ("llama3.1:8b at localhost:11434", "SmolLM2-135M (local)").
    label: str
    #: Which sampling settings it takes (``engine.llm.providers.dialects``).
    dialect: Dialect

    def stream(
        self, messages: Sequence[ChatMessage], params: GenerationParams
    ) -> AsyncGenerator[ProviderChunk, None]:
        """Yield deltas in order and end with exactly one ``StreamEnd``.

        Raises a ``ModelError`` subclass with a player-readable message on failure, and
        ``ModelReplyCutOff`` when the reply passes the provider's ``ReplyLimits``. Closing the
        iterator (or cancelling the task consuming it) stops generation.
        """
        ...

    async def aclose(self) -> None: ...


class ThinkTagSplitter:
    """Separates ``<think>…</think>`` traces that some servers leave inside the content.

    Ollama and llama.cpp send reasoning in a separate field for models they know, but pass the
    raw tags through for others. The tags can be split across deltas, so this keeps a small
    tail that might be the start of a tag.
    """

    OPEN, CLOSE = "<think>", "</think>"

    def __init__(self) -> None:
        self._pending = ""
        self._inside = False
        self._seen_text = False

    def feed(self, piece: str) -> list[TextDelta | ReasoningDelta]:
        self._pending += piece
        out: list[TextDelta | ReasoningDelta] = []
        while self._pending:
            tag = self.CLOSE if self._inside else self.OPEN
            at = self._pending.find(tag)
            # A think block only counts at the start of the reply (before any story text):
            # "<think>" later on is the story's own business.
            if not self._inside and self._seen_text:
                self._emit(out, self._pending)
                self._pending = ""
                break
            if at >= 0 and not self._inside and self._pending[:at].strip():
                # Story text comes before this "<think>" in the same piece, so the tag is
                # part of the story (as it would be had the text arrived in its own piece).
                self._emit(out, self._pending)
                self._pending = ""
                break
            if at >= 0:
                self._emit(out, self._pending[:at])
                self._pending = self._pending[at + len(tag) :]
                self._inside = not self._inside
                continue
            keep = _partial_suffix(self._pending, tag)
            self._emit(out, self._pending[: len(self._pending) - keep])
            self._pending = self._pending[len(self._pending) - keep :]
            break
        return out

    def flush(self) -> list[TextDelta | ReasoningDelta]:
        out: list[TextDelta | ReasoningDelta] = []
        self._emit(out, self._pending)
        self._pending = ""
        return out

    def _emit(self, out: list[TextDelta | ReasoningDelta], text: str) -> None:
        if not text:
            return
        if self._inside:
            out.append(ReasoningDelta(text))
        elif self._seen_text or text.strip():
            # Whitespace between "</think>" and the story is not story.
            if not self._seen_text:
                text = text.lstrip()
            self._seen_text = True
            out.append(TextDelta(text))


def _partial_suffix(text: str, tag: str) -> int:
    """Length of the longest suffix of ``text`` that is a proper prefix of ``tag``."""
    for n in range(min(len(tag) - 1, len(text)), 0, -1):
        if text.endswith(tag[:n]):
            return n
    return 0


async def checked(
    chunks: AsyncGenerator[ProviderChunk, None],
    params: GenerationParams,
    limits: ReplyLimits | None = None,
) -> AsyncGenerator[ProviderChunk, None]:
    """Pass a provider's stream through, failing clearly when it carried no story text, or when
    it passed ``limits``.

    A reply that ran out of tokens while still reasoning is told apart from a plain empty reply,
    because the fix differs: a larger output budget, or a model that does not reason. A reply
    over its limits is stopped here, for every provider alike: the provider's stream is closed
    (for an HTTP server, its connection dropped) before ``ModelReplyCutOff`` is raised.
    """
    saw_text = False
    saw_reasoning = False
    written = 0
    deadline = None if limits is None else asyncio.get_running_loop().time() + limits.seconds
    async with aclosing(chunks):
        while True:
            try:
                chunk = await _next_before(chunks, deadline, limits, started=written > 0)
            except StopAsyncIteration:
                return
            if isinstance(chunk, TextDelta | ReasoningDelta):
                written += len(chunk.text)
                if limits is not None and written > limits.chars:
                    raise ModelReplyCutOff(
                        f"The model kept writing past {limits.chars:,} characters, the most one "
                        "reply may have, so it was stopped. Nothing was saved; press Retry."
                    )
            if isinstance(chunk, TextDelta) and chunk.text.strip():
                saw_text = True
            elif isinstance(chunk, ReasoningDelta) and chunk.text.strip():
                saw_reasoning = True
            elif isinstance(chunk, StreamEnd) and not saw_text:
                if saw_reasoning and chunk.finish_reason == "length":
                    raise ReasoningExhausted(
                        f"The model spent its whole output budget ({params.max_tokens} tokens) "
                        "thinking and wrote no story. Raise the maximum output tokens "
                        "(CAMPFIRE_MAX_OUTPUT_TOKENS, or the adventure's setting) or choose a "
                        "model that does not reason."
                    )
                raise ModelEmptyReply(
                    "The model sent back an empty reply. Press Retry; if it keeps happening, "
                    "the model may need a different prompt or setting."
                )
            yield chunk


async def _next_before(
    chunks: AsyncGenerator[ProviderChunk, None],
    deadline: float | None,
    limits: ReplyLimits | None,
    *,
    started: bool,
) -> ProviderChunk:
    """The stream's next piece, or ``ModelReplyCutOff`` once ``deadline`` has passed.

    Only the wait for the provider is timed: the cancellation lands inside the provider's own
    await (an HTTP read, the embedded model's queue), never in the consumer's work between two
    pieces, which still counts towards the deadline.
    """
    if deadline is None or limits is None:
        return await anext(chunks)
    timeout = asyncio.timeout_at(deadline)
    try:
        async with timeout:
            if asyncio.get_running_loop().time() >= deadline:
                raise TimeoutError  # a piece ready at once would otherwise slip through
            return await anext(chunks)
    except TimeoutError:
        if not timeout.expired() and asyncio.get_running_loop().time() < deadline:
            raise
        what = "was still writing after" if started else "had not answered in"
        raise ModelReplyCutOff(
            f"The model {what} {_duration(limits.seconds)}, the most one reply may take, so it "
            "was stopped. Nothing was saved; press Retry."
        ) from None


def _duration(seconds: float) -> str:
    if seconds >= 60 and seconds % 60 == 0:
        minutes = int(seconds // 60)
        return f"{minutes} minute{'s' if minutes != 1 else ''}"
    return f"{seconds:g} second{'s' if seconds != 1 else ''}"


async def whole_text(
    provider: ChatProvider,
    messages: Sequence[ChatMessage],
    params: GenerationParams,
    limits: ReplyLimits | None = None,
) -> str:
    """A reply read whole, for work that shows no stream (memories, recaps, cards): its text,
    through ``checked`` (an empty reply, a reply past ``limits``, raise as for a turn)."""
    pieces: list[str] = []
    async with aclosing(checked(provider.stream(messages, params), params, limits)) as chunks:
        async for chunk in chunks:
            if isinstance(chunk, TextDelta):
                pieces.append(chunk.text)
    return "".join(pieces)
