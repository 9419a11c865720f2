"""Which model an adventure's work goes to: its narration, and its background work.

The turn engine and the memory writer ask a resolver for a provider each time they need one,
with the adventure in hand, instead of holding one provider for everything: a server or a
player with a model of their own is then a resolver that looks at the adventure, and neither
of them changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from engine.providers.base import ChatProvider
from engine.storage.models import Adventure


class ProviderResolver(Protocol):
    def for_adventure(self, adventure: Adventure) -> ChatProvider:
        """The model that narrates ``adventure``."""
        ...

    def for_background(self, adventure: Adventure) -> ChatProvider | None:
        """The model that writes ``adventure``'s memories and summary; None when no model may
        be used for work the players did not ask for."""
        ...

    def is_operator_default(self, adventure: Adventure) -> bool:
        """Whether ``adventure`` narrates on the operator's own model, whose budget the caps
        guard (``engine.limits``); a server's or a player's own model is not capped."""
        ...


@dataclass(frozen=True, slots=True)
class OperatorDefault:
    """The operator's model for every adventure.

    ``background`` False keeps it for narration only (the operator pays for the model and may
    not want it used for work nobody asked for: ``CAMPFIRE_BACKGROUND_MODEL_USE``).
    """

    provider: ChatProvider
    background: bool = True

    def for_adventure(self, adventure: Adventure) -> ChatProvider:
        return self.provider

    def for_background(self, adventure: Adventure) -> ChatProvider | None:
        return self.provider if self.background else None

    def is_operator_default(self, adventure: Adventure) -> bool:
        return True
