"""The adventure's story cards: what the narrator reads about a character, place or thing when
its keys come up in the story (or always, for a card marked always on)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from engine.errors import InvalidInput, NotFound
from engine.people.access.checks import check_may_steer
from engine.people.access.rules import active_adventure, adventure_here
from engine.platform.sanitise import QUOTE_MAX, echo, row_id, sanitise
from engine.prompt.card_cap import CardCap
from engine.prompt.lore import read_lore
from engine.storage.models import Adventure, AdventureCard
from engine.story.steering.card_options import changed_lore
from engine.story.steering.text import clean_text

if TYPE_CHECKING:
    from collections.abc import Mapping

    from engine.people.access.rules import Actor
    from engine.people.limits import UsageLimits
    from engine.storage.database import Database

CARD_TITLE_MAX = 100
CARD_KEYS_MAX = 500
CARD_ENTRY_MAX = 4000
CARD_TYPE_MAX = 32
DEFAULT_CARD_TYPE = "custom"


@dataclass(frozen=True, slots=True)
class CardDraft:
    """What a player typed for a story card (validated by ``StoryCards.add``/``edit``)."""

    title: str
    keys: str = ""
    entry: str = ""
    type: str = DEFAULT_CARD_TYPE
    always_on: bool = False


class _CardFields(TypedDict):
    """A draft's fields once validated: the card's columns they set."""

    title: str
    keys: str
    entry: str
    type: str
    always_on: bool


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
    #: Its world-info options in words ("secondary keys (AND ANY): tower", "order 5"), for
    #: ``/card list``; empty for a card without options.
    options: tuple[str, ...] = ()

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
            tuple(read_lore(card.lore).describe()),
        )


@dataclass(frozen=True, slots=True)
class CardPage:
    adventure_id: int
    adventure_title: str
    cards: list[CardView]
    page: int  # 1-based
    pages: int
    total: int


def split_keys(keys: str) -> list[str]:
    """A card's keys as a list, for showing (the stored string keeps AI Dungeon's form)."""
    return [key.strip() for key in keys.split(",") if key.strip()]


class StoryCards:
    """What the front end calls for /card add, edit, remove and list.

    ``max_cards`` is the most one adventure may hold (the operator's setting).
    """

    def __init__(
        self, db: Database, *, max_cards: int, rate_limits: UsageLimits | None = None
    ) -> None:
        self.db = db
        self.max_cards = max_cards
        #: Cards per player, over all the adventures they host (None: none, for tests).
        self.rate_limits = rate_limits

    async def page(self, channel_id: int, *, page: int = 1, per_page: int = 10) -> CardPage:
        """One page of the adventure's story cards, in their order. Anyone may look."""
        per_page = max(1, per_page)
        async with self.db.session() as session:
            adventure = await adventure_here(session, channel_id)
            assert adventure.id is not None
            total = await _card_count(session, adventure.id)
            pages = max(1, math.ceil(total / per_page))
            page = min(max(1, page), pages)
            rows = await session.scalars(
                select(AdventureCard)
                .where(col(AdventureCard.adventure_id) == adventure.id)
                .order_by(col(AdventureCard.position), col(AdventureCard.id))
                .offset((page - 1) * per_page)
                .limit(per_page)
            )
            cards = [CardView.of(card) for card in rows]
            return CardPage(adventure.id, adventure.title, cards, page, pages, total)

    async def choices(
        self, channel_id: int, typed: str, *, limit: int = 25
    ) -> list[tuple[str, str]]:
        """(label, value) pairs for the cards whose title (or keys) contain what was typed.

        The value is the card's id, so cards with the same or no title stay distinguishable;
        titles starting with the typed text come first.
        """
        async with self.db.session() as session:
            adventure = await active_adventure(session, channel_id)
            if adventure is None:
                return []
            rows = (
                await session.execute(
                    select(col(AdventureCard.id), col(AdventureCard.title), col(AdventureCard.keys))
                    .where(col(AdventureCard.adventure_id) == adventure.id)
                    .order_by(col(AdventureCard.position), col(AdventureCard.id))
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

    async def get(self, channel_id: int, actor: Actor, query: str) -> CardView:
        """The card ``query`` names (its title, or its id from autocomplete), for someone about
        to edit it."""
        async with self.db.session() as session:
            adventure = await adventure_here(session, channel_id)
            await check_may_steer(session, adventure, actor)
            return CardView.of(await _find_card(session, adventure, query))

    async def check_room(self, channel_id: int, actor: Actor) -> int:
        """Before a form opens: the player may add a card, and there is room for one.

        Returns the adventure's id, for ``add``'s ``adventure_id``.
        """
        async with self.db.session() as session:
            adventure = await adventure_here(session, channel_id)
            await check_may_steer(session, adventure, actor)
            assert adventure.id is not None
            _check_room(await _card_count(session, adventure.id), self.max_cards)
            return adventure.id

    async def add(
        self, channel_id: int, actor: Actor, draft: CardDraft, *, adventure_id: int | None = None
    ) -> CardView:
        """Add a story card to the adventure here, after its others."""
        async with self.db.transaction() as session:
            adventure = await adventure_here(
                session, channel_id, for_update=True, expect=adventure_id
            )
            return await self.add_in(session, adventure, actor, draft)

    async def add_in(
        self, session: AsyncSession, adventure: Adventure, actor: Actor, draft: CardDraft
    ) -> CardView:
        """``add``'s work in the caller's transaction, ``adventure`` read for update in it (a
        proposed card the host adds from a DM: ``engine.story.steering.card_proposals``)."""
        fields = _validated(draft)
        await check_may_steer(session, adventure, actor)
        assert adventure.id is not None
        _check_room(await _card_count(session, adventure.id), self.max_cards)
        if self.rate_limits is not None:
            await self.rate_limits.check_host_room(session, adventure, "cards")
        await _check_unique_title(session, adventure.id, fields["title"])
        last = await session.scalar(
            select(func.max(col(AdventureCard.position))).where(
                col(AdventureCard.adventure_id) == adventure.id
            )
        )
        card = AdventureCard(
            adventure_id=adventure.id, position=(last + 1) if last is not None else 0, **fields
        )
        session.add(card)
        await session.flush()
        return CardView.of(card)

    async def edit(self, channel_id: int, actor: Actor, card_id: int, draft: CardDraft) -> CardView:
        """Replace a card's title, keys, entry, type and always-on mark."""
        fields = _validated(draft)
        async with self.db.transaction() as session:
            adventure = await adventure_here(session, channel_id, for_update=True)
            await check_may_steer(session, adventure, actor)
            assert adventure.id is not None
            card = await session.get(AdventureCard, card_id)
            if card is None or card.adventure_id != adventure.id:
                raise NotFound(
                    "That story card is gone: it was removed, or the adventure here ended."
                )
            await _check_unique_title(session, adventure.id, fields["title"], besides=card_id)
            for name, value in fields.items():
                setattr(card, name, value)
            await session.flush()
            return CardView.of(card)

    async def set_options(
        self,
        channel_id: int,
        actor: Actor,
        query: str,
        changes: Mapping[str, Any],
        *,
        reset: bool = False,
    ) -> CardView:
        """Change the world-info options of the card ``query`` names (``changed_lore``: all or
        nothing). Stored on the card's row as ``edit`` stores its text."""
        async with self.db.transaction() as session:
            adventure = await adventure_here(session, channel_id, for_update=True)
            await check_may_steer(session, adventure, actor)
            card = await _find_card(session, adventure, query)
            card.lore = changed_lore(card.lore, changes, reset=reset)
            await session.flush()
            return CardView.of(card)

    async def remove(self, channel_id: int, actor: Actor, query: str) -> CardView:
        """Remove the card ``query`` names (its title, or its id from autocomplete)."""
        async with self.db.transaction() as session:
            adventure = await adventure_here(session, channel_id, for_update=True)
            await check_may_steer(session, adventure, actor)
            card = await _find_card(session, adventure, query)
            removed = CardView.of(card)
            await session.delete(card)
            return removed


def _card_label(card_id: int, title: str, keys: str) -> str:
    if title.strip():
        return title.strip()[:100]
    shown = ", ".join(split_keys(keys))
    return (f"(untitled #{card_id}) {shown}" if shown else f"(untitled #{card_id})")[:100]


def _validated(draft: CardDraft) -> _CardFields:
    title = " ".join(sanitise(draft.title).split())
    if not title:
        raise InvalidInput("A story card needs a title.")
    if len(title) > CARD_TITLE_MAX:
        raise InvalidInput(
            f"A card's title can be at most {CARD_TITLE_MAX} characters; "
            f"this one has {len(title):,}."
        )
    # Keys stay as typed (AI Dungeon reads a leading space as "at a word start"); only empty
    # ones and line breaks go.
    keys = ",".join(
        key.rstrip() for key in sanitise(draft.keys).replace("\n", ",").split(",") if key.strip()
    )
    if len(keys) > CARD_KEYS_MAX:
        raise InvalidInput(
            f"A card's keys can be at most {CARD_KEYS_MAX} characters together; "
            f"these have {len(keys):,}."
        )
    entry = clean_text(draft.entry)
    if len(entry) > CARD_ENTRY_MAX:
        raise InvalidInput(
            f"A card's entry can be at most {CARD_ENTRY_MAX:,} characters; "
            f"this one has {len(entry):,}."
        )
    kind = " ".join(sanitise(draft.type).split()).lower() or DEFAULT_CARD_TYPE
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


async def check_card_room(session: AsyncSession, adventure_id: int, max_cards: int) -> None:
    """Refuse when the adventure holds as many cards as one may."""
    _check_room(await _card_count(session, adventure_id), max_cards)


def _check_room(count: int, max_cards: int) -> None:
    refusal = CardCap(max_cards).full(count)
    if refusal is not None:
        raise InvalidInput(refusal)


async def _card_count(session: AsyncSession, adventure_id: int) -> int:
    return (
        await session.scalar(
            select(func.count())
            .select_from(AdventureCard)
            .where(col(AdventureCard.adventure_id) == adventure_id)
        )
        or 0
    )


async def _check_unique_title(
    session: AsyncSession, adventure_id: int, title: str, *, besides: int | None = None
) -> None:
    """Titles compare as players read them: case and runs of spaces do not count."""
    folded = title.casefold()
    rows = await session.execute(
        select(col(AdventureCard.id), col(AdventureCard.title)).where(
            col(AdventureCard.adventure_id) == adventure_id
        )
    )
    if any(
        card_id != besides and " ".join(other.split()).casefold() == folded
        for card_id, other in rows
    ):
        raise InvalidInput(f"This adventure already has a story card called “{title}”.")


async def _find_card(session: AsyncSession, adventure: Adventure, query: str) -> AdventureCard:
    wanted = " ".join(sanitise(query).split())
    rows = (
        await session.execute(
            select(col(AdventureCard.id), col(AdventureCard.title))
            .where(col(AdventureCard.adventure_id) == adventure.id)
            .order_by(col(AdventureCard.position), col(AdventureCard.id))
        )
    ).all()
    folded = wanted.casefold()
    card_id = next(
        (cid for cid, title in rows if folded and " ".join(title.split()).casefold() == folded),
        None,
    )
    typed_id = row_id(wanted)
    if card_id is None and any(cid == typed_id for cid, _ in rows):
        card_id = typed_id
    card = await session.get(AdventureCard, card_id) if card_id is not None else None
    if card is None:
        raise NotFound(
            f"There is no story card called “{echo(wanted, QUOTE_MAX)}” in this adventure; "
            "/card list shows them."
        )
    return card
