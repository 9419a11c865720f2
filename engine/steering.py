"""Steering an adventure: its author's note, plot essentials, AI instructions, story cards and
generation settings.

Every change edits the adventure's own copy (never the scenario it started from), in one
transaction, and touches nothing else: not the story version (buttons under the newest turn stay
valid), not the story. The next turn reads the new values when it builds its context.

Who may change these: in a server, the adventure's host and members who can manage the server;
in a DM, its player (``may_steer``). Anyone may read the card list and the settings.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, TypeVar

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from engine.errors import InvalidInput, NotAllowed, NotFound, StoryMovedOn
from engine.storage.models import Adventure, AdventureCard, User

if TYPE_CHECKING:
    from engine.access import Actor
    from engine.storage.database import Database

#: The longest steering text (author's note, plot essentials, AI instructions): what one
#: Discord text input holds, so that whatever is stored can be edited in a form again.
TEXT_MAX_CHARS = 4000

CARD_TITLE_MAX = 100
CARD_KEYS_MAX = 500
CARD_ENTRY_MAX = 4000
CARD_TYPE_MAX = 32
DEFAULT_CARD_TYPE = "custom"

CONTEXT_TOKENS_RANGE = (512, 1_000_000)
MAX_OUTPUT_TOKENS_RANGE = (16, 32_768)
TEMPERATURE_RANGE = (0.0, 2.0)
#: Room the context must leave beyond the reply (the prompt needs some space of its own).
CONTEXT_HEADROOM = 256

T = TypeVar("T")

NO_ADVENTURE = "There is no adventure running here. Start one with /start."


class SteeringField(StrEnum):
    AUTHORS_NOTE = "authors_note"
    PLOT_ESSENTIALS = "plot_essentials"
    AI_INSTRUCTIONS = "ai_instructions"

    @property
    def label(self) -> str:
        return _LABELS[self]


_LABELS = {
    SteeringField.AUTHORS_NOTE: "Author's note",
    SteeringField.PLOT_ESSENTIALS: "Plot essentials",
    SteeringField.AI_INSTRUCTIONS: "AI instructions",
}


# --- who may steer -----------------------------------------------------------------------------


def may_steer(adventure: Adventure, user_id: int, is_manager: bool) -> bool:
    """Whether ``user_id`` may change this adventure's steering, cards and settings.

    In a server: its host, and members with the Manage Server permission (``is_manager``). In a
    DM: its player (the adventure's owner and host); server permissions mean nothing there.
    """
    if adventure.server_id is None:
        return user_id in {adventure.owner_id, adventure.host_id} - {None}
    return is_manager or (adventure.host_id is not None and user_id == adventure.host_id)


def who_may_steer(adventure: Adventure, host_name: str = "") -> str:
    """The refusal a player reads: who can make the change instead."""
    if adventure.server_id is None:
        return "Only this adventure's player can change it."
    if adventure.host_id is None:
        return (
            "Only members with the Manage Server permission can change this adventure "
            "(its host has left)."
        )
    if host_name:
        return (
            f"Only {host_name} (this adventure's host) and members with the Manage Server "
            "permission can change this adventure."
        )
    return "Only this adventure's host and members with the Manage Server permission can change it."


# --- results -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Steering:
    """One steering text as it stands, for a form prefilled with it."""

    adventure_id: int
    adventure_title: str
    field: SteeringField
    text: str

    @property
    def label(self) -> str:
        return self.field.label


@dataclass(frozen=True, slots=True)
class SteeringChange:
    adventure_id: int
    field: SteeringField
    text: str
    previous: str

    @property
    def cleared(self) -> bool:
        return not self.text

    @property
    def unchanged(self) -> bool:
        return self.text == self.previous

    @property
    def message(self) -> str:
        label = self.field.label
        if self.cleared:
            if not self.previous:
                return f"{label} was already empty; nothing changed."
            return f"{label} cleared; it applies from the next turn."
        if self.unchanged:
            return f"{label} unchanged."
        return f"{label} updated; it applies from the next turn."


@dataclass(frozen=True, slots=True)
class CardDraft:
    """What a player typed for a story card (validated by ``add_card``/``edit_card``)."""

    title: str
    keys: str = ""
    entry: str = ""
    type: str = DEFAULT_CARD_TYPE
    always_on: bool = False


@dataclass(frozen=True, slots=True)
class CardView:
    id: int
    adventure_id: int
    position: int
    type: str
    title: str
    keys: str
    entry: str
    always_on: bool

    @property
    def key_list(self) -> list[str]:
        return split_keys(self.keys)

    @classmethod
    def of(cls, card: AdventureCard) -> CardView:
        assert card.id is not None
        return cls(
            card.id,
            card.adventure_id,
            card.position,
            card.type,
            card.title,
            card.keys,
            card.entry,
            card.always_on,
        )


@dataclass(frozen=True, slots=True)
class CardPage:
    adventure_id: int
    adventure_title: str
    cards: list[CardView]
    page: int  # 1-based
    pages: int
    total: int


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


# --- steering text -------------------------------------------------------------------------------


async def get_steering(
    db: Database,
    channel_id: int,
    actor: Actor,
    field: SteeringField | str,
    *,
    is_manager: bool = False,
) -> Steering:
    """One steering text of the adventure here, for someone about to change it.

    Refuses (``NotAllowed``) whoever may not change it, so no one fills a form for nothing.
    """
    field = _field(field)
    async with db.session() as session:
        adventure = await adventure_here(session, channel_id)
        await check_may_steer(session, adventure, actor, is_manager)
        assert adventure.id is not None
        return Steering(adventure.id, adventure.title, field, getattr(adventure, field.value))


async def set_steering(
    db: Database,
    channel_id: int,
    actor: Actor,
    field: SteeringField | str,
    text: str,
    *,
    is_manager: bool = False,
    adventure_id: int | None = None,
) -> SteeringChange:
    """Set (or, with blank text, clear) one steering text of the adventure here.

    ``adventure_id``: the adventure a form was opened for; if another one has started in the
    channel since, nothing is saved.
    """
    field = _field(field)
    text = _clean_text(text)
    if len(text) > TEXT_MAX_CHARS:
        raise InvalidInput(
            f"{field.label} can be at most {TEXT_MAX_CHARS:,} characters; "
            f"this one has {len(text):,}."
        )
    async with db.session() as session, session.begin():
        adventure = await adventure_here(session, channel_id, for_update=True, expect=adventure_id)
        await check_may_steer(session, adventure, actor, is_manager)
        assert adventure.id is not None
        previous = getattr(adventure, field.value)
        if text != previous:
            setattr(adventure, field.value, text)
        return SteeringChange(adventure.id, field, text, previous)


def _field(field: SteeringField | str) -> SteeringField:
    try:
        return SteeringField(field)
    except ValueError:
        raise InvalidInput(f"There is no steering field called {field!r}.") from None


def _clean_text(text: str) -> str:
    """Trailing spaces and blank edges go; a text of only whitespace is empty."""
    return "\n".join(line.rstrip() for line in text.strip().splitlines())


# --- story cards ---------------------------------------------------------------------------------


def split_keys(keys: str) -> list[str]:
    """A card's keys as a list, for showing (the stored string keeps AI Dungeon's form)."""
    return [key.strip() for key in keys.split(",") if key.strip()]


async def list_cards(
    db: Database, channel_id: int, *, page: int = 1, per_page: int = 10
) -> CardPage:
    """One page of the adventure's story cards, in their order. Anyone may look."""
    per_page = max(1, per_page)
    async with db.session() as session:
        adventure = await adventure_here(session, channel_id)
        assert adventure.id is not None
        total = await _card_count(session, adventure.id)
        pages = max(1, math.ceil(total / per_page))
        page = min(max(1, page), pages)
        rows = await session.scalars(
            select(AdventureCard)
            .where(AdventureCard.adventure_id == adventure.id)
            .order_by(AdventureCard.position, AdventureCard.id)
            .offset((page - 1) * per_page)
            .limit(per_page)
        )
        cards = [CardView.of(card) for card in rows]
        return CardPage(adventure.id, adventure.title, cards, page, pages, total)


