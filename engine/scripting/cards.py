"""Story cards between the database and scripts.

Scripts see ``{id, keys, entry, type, title, description}`` with ``keys`` as AI Dungeon stores
it (one comma-separated text) and ``id`` as a text. A card a script adds has no database id yet:
the prelude gives it a provisional one ("new-1"), which the turn's final transaction replaces by
the id the database assigns. ``always_on`` is Campfire's own and invisible to scripts: a card
keeps it through any script change.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from engine.cards import Card
from engine.sanitise import row_id
from engine.storage.models import AdventureCard

#: The fields scripts see and may change.
SCRIPT_FIELDS = ("keys", "entry", "type", "title", "description")


@dataclass(frozen=True, slots=True)
class CardRow:
    """An adventure card as the turn found it (plain data; ``engine.snapshots`` reads it)."""

    id: int
    position: int
    type: str
    title: str
    keys: str
    entry: str
    description: str
    always_on: bool

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
        )


def script_card(row: CardRow) -> dict[str, str]:
    return {"id": str(row.id), **{name: getattr(row, name) for name in SCRIPT_FIELDS}}


def _known_id(card: dict[str, Any], rows: dict[int, CardRow]) -> int | None:
    found = row_id(str(card.get("id", "")))
    return found if found in rows else None


def to_context_cards(cards: Sequence[dict[str, Any]], rows: Sequence[CardRow]) -> list[Card]:
    """Cards for the context engine, in the scripts' order."""
    by_id = {row.id: row for row in rows}
    out = []
    for position, card in enumerate(cards):
        card_id = _known_id(card, by_id)
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
            )
        )
    return out


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
        values = {name: str(card.get(name, "")) for name in SCRIPT_FIELDS}
        card_id = _known_id(card, by_id)
        if card_id is None or card_id in kept:
            added.append({**values, "position": position, "always_on": False})
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
