"""Which model an adventure's work goes to: its narration, and its background work.

The turn engine and the memory writer ask a resolver for a provider each time they need one,
with the adventure in hand, instead of holding one provider for everything: a server or a
player with a model of their own is then a resolver that looks at the adventure, and neither
of them changes.

The choice is read from the database with the adventure (``read``, in the session that read
it), so a change made by ``/model`` in another process is seen by the next turn here; the
questions after that (``for_adventure``, ``for_background``, ``is_operator_default``) answer
from what was read, without a database of their own.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from sqlalchemy.ext.asyncio import AsyncSession

from engine.llm.model_choice import ModelChoice, choice_for
from engine.llm.providers.base import ChatProvider, ReplyLimits
from engine.llm.providers.endpoint_policy import EndpointPolicy
from engine.llm.providers.openai_compat import OpenAICompatibleProvider
from engine.platform.crypto import SecretBox
from engine.platform.redaction import mask_in_logs
from engine.storage.models import Adventure

log = logging.getLogger(__name__)


class ProviderResolver(Protocol):
    async def read(self, session: AsyncSession, adventure: Adventure) -> None:
        """Read which model ``adventure`` uses (its player's, its server's or the operator's)
        in ``session``; the methods below answer from the latest read of it."""
        ...

    def for_adventure(self, adventure: Adventure) -> ChatProvider:
        """The model that narrates ``adventure``."""
        ...

    def for_background(self, adventure: Adventure) -> ChatProvider | None:
        """The model that writes ``adventure``'s memories and summary; None when no model may
        be used for work the players did not ask for."""
        ...

    def is_operator_default(self, adventure: Adventure) -> bool:
        """Whether ``adventure``'s work goes to the operator's own model (whose use the
        operator pays for and the caps guard: ``engine.people.limits``), not a server's or a
        player's.
        Call ``read`` first, in the session that read the adventure: an adventure never read
        here counts as using the operator's model."""
        ...


@dataclass(frozen=True, slots=True)
class OperatorDefault:
    """The operator's model for every adventure.

    ``background`` False keeps it for narration only (the operator pays for the model and may
    not want it used for work nobody asked for: ``CAMPFIRE_BACKGROUND_MODEL_USE``).
    ``background_provider``: another client of the same model for that work (the embedded
    model's second context: the memory writer's prompts would otherwise replace the story's
    evaluated prompt, which the next turn reuses).
    """

    provider: ChatProvider
    background: bool = True
    background_provider: ChatProvider | None = None

    async def read(self, session: AsyncSession, adventure: Adventure) -> None:
        return None

    def for_adventure(self, adventure: Adventure) -> ChatProvider:
        return self.provider

    def for_background(self, adventure: Adventure) -> ChatProvider | None:
        if not self.background:
            return None
        return self.background_provider or self.provider

    def is_operator_default(self, adventure: Adventure) -> bool:
        return True

    async def aclose(self) -> None:
        await self.provider.aclose()
        if self.background_provider is not None:
            await self.background_provider.aclose()


@dataclass(frozen=True, slots=True)
class ModelLimits:
    """How a server's or player's model is talked to: the same bounds as the operator's."""

    timeout: float = 60.0
    reply: ReplyLimits = ReplyLimits()


#: Adventures whose latest choice this process remembers, and providers it keeps open.
CHOICES_KEPT = 10_000
PROVIDERS_KEPT = 256
#: A provider dropped from the cache is closed this long after (a turn may still stream on it).
CLOSE_AFTER_S = 600.0


class ChosenModels:
    """The player's own model (a DM adventure), else the server's, else the operator's.

    Per process, and safe so: providers are cached by what was stored (URL, model name and the
    key's ciphertext, as read with the adventure), never by server or player. A change made in
    another process stores other values, so the next read here names another cache entry and a
    new provider; the old one is simply no longer asked for. The choices remembered per
    adventure are only what the latest ``read`` found, and every turn reads again.
    """

    def __init__(
        self,
        default: OperatorDefault,
        secrets: SecretBox,
        policy: EndpointPolicy,
        limits: ModelLimits | None = None,
        *,
        build: Callable[[ModelChoice, str | None], ChatProvider] | None = None,
        whitelist: tuple[str, ...] = (),
    ) -> None:
        """``whitelist``: the models players may pick on the operator's own endpoint
        (``CAMPFIRE_MODEL_WHITELIST``; ``/model pick``)."""
        self.default = default
        self.whitelist = whitelist
        self.secrets = secrets
        self.policy = policy
        self.limits = limits or ModelLimits()
        self._build = build or self._openai_compatible
        self._choices: OrderedDict[int, ModelChoice | None] = OrderedDict()
        self._providers: OrderedDict[tuple[str, str, str | None], ChatProvider] = OrderedDict()

    async def read(self, session: AsyncSession, adventure: Adventure) -> None:
        if adventure.id is None:
            return
        self._choices[adventure.id] = await choice_for(session, adventure)
        self._choices.move_to_end(adventure.id)
        while len(self._choices) > CHOICES_KEPT:
            self._choices.popitem(last=False)

    def _choice(self, adventure: Adventure) -> ModelChoice | None:
        choice = self._choices.get(adventure.id) if adventure.id is not None else None
        if choice is not None and choice.on_operators_endpoint and not self.pickable(choice.model):
            return None  # no longer whitelisted (or no endpoint to pick on): the default
        return choice

    def offered(self) -> tuple[str, ...]:
        """The models a player may pick on the operator's endpoint: its own first."""
        operator = self.default.provider
        if not isinstance(operator, OpenAICompatibleProvider):
            return ()
        return tuple(dict.fromkeys((operator.model, *self.whitelist)))

    def pickable(self, model: str) -> bool:
        """Whether a player may pick ``model`` on the operator's endpoint: one the operator
        whitelisted, where the operator's model is an endpoint (the embedded one has no
        others)."""
        return model in self.whitelist and isinstance(
            self.default.provider, OpenAICompatibleProvider
        )

    def for_adventure(self, adventure: Adventure) -> ChatProvider:
        choice = self._choice(adventure)
        return self.default.provider if choice is None else self.provider_for(choice)

    def for_background(self, adventure: Adventure) -> ChatProvider | None:
        # A server's or player's own model serves their background work too (unless the server
        # forbids it: the memory writer reads that); CAMPFIRE_BACKGROUND_MODEL_USE is about the
        # operator's endpoint, a model picked on it included.
        choice = self._choice(adventure)
        if choice is None:
            return self.default.for_background(adventure)
        if choice.on_operators_endpoint and self.default.for_background(adventure) is None:
            return None
        return self.provider_for(choice)

    def is_operator_default(self, adventure: Adventure) -> bool:
        """The operator's endpoint: its default model, or one a player picked on it; either
        is the operator's to pay for, and capped."""
        choice = self._choice(adventure)
        return choice is None or choice.on_operators_endpoint

    def provider_for(self, choice: ModelChoice) -> ChatProvider:
        """The provider for a stored choice, built once per stored value in this process."""
        key = (choice.url, choice.model, choice.key_encrypted)
        provider = self._providers.get(key)
        if provider is None:
            api_key = self.secrets.decrypt(choice.key_encrypted) if choice.key_encrypted else None
            # A key decrypted to be used is masked in every log line from now on.
            mask_in_logs(api_key)
            provider = self._build(choice, api_key)
            self._providers[key] = provider
            while len(self._providers) > PROVIDERS_KEPT:
                _, old = self._providers.popitem(last=False)
                _close_later(old)
        self._providers.move_to_end(key)
        return provider

    def _openai_compatible(self, choice: ModelChoice, api_key: str | None) -> ChatProvider:
        operator = self.default.provider
        if choice.on_operators_endpoint and isinstance(operator, OpenAICompatibleProvider):
            # The operator's endpoint and key, with the model picked: no policy (the operator's
            # address is theirs to choose), and its address never named to players. No
            # tokenizer: CAMPFIRE_MODEL_TOKENIZER names CAMPFIRE_MODEL_NAME's, not this model's.
            return OpenAICompatibleProvider(
                operator.base_url,
                choice.model,
                api_key=operator.endpoint.api_key,
                timeout=self.limits.timeout,
                limits=self.limits.reply,
                private_address=True,
                # The operator's server, whatever model is picked on it: its kind is theirs.
                dialect=operator.dialect,
            )
        return OpenAICompatibleProvider(
            choice.url,
            choice.model,
            api_key=api_key,
            timeout=self.limits.timeout,
            limits=self.limits.reply,
            policy=self.policy,
        )

    async def aclose(self) -> None:
        providers = list(self._providers.values())
        self._providers.clear()
        for provider in providers:
            await provider.aclose()


_closing: set[asyncio.Task[None]] = set()


def _close_later(provider: ChatProvider) -> None:
    async def close() -> None:
        await asyncio.sleep(CLOSE_AFTER_S)
        await provider.aclose()

    try:
        task = asyncio.get_running_loop().create_task(close())
    except RuntimeError:
        return  # no loop: the process is ending, and its connections with it
    _closing.add(task)
    task.add_done_callback(_closing.discard)