async def card_titles_for_autocomplete(
    db: Database, channel_id: int, typed: str, *, limit: int = 25
) -> list[tuple[str, str]]:
    """(label, value) pairs for the cards whose title (or keys) contain what was typed.

    The value is the card's id, so cards with the same or no title stay distinguishable; titles
    starting with the typed text come first.
    """
    async with db.session() as session:
        adventure = await _active(session, channel_id)
        if adventure is None:
            return []
        rows = (
            await session.execute(
                select(AdventureCard.id, AdventureCard.title, AdventureCard.keys)
                .where(AdventureCard.adventure_id == adventure.id)
                .order_by(AdventureCard.position, AdventureCard.id)
            )
        ).all()
    typed = typed.casefold().strip()
    starts, contains, by_key = [], [], []
    for card_id, title, keys in rows:
        label = _card_label(card_id, title, keys)
        folded = title.casefold()
        if folded.startswith(typed):
            starts.append((label, str(card_id)))
        elif typed in folded:
            contains.append((label, str(card_id)))
        elif typed in keys.casefold():
            by_key.append((label, str(card_id)))
    return (starts + contains + by_key)[:limit]


def _card_label(card_id: int, title: str, keys: str) -> str:
    if title.strip():
        return title.strip()[:100]
    shown = ", ".join(split_keys(keys))
    return (f"(untitled #{card_id}) {shown}" if shown else f"(untitled #{card_id})")[:100]


