"""What a story node remembers of the adventure's changeable state.

Undo, redo, retry and branch switches must put the adventure back exactly as it was at a
position: its world state, its scripts' ``state``, its narrative state (``engine.story.narrative``)
and (when scripts may have changed them) its story cards. A snapshot is a plain JSON object
with those parts; ``cards`` is present only when it was captured, and restoring a snapshot
without it leaves the cards alone; ``story`` only when the narrative state holds something, and
restoring a snapshot without it empties the narrative state (there was none at that position).

A snapshot is stored once per turn: a narrator node's ``state_after`` is the state at that
position, which is also the state before every turn that follows it, so a turn's first node
stores no ``state_before`` of its own and reads its parent's (``story_line.read
.state_before_of``). Only where the parent's would say something else is a ``state_before``
kept: when a position's state changes later (a host's correction before a new branch, a head
leaving a position it was corrected at), the turns below it keep what they saw
(``keep_state_after``). Turns stored before this rule hold both, and read as they always did.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from engine.prompt.lore import clean_lore
from engine.storage.models import Adventure, AdventureCard, AdventureScript, StoryNode

#: The card columns a snapshot keeps (the ids too, the row's and the one a script gave it, so
#: a script's card ids stay stable). Snapshots from before ``script_id`` or ``lore`` lack them.
CARD_FIELDS = (
    "id",
    "position",
    "type",
    "title",
    "keys",
    "entry",
    "description",
    "always_on",
    "script_id",
    "lore",
)


def capture(
    world_state: dict[str, Any],
    script_state: dict[str, Any],
    cards: Sequence[Any] | None = None,
    *,
    story: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A snapshot of the given state; pass ``cards`` when they may change before the next one."""
    snapshot: dict[str, Any] = {"world_state": world_state, "script_state": script_state}
    if story:
        snapshot["story"] = story
    if cards is not None:
        snapshot["cards"] = [_card_fields(card) for card in cards]
    return snapshot


def _card_fields(card: Any) -> dict[str, Any]:
    """A card row, or a card as an earlier snapshot holds it, in the snapshot's shape."""
    if isinstance(card, dict):
        return {name: card[name] for name in CARD_FIELDS if name in card}
    return {name: getattr(card, name) for name in CARD_FIELDS}


async def keep_state_after(
    session: AsyncSession,
    node_id: int,
    snapshot: dict[str, Any],
    *,
    new_child_id: int | None = None,
) -> None:
    """Store ``snapshot`` as the state at ``node_id`` (its ``state_after``), inside the caller's
    transaction.

    The turns below the node that keep no ``state_before`` read this value as the state they
    started from; when it changes, they are given the old value as their own first.
    ``new_child_id``, a turn written in this transaction, started from the new value.
    """
    others = select(col(StoryNode.id)).where(col(StoryNode.parent_id) == node_id)
    if new_child_id is not None:
        others = others.where(col(StoryNode.id) != new_child_id)
    # Ids only first: a turn on a line that never forked reads no state at all.
    other_ids = list(await session.scalars(others))
    if other_ids:
        old = await session.scalar(
            select(col(StoryNode.state_after)).where(col(StoryNode.id) == node_id)
        )
        if old is not None and old != snapshot:
            # Read, not filtered in SQL: an absent state_before is SQL NULL or JSON null (what
            # the JSON type writes for None), and PostgreSQL's json has no equality to test the
            # latter with. A node has few children (its branches).
            rows = await session.execute(
                select(col(StoryNode.id), col(StoryNode.state_before)).where(
                    col(StoryNode.id).in_(other_ids)
                )
            )
            heir_ids = [row.id for row in rows if row.state_before is None]
            if heir_ids:
                await session.execute(
                    update(StoryNode)
                    .where(col(StoryNode.id).in_(heir_ids))
                    .values(state_before=old)
                )
    await session.execute(
        update(StoryNode).where(col(StoryNode.id) == node_id).values(state_after=snapshot)
    )


async def load_cards(session: AsyncSession, adventure_id: int) -> list[AdventureCard]:
    """The adventure's cards, whole rows, in their order: what snapshots and scripts see (the
    context reads lighter ones, ``engine.prompt.cards.load_context_cards``)."""
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
    return capture(
        adventure.world_state, adventure.script_state, cards, story=adventure.story_state
    )


async def restore(session: AsyncSession, adventure_id: int, snapshot: dict[str, Any]) -> None:
    """Put the adventure's state back as ``snapshot`` holds it, inside the caller's transaction."""
    await session.execute(
        update(Adventure)
        .where(col(Adventure.id) == adventure_id)
        .values(
            world_state=snapshot.get("world_state") or {},
            script_state=snapshot.get("script_state") or {},
            story_state=snapshot.get("story") or {},
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
        # A snapshot from an imported file may hold anything there: a script id is text.
        row["script_id"] = str(row.get("script_id") or "")
        # World-info options too, read as a file's are; snapshots from before them lack them.
        row["lore"] = clean_lore(row.get("lore"), [])
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
