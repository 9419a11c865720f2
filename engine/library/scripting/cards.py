"""Story cards between the database and scripts.

Scripts see ``{id, keys, entry, type, title, description}`` with ``keys`` as AI Dungeon stores
it (one comma-separated text) and ``id`` as a text: the id a script gave the card, or else the
row's id. AI Dungeon keeps the id a script sets: scripts push cards with their own string ids
(Magic's Scripting Guidebook, magicoflolis/aidungeon.js "Scripting Guidebook.md", addStoryCard
"Alternatives": ``cardData.id = Math.floor(Math.random() * 1000000000).toString();
storyCards.push(cardData)``) and find them by it on later turns (MagicCards,
magicoflolis/MagicCards dist/Library.js: its settings card's id is the JSON text
``{"id":"settings","pin":true}``, looked up by id every turn). So a script's id is stored with
the card (``AdventureCard.script_id``).

Which row a card is follows the card object a script was given (the prelude reports each
card's ``origin``: the id it had when the run began), so a script that changes a card's id
changes that card; a card whose object was replaced keeps its row by its id. A card a script
adds with no id of its own gets a provisional one ("new-1"), replaced by the id the database
assigns. ``always_on`` is Campfire's own and invisible to scripts: a card keeps it through any
script change.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.people.content import BannedWords
from engine.prompt.cards import Card
from engine.storage.models import AdventureCard

#: The fields scripts see and may change.
SCRIPT_FIELDS = ("keys", "entry", "type", "title", "description")


#: The key, in a card as the engine carries it from hook to hook, of the row it is (an int, or
#: None for a card a script added). Never shown to scripts.
ROW = "row"
#: Ids the prelude gives cards that came without one: not the script's, never stored.
PROVISIONAL_ID = re.compile(r"new-\d+")


@dataclass(frozen=True, slots=True)
class CardRow:
    """An adventure card as the turn found it (plain data; ``engine.story.snapshots`` reads it)."""

    id: int
    position: int
    type: str
    title: str
    keys: str
    entry: str
    description: str
    always_on: bool
    script_id: str = ""
    #: World-info options (``engine.prompt.lore``): scripts neither see nor change them.
    lore: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, card: AdventureCard) -> CardRow:
        assert card.id is not None
        return cls(
            id=card.id,
            position=card.position,
            type=card.type,
            title=card.title,
            keys=card.keys,
            entry=card.entry,
            description=card.description,
            always_on=card.always_on,
            script_id=card.script_id,
            lore=card.lore,
        )

    @property
    def visible_id(self) -> str:
        """The id scripts see."""
        return self.script_id or str(self.id)


def script_cards(rows: Sequence[CardRow]) -> list[dict[str, Any]]:
    """The cards as the turn found them, each with its row. Ids are unique: a card whose script
    id another card already shows (two scripts' choices, or a row's own id) shows its row's."""
    seen: set[str] = set()
    cards = []
    for row in rows:
        shown = row.visible_id if row.visible_id not in seen else str(row.id)
        seen.add(shown)
        cards.append(
            {"id": shown, **{name: getattr(row, name) for name in SCRIPT_FIELDS}, ROW: row.id}
        )
    return cards


def for_script(card: dict[str, Any]) -> dict[str, Any]:
    """A card as a script sees it (without the row it is)."""
    return {name: value for name, value in card.items() if name != ROW}


def rows_after_run(given: Sequence[dict[str, Any]], left: list[dict[str, Any]]) -> None:
    """Mark each card a run ``left`` (with its ``origin``) with the row it is, from the cards
    it was ``given``: by the object it came from, else by its id; ``origin`` goes."""
    by_id = {card["id"]: card.get(ROW) for card in given}
    claimed: set[int] = set()
    for card in left:
        row = by_id.get(card.pop("origin", "") or "")
        if row is not None and row not in claimed:
            claimed.add(row)
            card[ROW] = row
        else:
            card[ROW] = None
    for card in left:
        row = by_id.get(card["id"])
        if card[ROW] is None and row is not None and row not in claimed:
            claimed.add(row)
            card[ROW] = row


def stored_script_id(card: dict[str, Any], row_id: int | None) -> str:
    """The script id to store for ``card``: none for the row's own id or a provisional one."""
    shown = str(card.get("id", ""))
    if shown == str(row_id) or PROVISIONAL_ID.fullmatch(shown):
        return ""
    return shown


def _known_row(card: dict[str, Any], rows: dict[int, CardRow]) -> int | None:
    found = card.get(ROW)
    return found if isinstance(found, int) and found in rows else None


def to_context_cards(cards: Sequence[dict[str, Any]], rows: Sequence[CardRow]) -> list[Card]:
    """Cards for the context engine, in the scripts' order."""
    by_id = {row.id: row for row in rows}
    out = []
    for position, card in enumerate(cards):
        card_id = _known_row(card, by_id)
        row = by_id.get(card_id) if card_id is not None else None
        out.append(
            Card.of(
                card["title"] or card["keys"],
                card["entry"],
                card["keys"],
                always_on=row.always_on if row else False,
                id=card_id,
                position=position,
                type=card["type"],
                lore=row.lore if row else None,
            )
        )
    return out


def mask_written(
    cards: Sequence[dict[str, Any]], rows: Sequence[CardRow], banned: BannedWords
) -> int:
    """Mask the banned words in what a run wrote to ``cards`` (marked with their rows), in
    place: a card it added, or a field it changed. A field left as the turn found it is not the
    script's writing (a player's own card is theirs to word), so it stays as it is. Returns how
    many cards were masked."""
    if not banned:
        return 0
    by_id = {row.id: row for row in rows}
    masked = 0
    for card in cards:
        card_id = _known_row(card, by_id)
        row = by_id.get(card_id) if card_id is not None else None
        changed = False
        for name in SCRIPT_FIELDS:
            value = str(card.get(name, ""))
            if row is not None and getattr(row, name) == value:
                continue
            clean = banned.mask(value)
            if clean != value:
                card[name], changed = clean, True
        masked += changed
    return masked


def changes(
    rows: Sequence[CardRow], cards: Sequence[dict[str, Any]]
) -> tuple[list[int], list[tuple[int, dict[str, Any]]], list[dict[str, Any]]]:
    """What to write so the adventure's cards become ``cards``: ids to delete, (id, values) to
    update and values to insert. Positions follow the scripts' order."""
    by_id = {row.id: row for row in rows}
    kept: set[int] = set()
    updated: list[tuple[int, dict[str, Any]]] = []
    added: list[dict[str, Any]] = []
    for position, card in enumerate(cards):
        card_id = _known_row(card, by_id)
        if card_id is not None and card_id in kept:
            card_id = None
        values = {name: str(card.get(name, "")) for name in SCRIPT_FIELDS}
        values["script_id"] = stored_script_id(card, card_id)
        if card_id is None:
            added.append({**values, "position": position, "always_on": False, "lore": {}})
            continue
        kept.add(card_id)
        row = by_id[card_id]
        changed: dict[str, Any] = {
            name: value for name, value in values.items() if getattr(row, name) != value
        }
        if row.position != position:
            changed["position"] = position
        if changed:
            updated.append((card_id, changed))
    removed = [row.id for row in rows if row.id not in kept]
    return removed, updated, added
