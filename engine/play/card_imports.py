"""``/card import``: a story-card file merged into the adventure running here or into a library
scenario, as AI Dungeon imports story cards "into Scenarios or Adventures"
(help.aidungeon.com/story-cards-import-and-export).

The file is read by the scenario importer's readers (``engine.library.formats.detect.read_cards``:
any story-card format it reads; a whole adventure or scenario is refused with the command that
reads it), checked with the caps of live creation, and its cards masked for the words banned
where they will be read. ``preview`` writes nothing but the day's import count: it says which
cards are new, which replace a card already there (the same title, else the same keys) and
which are left out and why (the cards an adventure or a scenario may hold, the cards its host's
adventures may hold). ``confirm`` plans the merge again in its transaction, with the rights and
the caps read again, and writes only what the preview said: when the cards there changed in
between, it writes nothing and says so.

The cards are written as ``/card add`` and ``/card edit`` write them (``engine.story.steering
.cards``): rows of the adventure (or the scenario), the story's version left as it is, so undo,
retry and branches treat them as they treat a card added by hand.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from sqlalchemy import ColumnElement, func, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from engine.errors import InvalidInput, NotFound, StoryMovedOn
from engine.library.formats import character_card
from engine.library.formats.detect import read_cards
from engine.library.formats.draft import ImportedCard, ImportLimits
from engine.library.scenarios.lookup import resolve_scenario
from engine.people.access.checks import check_may_change_scenario, check_may_steer
from engine.people.access.rules import NO_ADVENTURE, active_adventure, adventure_here
from engine.people.content import BannedWords, ContentPolicy, banned_words
from engine.people.limits import Kind
from engine.prompt.card_cap import CardCap
from engine.storage.models import Adventure, AdventureCard, Scenario, ScenarioCard, Server
from engine.story.steering.cards import CARD_TITLE_MAX, split_keys

if TYPE_CHECKING:
    from engine.people.access.rules import Actor
    from engine.people.limits import UsageLimits
    from engine.storage.database import Database

#: The card fields players and the model read: where banned words are masked.
_MASKED_FIELDS = ("title", "keys", "entry", "description")
#: How many titles of replaced or left-out cards a preview names.
TITLES_NAMED = 10


@dataclass(frozen=True, slots=True)
class CardPlace:
    """Where the cards go: the adventure running here, or a library scenario."""

    kind: str  # "adventure" or "scenario"
    id: int
    title: str

    @property
    def is_adventure(self) -> bool:
        return self.kind == "adventure"


@dataclass(frozen=True, slots=True)
class CardMerge:
    """What Confirm writes. ``targets`` holds, for each of the file's cards in order, the id of
    the card it replaces there, or None for a new one; ``kept`` new cards fit, the rest are
    left out (``why_left_out``)."""

    targets: tuple[int | None, ...]
    kept: int
    replaced_titles: tuple[str, ...]
    why_left_out: str = ""

    @property
    def replaced(self) -> int:
        return len(self.replaced_titles)

    @property
    def new(self) -> int:
        return sum(target is None for target in self.targets)

    @property
    def left_out(self) -> int:
        return self.new - self.kept

    @property
    def writes(self) -> int:
        return self.kept + self.replaced


@dataclass(frozen=True, slots=True)
class CardImportPreview:
    """A read and checked file, and what Confirm would do with it (nothing written yet)."""

    actor: Actor
    channel_id: int
    place: CardPlace
    format: str
    #: The file's cards, checked and masked, in its order.
    cards: tuple[ImportedCard, ...]
    merge: CardMerge
    #: What the reader said: entries left out (disabled, past the cap), keys it spelled out.
    warnings: tuple[str, ...] = ()
    #: How many cards had banned words masked.
    masked: int = 0
    #: How many cards the file holds, those past the card cap included (a warning names them).
    in_file: int = 0

    @property
    def left_out_titles(self) -> list[str]:
        pairs = zip(self.cards, self.merge.targets, strict=True)
        new = [card for card, target in pairs if target is None]
        return [card.title for card in new[self.merge.kept :]]


@dataclass(frozen=True, slots=True)
class CardImportResult:
    place: CardPlace
    added: int
    replaced: int


class CardImports:
    """``/card import``: ``place`` (before the download), ``preview``, then ``confirm``."""

    def __init__(
        self,
        db: Database,
        limits: ImportLimits,
        *,
        rate_limits: UsageLimits | None = None,
        content: ContentPolicy | None = None,
    ) -> None:
        self.db = db
        self.limits = limits
        #: Imports per player per day, and cards per host (None: none, for tests).
        self.rate_limits = rate_limits
        self.content = content or ContentPolicy()

    async def place(self, actor: Actor, channel_id: int, scenario: str | None) -> CardPlace:
        """Where the cards would go, refused now if the actor may not change it there: the
        adventure here (the steering right), or the scenario ``scenario`` names (the right to
        change it)."""
        async with self.db.session() as session:
            return (await self._target(session, actor, channel_id, scenario)).place

    async def preview(
        self,
        actor: Actor,
        channel_id: int,
        data: bytes,
        filename: str,
        scenario: str | None = None,
    ) -> CardImportPreview:
        """Read and check the file and plan the merge; raises ``ImportRejected`` for a file
        that cannot be imported, ``InvalidInput`` when nothing of it would be written."""
        await self.place(actor, channel_id, scenario)
        if self.rate_limits is not None:
            await self.rate_limits.use(Kind.IMPORT, actor)
        # Parsing a 2 MiB file takes a moment: off the event loop, so other turns keep going.
        imported = await asyncio.to_thread(read_cards, data, filename, self.limits)
        warnings = list(imported.warnings)
        draft = imported.draft
        if imported.format in character_card.VERSIONS and (draft.plot_essentials or draft.prompt):
            warnings.append(
                "Its scenario text and greetings are a scenario's, not cards, so they are left "
                "out: `/scenario import` keeps them with the cards (its greetings as openings)."
            )
        async with self.db.session() as session:
            target = await self._target(session, actor, channel_id, scenario)
            cards, masked = _masked(draft.cards, await self._banned(session, target))
            merge = await self._plan(session, target, cards)
        if not cards:
            said = " ".join(warnings)
            raise InvalidInput(f"The file holds no story cards to import. {said}".strip())
        if not merge.writes:
            raise InvalidInput(
                f"Nothing of the file would be imported: {merge.why_left_out} Make room with "
                "`/card remove` first."
            )
        return CardImportPreview(
            actor,
            channel_id,
            target.place,
            imported.format,
            tuple(cards),
            merge,
            tuple(warnings),
            masked,
            len(cards) + imported.cards_left_out,
        )

    async def confirm(self, preview: CardImportPreview) -> CardImportResult:
        """Write a previewed merge in one transaction, or nothing when what it would write is
        no longer what the preview said."""
        place = preview.place
        async with self.db.transaction() as session:
            target = await self._target_again(session, preview)
            cards, _ = _masked(list(preview.cards), await self._banned(session, target))
            merge = await self._plan(session, target, cards)
            if (merge.targets, merge.kept) != (preview.merge.targets, preview.merge.kept):
                raise StoryMovedOn(
                    f"The story cards of {_named(place)} changed since the preview, so it would "
                    "no longer do what it said; nothing was saved. Import the file again to see "
                    "what it does now."
                )
            await _write(session, target, cards, merge)
        return CardImportResult(place, merge.kept, merge.replaced)

    # --- where the cards go ------------------------------------------------------------------

    async def _target(
        self, session: AsyncSession, actor: Actor, channel_id: int, scenario: str | None
    ) -> _Target:
        query = (scenario or "").strip()
        if query:
            found = await resolve_scenario(
                session, query, server_id=actor.server_id, user_id=actor.user_id
            )
            await check_may_change_scenario(session, found, actor)
            return _Target.of_scenario(found)
        adventure = await adventure_here(
            session,
            channel_id,
            missing=f"{NO_ADVENTURE} To add the cards to a scenario instead, name it with "
            "`scenario:`.",
        )
        await check_may_steer(session, adventure, actor)
        return _Target.of_adventure(adventure)

    async def _target_again(self, session: AsyncSession, preview: CardImportPreview) -> _Target:
        """The preview's place, locked for the write, with the rights read again."""
        place, actor = preview.place, preview.actor
        if place.is_adventure:
            adventure = await active_adventure(session, preview.channel_id, for_update=True)
            if adventure is None or adventure.id != place.id:
                raise StoryMovedOn(
                    "The adventure the preview was for no longer runs here; nothing was saved."
                )
            await check_may_steer(session, adventure, actor)
            return _Target.of_adventure(adventure)
        scenario = await session.scalar(
            select(Scenario).where(col(Scenario.id) == place.id).with_for_update()
        )
        if scenario is None:
            raise NotFound(
                f"The scenario “{place.title}” was deleted since the preview; nothing was saved."
            )
        await check_may_change_scenario(session, scenario, actor)
        return _Target.of_scenario(scenario)

    async def _banned(self, session: AsyncSession, target: _Target) -> BannedWords:
        """The words banned where the cards will be read: the adventure's lists, or for a
        scenario the operator's and its server's (an adventure started from it adds its own)."""
        if target.adventure is not None:
            return await banned_words(session, target.adventure, self.content)
        server_id = target.scenario.server_id if target.scenario is not None else None
        server = None if server_id is None else await session.get(Server, server_id)
        return BannedWords.of(self.content.banned, server.banned_words if server else ())

    # --- the merge -----------------------------------------------------------------------------

    async def _plan(
        self, session: AsyncSession, target: _Target, cards: list[ImportedCard]
    ) -> CardMerge:
        rows = (
            await session.execute(
                select(col(target.model.id), col(target.model.title), col(target.model.keys))
                .where(target.owned)
                .order_by(col(target.model.position), col(target.model.id))
            )
        ).all()
        existing = [(card_id, title, keys) for card_id, title, keys in rows]
        cap = CardCap(self.limits.max_cards)
        room = cap.room(len(existing))
        holder = "this adventure" if target.adventure is not None else "this scenario"
        why = (
            f"{holder} holds {len(existing):,} story cards of the {cap.most:,} it may (this "
            "bot's setting)."
        )
        if target.adventure is not None and self.rate_limits is not None:
            host_room = await self.rate_limits.host_room(session, target.adventure, "cards")
            if host_room is not None and host_room < room:
                room = host_room
                cards_per_host = self.rate_limits.rules.cards_per_user
                why = (
                    f"the adventures its host runs hold {cards_per_host - host_room:,} story "
                    f"cards of the {cards_per_host:,} one player's may."
                )
        return plan_merge(cards, existing, room, why[0].upper() + why[1:])