async def get_card(
    db: Database, channel_id: int, actor: Actor, query: str, *, is_manager: bool = False
) -> CardView:
    """The card ``query`` names (its title, or its id from autocomplete), for someone about to
    edit it."""
    async with db.session() as session:
        adventure = await adventure_here(session, channel_id)
        await check_may_steer(session, adventure, actor, is_manager)
        return CardView.of(await _find_card(session, adventure, query))


async def check_card_room(
    db: Database, channel_id: int, actor: Actor, *, max_cards: int, is_manager: bool = False
) -> int:
    """Before a form opens: the player may add a card, and there is room for one.

    Returns the adventure's id, for ``add_card``'s ``adventure_id``.
    """
    async with db.session() as session:
        adventure = await adventure_here(session, channel_id)
        await check_may_steer(session, adventure, actor, is_manager)
        assert adventure.id is not None
        _check_room(await _card_count(session, adventure.id), max_cards)
        return adventure.id


async def add_card(
    db: Database,
    channel_id: int,
    actor: Actor,
    draft: CardDraft,
    *,
    max_cards: int,
    is_manager: bool = False,
    adventure_id: int | None = None,
) -> CardView:
    """Add a story card to the adventure here, after its others."""
    fields = _validated(draft)
    async with db.session() as session, session.begin():
        adventure = await adventure_here(session, channel_id, for_update=True, expect=adventure_id)
        await check_may_steer(session, adventure, actor, is_manager)
        assert adventure.id is not None
        _check_room(await _card_count(session, adventure.id), max_cards)
        await _check_unique_title(session, adventure.id, fields["title"])
        last = await session.scalar(
            select(func.max(AdventureCard.position)).where(
                AdventureCard.adventure_id == adventure.id
            )
        )
        card = AdventureCard(
            adventure_id=adventure.id, position=(last + 1) if last is not None else 0, **fields
        )
        session.add(card)
        await session.flush()
        return CardView.of(card)


async def edit_card(
    db: Database,
    channel_id: int,
    actor: Actor,
    card_id: int,
    draft: CardDraft,
    *,
    is_manager: bool = False,
) -> CardView:
    """Replace a card's title, keys, entry, type and always-on mark."""
    fields = _validated(draft)
    async with db.session() as session, session.begin():
        adventure = await adventure_here(session, channel_id, for_update=True)
        await check_may_steer(session, adventure, actor, is_manager)
        assert adventure.id is not None
        card = await session.get(AdventureCard, card_id)
        if card is None or card.adventure_id != adventure.id:
            raise NotFound("That story card is gone: it was removed, or the adventure here ended.")
        await _check_unique_title(session, adventure.id, fields["title"], besides=card_id)
        for name, value in fields.items():
            setattr(card, name, value)
        await session.flush()
        return CardView.of(card)


