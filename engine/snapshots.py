"""What a story node remembers of the adventure's changeable state.

Undo, redo, retry and branch switches must put the adventure back exactly as it was at a
position: its world state, its scripts' ``state``, and (when scripts may have changed them) its
story cards. A snapshot is a plain JSON object with those parts; ``cards`` is present only when
it was captured, and restoring a snapshot without it leaves the cards alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from engine.storage.models import Adventure, AdventureCard, AdventureScript

#: The card columns a snapshot keeps (the id too, so a script's card ids stay stable).
CARD_FIELDS = ("id", "position", "type", "title", "keys", "entry", "description", "always_on")


def capture(
    world_state: dict[str, Any],
    script_state: dict[str, Any],
    cards: Sequence[Any] | None = None,
) -> dict[str, Any]:
    """A snapshot of the given state; pass ``cards`` when they may change before the next one."""
    snapshot: dict[str, Any] = {"world_state": world_state, "script_state": script_state}
    if cards is not None:
        snapshot["cards"] = [_card_fields(card) for card in cards]
    return snapshot


def _card_fields(card: Any) -> dict[str, Any]:
    """A card row, or a card as an earlier snapshot holds it, in the snapshot's shape."""
    if isinstance(card, dict):
        return {name: card[name] for name in CARD_FIELDS if name in card}
    return {name: getattr(card, name) for name in CARD_FIELDS}


async def load_cards(session: AsyncSession, adventure_id: int) -> list[AdventureCard]:
    """The adventure's cards, whole rows, in their order: what snapshots and scripts see (the
    context reads lighter ones, ``engine.context.load_context_cards``)."""
    result = await session.execute(
        select(AdventureCard)
        .where(col(AdventureCard.adventure_id) == adventure_id)
        .order_by(col(AdventureCard.position), col(AdventureCard.id))
    )
    return list(result.scalars())


async def capture_current(session: AsyncSession, adventure: Adventure) -> dict[str, Any]:
    """The adventure's state as it stands; its cards too when it has scripts (which may change
    them), the same rule a turn's snapshot follows."""
    assert adventure.id is not None
    scripted = await session.scalar(
        select(col(AdventureScript.id))
        .where(
            col(AdventureScript.adventure_id) == adventure.id,
            col(AdventureScript.enabled).is_(True),
        )
        .limit(1)
    )
    cards = await load_cards(session, adventure.id) if scripted is not None else None
    return capture(adventure.world_state, adventure.script_state, cards)


async def restore(session: AsyncSession, adventure_id: int, snapshot: dict[str, Any]) -> None:
    """Put the adventure's state back as ``snapshot`` holds it, inside the caller's transaction."""
    await session.execute(
        update(Adventure)
        .where(col(Adventure.id) == adventure_id)
        .values(
            world_state=snapshot.get("world_state") or {},
            script_state=snapshot.get("script_state") or {},
        )
    )
    cards = snapshot.get("cards")
    if cards is None:
        return
    # Read before the delete: this adventure's own cards may hold the highest ids.
    highest = await session.scalar(select(func.max(col(AdventureCard.id)))) or 0
    await session.execute(
        delete(AdventureCard).where(col(AdventureCard.adventure_id) == adventure_id)
    )
    if not cards:
        return
    # A card keeps its id when that id is free and was issued by this database (no higher than
    # the highest id in the table), so scripts that remember ids keep finding their cards. Ids
    # from elsewhere (a snapshot inside an imported adventure file) could collide with another
    # adventure's card or run ahead of PostgreSQL's sequence: those cards get new ids.
    wanted = [card["id"] for card in cards if isinstance(card.get("id"), int)]
    in_use = select(col(AdventureCard.id)).where(col(AdventureCard.id).in_(wanted))
    taken = set(await session.scalars(in_use)) if wanted else set()
    rows = []
    for card in cards:
        row = {name: card[name] for name in CARD_FIELDS if name in card}
        card_id = row.get("id")
        if not isinstance(card_id, int) or card_id in taken or card_id > highest:
            row.pop("id", None)
        else:
            taken.add(card_id)
        rows.append({**row, "adventure_id": adventure_id})
    # One statement per shape: rows with and without an id cannot share an executemany.
    for with_id in (True, False):
        batch = [row for row in rows if ("id" in row) is with_id]
        if batch:
            await session.execute(insert(AdventureCard), batch)