def plan_merge(
    cards: list[ImportedCard], existing: list[tuple[int, str, str]], room: int, why: str
) -> CardMerge:
    """Which card there each of ``cards`` replaces: the one with its title (as players read
    it: case and runs of spaces do not count), else the one with the same keys; each card
    there is replaced once at most. The new cards fit in ``room``, the first ones first."""
    by_title: dict[str, int] = {}
    by_keys: dict[frozenset[str], int] = {}
    titles: dict[int, str] = {}
    for card_id, title, keys in existing:
        titles[card_id] = title
        by_title.setdefault(_folded(title), card_id)
        if folded := _key_set(keys):
            by_keys.setdefault(folded, card_id)
    targets: list[int | None] = [None] * len(cards)
    taken: set[int] = set()
    for i, card in enumerate(cards):
        found = by_title.get(_folded(card.title))
        if found is not None and found not in taken:
            targets[i] = found
            taken.add(found)
    for i, card in enumerate(cards):
        folded = _key_set(card.keys)
        found = by_keys.get(folded) if folded and targets[i] is None else None
        if found is not None and found not in taken:
            targets[i] = found
            taken.add(found)
    new = sum(target is None for target in targets)
    kept = min(new, max(0, room))
    replaced = tuple(titles[t] for t in targets if t is not None)
    return CardMerge(tuple(targets), kept, replaced, why if kept < new else "")