async def remove_card(
    db: Database, channel_id: int, actor: Actor, query: str, *, is_manager: bool = False
) -> CardView:
    """Remove the card ``query`` names (its title, or its id from autocomplete)."""
    async with db.session() as session, session.begin():
        adventure = await adventure_here(session, channel_id, for_update=True)
        await check_may_steer(session, adventure, actor, is_manager)
        card = await _find_card(session, adventure, query)
        removed = CardView.of(card)
        await session.delete(card)
        return removed


def _validated(draft: CardDraft) -> dict[str, object]:
    title = " ".join(draft.title.split())
    if not title:
        raise InvalidInput("A story card needs a title.")
    if len(title) > CARD_TITLE_MAX:
        raise InvalidInput(
            f"A card's title can be at most {CARD_TITLE_MAX} characters; "
            f"this one has {len(title):,}."
        )
    # Keys stay as typed (AI Dungeon reads a leading space as "at a word start"); only empty
    # ones and line breaks go.
    keys = ",".join(key.rstrip() for key in draft.keys.replace("\n", ",").split(",") if key.strip())
    if len(keys) > CARD_KEYS_MAX:
        raise InvalidInput(
            f"A card's keys can be at most {CARD_KEYS_MAX} characters together; "
            f"these have {len(keys):,}."
        )
    entry = _clean_text(draft.entry)
    if len(entry) > CARD_ENTRY_MAX:
        raise InvalidInput(
            f"A card's entry can be at most {CARD_ENTRY_MAX:,} characters; "
            f"this one has {len(entry):,}."
        )
    kind = " ".join(draft.type.split()).lower() or DEFAULT_CARD_TYPE
    if len(kind) > CARD_TYPE_MAX:
        raise InvalidInput(
            f"A card's type can be at most {CARD_TYPE_MAX} characters, like "
            "character, location, faction or custom."
        )
    return {
        "title": title,
        "keys": keys,
        "entry": entry,
        "type": kind,
        "always_on": bool(draft.always_on),
    }


def _check_room(count: int, max_cards: int) -> None:
    if count >= max_cards:
        raise InvalidInput(
            f"This adventure already has {count:,} story cards, the most it can hold. "
            "Remove one first."
        )


async def _card_count(session: AsyncSession, adventure_id: int) -> int:
    return await session.scalar(
        select(func.count())
        .select_from(AdventureCard)
        .where(AdventureCard.adventure_id == adventure_id)
    )


async def _check_unique_title(
    session: AsyncSession, adventure_id: int, title: str, *, besides: int | None = None
) -> None:
    """Titles compare as players read them: case and runs of spaces do not count."""
    folded = title.casefold()
    rows = await session.execute(
        select(AdventureCard.id, AdventureCard.title).where(
            AdventureCard.adventure_id == adventure_id
        )
    )
    if any(
        card_id != besides and " ".join(other.split()).casefold() == folded
        for card_id, other in rows
    ):
        raise InvalidInput(f"This adventure already has a story card called “{title}”.")


async def _find_card(session: AsyncSession, adventure: Adventure, query: str) -> AdventureCard:
    wanted = " ".join(query.split())
    rows: Sequence[tuple[int, str]] = (
        await session.execute(
            select(AdventureCard.id, AdventureCard.title)
            .where(AdventureCard.adventure_id == adventure.id)
            .order_by(AdventureCard.position, AdventureCard.id)
        )
    ).all()
    folded = wanted.casefold()
    card_id = next(
        (cid for cid, title in rows if folded and " ".join(title.split()).casefold() == folded),
        None,
    )
    if card_id is None and wanted.isdigit() and any(cid == int(wanted) for cid, _ in rows):
        card_id = int(wanted)
    card = await session.get(AdventureCard, card_id) if card_id is not None else None
    if card is None:
        raise NotFound(
            f"There is no story card called “{wanted[:100]}” in this adventure; "
            "/card list shows them."
        )
    return card


