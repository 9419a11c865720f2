"""The adventure's generation settings: how much the narrator reads, how long it may reply, how
freely it writes (temperature, and the sampling players tune: top-p, min-p, the repetition,
presence and frequency penalties, stop strings: ``engine.llm.sampling``) and where its author's
note goes. Unset ones fall back to the defaults the service was built with, or the model
server's own. Beside them, whether plain messages in the adventure's place play as actions
(message play), and every how many turns the story proposes a card to its host
(``card_proposals``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, TypeVar

from engine.errors import InvalidInput
from engine.llm.ceilings import Ceilings
from engine.llm.providers.base import GenerationParams
from engine.llm.providers.dialects import Dialect
from engine.llm.sampling import (
    FREQUENCY_PENALTY_RANGE,
    MIN_P_RANGE,
    NOTE_DEPTH_RANGE,
    PRESENCE_PENALTY_RANGE,
    REPETITION_PENALTY_RANGE,
    TOP_P_RANGE,
    check_range,
    parse_stop_strings,
    turn_stops,
)
from engine.people.access.checks import check_may_steer
from engine.people.access.rules import active_adventure, adventure_here
from engine.story.steering.card_proposals import CARD_PROPOSALS_RANGE

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
    #: The operator's top-p (``CAMPFIRE_TOP_P``); None: the model server's own.
    top_p: float | None = None


#: The sampling settings an adventure may set, each with its range; None: unset.
SAMPLING_RANGES = {
    "top_p": TOP_P_RANGE,
    "min_p": MIN_P_RANGE,
    "repetition_penalty": REPETITION_PENALTY_RANGE,
    "presence_penalty": PRESENCE_PENALTY_RANGE,
    "frequency_penalty": FREQUENCY_PENALTY_RANGE,
}
#: Every generation setting ``reset`` returns to its default (message play is not one).
GENERATION_FIELDS = (
    "context_tokens",
    "max_output_tokens",
    "temperature",
    *SAMPLING_RANGES,
    "stop_strings",
    "authors_note_depth",
)


@dataclass(frozen=True, slots=True)
class Sampling:
    """An adventure's sampling settings beyond temperature; None: unset."""

    top_p: float | None = None
    min_p: float | None = None
    repetition_penalty: float | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    stop_strings: tuple[str, ...] = ()
    #: Entries from the end of the story its author's note goes; None: the system message.
    authors_note_depth: int | None = None


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
    #: Every how many turns a card is proposed to the host; 0: never (``card_proposals``).
    card_proposals: int = 0
    #: What the operator's ceilings hold these settings to, this adventure narrating on the
    #: operator's model (``engine.llm.ceilings``): a note each; empty when none binds.
    held: tuple[str, ...] = ()
    sampling: Sampling = Sampling()
    #: The kind of server its model runs on, and what it is not sent of the sampling settings,
    #: in words (``engine.llm.providers.dialects``); None: not known here.
    dialect: Dialect | None = None
    left_out: tuple[str, ...] = ()

    @property
    def effective_context_tokens(self) -> int:
        return _or(self.context_tokens, self.defaults.context_tokens)

    @property
    def effective_max_output_tokens(self) -> int:
        return _or(self.max_output_tokens, self.defaults.max_output_tokens)

    @property
    def effective_temperature(self) -> float:
        return _or(self.temperature, self.defaults.temperature)

    @property
    def effective_top_p(self) -> float | None:
        return _or(self.sampling.top_p, self.defaults.top_p)


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
        sampling: dict[str, float] | None = None,
        stop: str | None = None,
        note_depth: int | None = None,
        card_proposals: int | None = None,
    ) -> AdventureSettings:
        """Set any of them; ``reset`` first returns every generation setting to its default
        (message play is not one: ``reset`` leaves it). ``sampling``: settings named in
        ``SAMPLING_RANGES``; ``stop``: the stop strings as a JSON list (``[]`` clears them);
        ``note_depth``: entries from the end of the story the author's note goes;
        ``card_proposals``: every how many turns a card is proposed to the host (0: never; not
        a generation setting, so ``reset`` leaves it). Each is checked against its range
        before anything is read, a refusal naming the range."""
        check_range("context_tokens", context_tokens, CONTEXT_TOKENS_RANGE)
        check_range("max_output_tokens", max_output_tokens, MAX_OUTPUT_TOKENS_RANGE)
        check_range("temperature", temperature, TEMPERATURE_RANGE)
        for name, value in (sampling or {}).items():
            check_range(name, value, SAMPLING_RANGES[name])
        check_range("note_depth", note_depth, NOTE_DEPTH_RANGE)
        low, high = CARD_PROPOSALS_RANGE
        if card_proposals and not low <= card_proposals <= high:
            raise InvalidInput(
                f"card_proposals must be 0 (off) or between {low} and {high} turns; "
                f"got {card_proposals}."
            )
        given: dict[str, object] = {
            "context_tokens": context_tokens,
            "max_output_tokens": max_output_tokens,
            "temperature": temperature,
            **(sampling or {}),
            "stop_strings": None if stop is None else list(parse_stop_strings(stop)),
            "authors_note_depth": note_depth,
        }
        defaults = self.defaults
        async with self.db.transaction() as session:
            adventure = await adventure_here(session, channel_id, for_update=True)
            await check_may_steer(session, adventure, actor)
            new: dict[str, object] = {
                name: _unset(name) if reset else getattr(adventure, name)
                for name in GENERATION_FIELDS
            }
            new.update({name: value for name, value in given.items() if value is not None})
            context = _or(_int(new["context_tokens"]), defaults.context_tokens)
            output = _or(_int(new["max_output_tokens"]), defaults.max_output_tokens)
            if context < output + CONTEXT_HEADROOM:
                raise InvalidInput(_headroom_message(context, output, new))
            for name, value in new.items():
                if getattr(adventure, name) != value:
                    setattr(adventure, name, value)
            if message_play is not None and adventure.message_play != message_play:
                adventure.message_play = message_play
            if card_proposals is not None and adventure.card_proposals != card_proposals:
                adventure.card_proposals = card_proposals
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
            adventure.card_proposals,
            sampling=sampling_of(adventure),
        )
        if self.providers is None:
            return settings
        await self.providers.read(session, adventure)
        # What this adventure's model server is not sent of its sampling (Insights says so
        # turn by turn; here before a turn is played).
        dialect = self.providers.for_adventure(adventure).dialect
        settings = replace(settings, dialect=dialect, left_out=_left_out(settings, dialect))
        if self.ceilings is None or not self.providers.is_operator_default(adventure):
            return settings
        _, _, held = self.ceilings().clamp(
            settings.effective_context_tokens, settings.effective_max_output_tokens
        )
        return replace(settings, held=held)