async def _write(
    session: AsyncSession, target: _Target, cards: list[ImportedCard], merge: CardMerge
) -> None:
    model = target.model
    last = await session.scalar(select(func.max(col(model.position))).where(target.owned))
    position = (last + 1) if last is not None else 0
    kept = 0
    for card, card_id in zip(cards, merge.targets, strict=True):
        if card_id is not None:
            row = await session.get(model, card_id)
            assert row is not None  # planned in this transaction, its place locked
        elif kept < merge.kept:
            kept += 1
            row = target.new_card(position)
            session.add(row)
            position += 1
        else:
            continue  # left out: past the room there
        row.title, row.keys, row.entry = card.title, card.keys, card.entry
        row.type, row.description = card.type, card.description
        # AI Dungeon's story-card files have no always-on mark: a card pinned here stays
        # pinned; a lorebook's constant entry pins the card it replaces.
        row.always_on = row.always_on or card.always_on
        # A lorebook's entry brings its world-info options; a file without any (AI Dungeon's)
        # leaves those of the card it replaces.
        row.lore = card.lore or row.lore
    await session.flush()


def _masked(cards: list[ImportedCard], banned: BannedWords) -> tuple[list[ImportedCard], int]:
    """The cards with the banned words masked, as an imported adventure's are
    (``engine.library.formats.adventure_content``), and how many had one; titles a mask made
    the same are numbered again, as the reader numbers repeats."""
    if not banned:
        return list(cards), 0
    out: list[ImportedCard] = []
    masked = 0
    for card in cards:
        clean = replace(card, **{name: banned.mask(getattr(card, name)) for name in _MASKED_FIELDS})
        masked += clean != card
        out.append(clean)
    seen: set[str] = set()
    for card in out:
        base, title, n = card.title, card.title, 2
        while _folded(title) in seen:
            suffix = f" ({n})"
            title = base[: CARD_TITLE_MAX - len(suffix)] + suffix
            n += 1
        card.title = title
        seen.add(_folded(title))
    return out, masked