# --- generation settings -------------------------------------------------------------------------


async def get_settings(
    db: Database, channel_id: int, defaults: GenerationDefaults
) -> AdventureSettings:
    """The adventure's generation settings and the defaults unset ones fall back to."""
    async with db.session() as session:
        adventure = await adventure_here(session, channel_id)
        return _settings_of(adventure, defaults)


async def set_settings(
    db: Database,
    channel_id: int,
    actor: Actor,
    defaults: GenerationDefaults,
    *,
    context_tokens: int | None = None,
    max_output_tokens: int | None = None,
    temperature: float | None = None,
    reset: bool = False,
    is_manager: bool = False,
) -> AdventureSettings:
    """Set any of the three; ``reset`` first returns all three to the defaults."""
    _check_range("context_tokens", context_tokens, CONTEXT_TOKENS_RANGE)
    _check_range("max_output_tokens", max_output_tokens, MAX_OUTPUT_TOKENS_RANGE)
    _check_range("temperature", temperature, TEMPERATURE_RANGE)
    async with db.session() as session, session.begin():
        adventure = await adventure_here(session, channel_id, for_update=True)
        await check_may_steer(session, adventure, actor, is_manager)
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
            raise InvalidInput(_headroom_message(context, output, new, defaults))
        for name, value in new.items():
            if getattr(adventure, name) != value:
                setattr(adventure, name, value)
        return _settings_of(adventure, defaults)


def _check_range(name: str, value: float | None, bounds: tuple[float, float]) -> None:
    if value is None:
        return
    low, high = bounds
    if not (math.isfinite(value) and low <= value <= high):
        raise InvalidInput(
            f"{name} must be between {_number(low)} and {_number(high)}; got {_number(value)}."
        )


def _headroom_message(
    context: int, output: int, new: dict[str, object], defaults: GenerationDefaults
) -> str:
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


def _settings_of(adventure: Adventure, defaults: GenerationDefaults) -> AdventureSettings:
    assert adventure.id is not None
    return AdventureSettings(
        adventure.id,
        adventure.title,
        adventure.context_tokens,
        adventure.max_output_tokens,
        adventure.temperature,
        defaults,
    )


# --- shared --------------------------------------------------------------------------------------


async def _active(
    session: AsyncSession, channel_id: int, *, for_update: bool = False
) -> Adventure | None:
    query = (
        select(Adventure)
        .where(Adventure.channel_id == channel_id, Adventure.ended_at.is_(None))
        .order_by(Adventure.id.desc())
        .limit(1)
    )
    if for_update:
        # Changes to one adventure's steering and cards queue behind each other (PostgreSQL;
        # SQLite has one writer at a time anyway), so two cards cannot take one title.
        query = query.with_for_update()
    return await session.scalar(query)


async def adventure_here(
    session: AsyncSession,
    channel_id: int,
    *,
    for_update: bool = False,
    expect: int | None = None,
) -> Adventure:
    adventure = await _active(session, channel_id, for_update=for_update)
    if adventure is None:
        if expect is not None:
            raise StoryMovedOn(
                "The adventure here ended while the form was open; nothing was saved."
            )
        raise NotFound(NO_ADVENTURE)
    if expect is not None and adventure.id != expect:
        raise StoryMovedOn(
            "Another adventure started here while the form was open; nothing was saved."
        )
    return adventure


async def check_may_steer(
    session: AsyncSession, adventure: Adventure, actor: Actor, is_manager: bool
) -> None:
    if may_steer(adventure, actor.user_id, is_manager):
        return
    host_name = ""
    if adventure.host_id is not None:
        host_name = await session.scalar(select(User.name).where(User.id == adventure.host_id))
    raise NotAllowed(who_may_steer(adventure, host_name or ""))
