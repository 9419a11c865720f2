"""Work the players did not ask for, on the operator's model, counted against the budget.

Memories, the story's summary and chapter recaps are written by a model after turns. On the
operator's model they spend what the operator pays for, so each call is counted, as turns are,
against the day's tokens of the adventure's host and its server (``engine.people.limits``):
before a call, work whose player or server has used the day's tokens waits for the next day;
after it, what the call cost (the provider's count, or Campfire's own of the prompt and of what
came back) is added. Background work is bounded by the turns that ask for it (a memory every
few actions, a recap per chapter), so it is counted rather than reserved.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence

from engine.llm.providers.base import ChatMessage, ChatProvider, GenerationParams
from engine.people.limits import Charge, UsageLimits
from engine.platform.events import ProviderChunk, StreamEnd, TextDelta, Usage
from engine.prompt.tokens import tokens_in
from engine.storage.models import Adventure


def charge_of(adventure: Adventure) -> Charge:
    """Whom an adventure's background work is counted against: its host and its server."""
    return Charge(adventure.host_id or adventure.owner_id, adventure.server_id)


class MeteredProvider:
    """A provider whose every call's cost is counted against ``charge``."""

    def __init__(self, provider: ChatProvider, limits: UsageLimits, charge: Charge) -> None:
        self.provider = provider
        self.limits = limits
        self.charge = charge
        self.label = provider.label
        self.dialect = provider.dialect

    def stream(
        self, messages: Sequence[ChatMessage], params: GenerationParams
    ) -> AsyncGenerator[ProviderChunk, None]:
        return self._counted(messages, params)

    async def _counted(
        self, messages: Sequence[ChatMessage], params: GenerationParams
    ) -> AsyncGenerator[ProviderChunk, None]:
        usage: Usage | None = None
        written: list[str] = []
        answered = False
        try:
            async for chunk in self.provider.stream(messages, params):
                answered = True
                if isinstance(chunk, TextDelta):
                    written.append(chunk.text)
                elif isinstance(chunk, StreamEnd):
                    usage = chunk.usage
                yield chunk
        finally:
            if answered:
                if usage is None:
                    prompt = sum(tokens_in(message.content) for message in messages)
                    usage = Usage(prompt, tokens_in("".join(written)))
                await self.limits.count_background(self.charge, usage)

    async def aclose(self) -> None:
        """The provider is the resolver's, closed with it."""