def _folded(title: str) -> str:
    return " ".join(title.split()).casefold()


def _key_set(keys: str) -> frozenset[str]:
    return frozenset(key.casefold() for key in split_keys(keys))


def _named(place: CardPlace) -> str:
    return f"“{place.title}”"


@dataclass(frozen=True, slots=True)
class _Target:
    """A place's row and the card table it keeps its cards in."""

    place: CardPlace
    adventure: Adventure | None = None
    scenario: Scenario | None = None

    @classmethod
    def of_adventure(cls, adventure: Adventure) -> _Target:
        assert adventure.id is not None
        return cls(CardPlace("adventure", adventure.id, adventure.title), adventure=adventure)

    @classmethod
    def of_scenario(cls, scenario: Scenario) -> _Target:
        assert scenario.id is not None
        return cls(CardPlace("scenario", scenario.id, scenario.title), scenario=scenario)

    @property
    def model(self) -> type[AdventureCard] | type[ScenarioCard]:
        return AdventureCard if self.adventure is not None else ScenarioCard

    @property
    def owned(self) -> ColumnElement[bool]:
        """The clause selecting the place's cards."""
        if self.adventure is not None:
            return col(AdventureCard.adventure_id) == self.place.id
        return col(ScenarioCard.scenario_id) == self.place.id

    def new_card(self, position: int) -> AdventureCard | ScenarioCard:
        if self.adventure is not None:
            return AdventureCard(adventure_id=self.place.id, position=position)
        return ScenarioCard(scenario_id=self.place.id, position=position)
