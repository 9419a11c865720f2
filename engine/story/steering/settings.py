"""The adventure's generation settings: how much the narrator reads, how long it may reply, and
how freely it writes. Unset ones fall back to the defaults the service was built with. Beside
them, whether plain messages in the adventure's place play as actions (message play)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, TypeVar

from engine.errors import InvalidInput
from engine.llm.ceilings import Ceilings
from engine.people.access.checks import check_may_steer
from engine.people.access.rules import active_adventure, adventure_here

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession

    from engine.llm.providers.resolver import ProviderResolver
    from engine.people.access.rules import Actor
    from engine.storage.database import Database
    from engine.storage.models import Adventure

CONTEXT_TOKENS_RANGE = (512, 1_000_000)
MAX_OUTPUT_TOKENS_RANGE = (16, 32_768)
TEMPERATURE_RANGE = (0.0, 2.0)
#: Room the context must leave beyond the reply (the prompt needs some space of its own).
CONTEXT_HEADROOM = 256

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class GenerationDefaults:
    """What an adventure falls back to when it sets nothing (the server's or operator's)."""

    context_tokens: int
    max_output_tokens: int
    temperature: float


@dataclass(frozen=True, slots=True)
class AdventureSettings:
    adventure_id: int
    adventure_title: str
    context_tokens: int | None  # None: the default
    max_output_tokens: int | None
    temperature: float | None
    defaults: GenerationDefaults
    #: Plain messages play as actions here (off unless the host turns it on).
    message_play: bool = False
    #: What the operator's ceilings hold these settings to, this adventure narrating on the
    #: operator's model (``engine.llm.ceilings``): a note each; empty when none binds.
    held: tuple[str, ...] = ()

    @property
    def effective_context_tokens(self) -> int:
        return _or(self.context_tokens, self.defaults.context_tokens)

    @property
    def effective_max_output_tokens(self) -> int:
        return _or(self.max_output_tokens, self.defaults.max_output_tokens)

    @property
    def effective_temperature(self) -> float:
        return _or(self.temperature, self.defaults.temperature)


def _or(value: T | None, default: T) -> T:
    return default if value is None else value


class GenerationSettings:
    """What the front end calls for /adventure settings."""

    def __init__(
        self,
        db: Database,
        defaults: GenerationDefaults,
        *,
        providers: ProviderResolver | None = None,
        ceilings: Callable[[], Ceilings] | None = None,
    ) -> None:
        """``providers`` and ``ceilings``: which model an adventure narrates on, and the
        operator's ceilings on the operator's, so that the settings say when they are held to
        them (a turn holds them in any case)."""
        self.db = db
        self.defaults = defaults
        self.providers = providers
        self.ceilings = ceilings

    async def get(self, channel_id: int) -> AdventureSettings:
        """The adventure's generation settings and the defaults unset ones fall back to."""
        async with self.db.session() as session:
            adventure = await adventure_here(session, channel_id)
            return await self._settings_of(session, adventure)

    async def set(
        self,
        channel_id: int,
        actor: Actor,
        *,
        context_tokens: int | None = None,
        max_output_tokens: int | None = None,
        temperature: float | None = None,
        reset: bool = False,
        message_play: bool | None = None,
    ) -> AdventureSettings:
        """Set any of the three; ``reset`` first returns all three to the defaults (message
        play is not a generation setting: ``reset`` leaves it)."""
        _check_range("context_tokens", context_tokens, CONTEXT_TOKENS_RANGE)
        _check_range("max_output_tokens", max_output_tokens, MAX_OUTPUT_TOKENS_RANGE)
        _check_range("temperature", temperature, TEMPERATURE_RANGE)
        defaults = self.defaults
        async with self.db.transaction() as session:
            adventure = await adventure_here(session, channel_id, for_update=True)
            await check_may_steer(session, adventure, actor)
            new = {
                "context_tokens": None if reset else adventure.context_tokens,
                "max_output_tokens": None if reset else adventure.max_output_tokens,
                "temperature": None if reset else adventure.temperature,
            }
            given = {
                "context_tokens": context_tokens,
                "max_output_tokens": max_output_tokens,
                "temperature": temperature,
            }
            new.update({name: value for name, value in given.items() if value is not None})
            context = _or(new["context_tokens"], defaults.context_tokens)
            output = _or(new["max_output_tokens"], defaults.max_output_tokens)
            if context < output + CONTEXT_HEADROOM:
                raise InvalidInput(_headroom_message(context, output, new))
            for name, value in new.items():
                if getattr(adventure, name) != value:
                    setattr(adventure, name, value)
            if message_play is not None and adventure.message_play != message_play:
                adventure.message_play = message_play
            return await self._settings_of(session, adventure)

    async def message_play_here(self, channel_id: int) -> bool | None:
        """Whether plain messages play in ``channel_id``; None where no adventure runs."""
        async with self.db.session() as session:
            adventure = await active_adventure(session, channel_id)
            return None if adventure is None else adventure.message_play

    async def _settings_of(self, session: AsyncSession, adventure: Adventure) -> AdventureSettings:
        assert adventure.id is not None
        settings = AdventureSettings(
            adventure.id,
            adventure.title,
            adventure.context_tokens,
            adventure.max_output_tokens,
            adventure.temperature,
            self.defaults,
            adventure.message_play,
        )
        if self.providers is None or self.ceilings is None:
            return settings
        await self.providers.read(session, adventure)
        if not self.providers.is_operator_default(adventure):
            return settings
        _, _, held = self.ceilings().clamp(
            settings.effective_context_tokens, settings.effective_max_output_tokens
        )
        return replace(settings, held=held)


def _check_range(name: str, value: float | None, bounds: tuple[float, float]) -> None:
    if value is None:
        return
    low, high = bounds
    if not (math.isfinite(value) and low <= value <= high):
        raise InvalidInput(
            f"{name} must be between {_number(low)} and {_number(high)}; got {_number(value)}."
        )


def _headroom_message(context: int, output: int, new: dict[str, object]) -> str:
    def shown(name: str, value: int) -> str:
        return f"{value:,}" + (" (the default)" if new[name] is None else "")

    return (
        f"context_tokens ({shown('context_tokens', context)}) must be at least "
        f"max_output_tokens ({shown('max_output_tokens', output)}) + {CONTEXT_HEADROOM} = "
        f"{output + CONTEXT_HEADROOM:,}, so the story has room beside the reply. "
        "Raise context_tokens or lower max_output_tokens."
    )


def _number(value: float) -> str:
    if isinstance(value, float) and not value.is_integer():
        return f"{value:g}"
    return f"{int(value):,}"
