"""What a model streams: typed pieces of its reply.

A provider streams ``TextDelta``/``ReasoningDelta`` and ends with ``StreamEnd`` with its
``Usage``. A turn forwards the deltas as they arrive, framed by the turn's own events
(``engine.turns.events``). None of these is a Discord object.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int
    #: Of the prompt, how many tokens the model did not read again: a prefix it had already
    #: evaluated (llama.cpp's reuse; OpenAI's ``prompt_tokens_details.cached_tokens``). None
    #: when the provider does not say.
    cached_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of story text, in order."""

    text: str


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    """A piece of the model's reasoning trace; never part of the story."""

    text: str


@dataclass(frozen=True, slots=True)
class StreamEnd:
    finish_reason: str | None
    usage: Usage | None


ProviderChunk = TextDelta | ReasoningDelta | StreamEnd