def sampling_of(adventure: Adventure) -> Sampling:
    return Sampling(
        top_p=adventure.top_p,
        min_p=adventure.min_p,
        repetition_penalty=adventure.repetition_penalty,
        presence_penalty=adventure.presence_penalty,
        frequency_penalty=adventure.frequency_penalty,
        stop_strings=tuple(adventure.stop_strings),
        authors_note_depth=adventure.authors_note_depth,
    )


def _left_out(settings: AdventureSettings, dialect: Dialect) -> tuple[str, ...]:
    """What ``dialect``'s server is not sent of the adventure's sampling settings, with
    Campfire's own stop string first, as a turn sends them (``engine.turns.generate``)."""
    sampling = settings.sampling
    params = GenerationParams(
        top_p=settings.effective_top_p,
        min_p=sampling.min_p,
        repetition_penalty=sampling.repetition_penalty,
        presence_penalty=sampling.presence_penalty,
        frequency_penalty=sampling.frequency_penalty,
        stop=turn_stops(sampling.stop_strings),
    )
    return params.sampling(dialect).left_out


def _unset(name: str) -> object:
    """A generation setting's value when unset: the default's (None), or no stop strings."""
    return [] if name == "stop_strings" else None


def _int(value: object) -> int | None:
    return value if isinstance(value, int) else None


def _headroom_message(context: int, output: int, new: dict[str, object]) -> str:
    def shown(name: str, value: int) -> str:
        return f"{value:,}" + (" (the default)" if new[name] is None else "")

    return (
        f"context_tokens ({shown('context_tokens', context)}) must be at least "
        f"max_output_tokens ({shown('max_output_tokens', output)}) + {CONTEXT_HEADROOM} = "
        f"{output + CONTEXT_HEADROOM:,}, so the story has room beside the reply. "
        "Raise context_tokens or lower max_output_tokens."
    )
