"""The narrative state's change log: every accepted change with its value before and after,
and every refusal with its reason, naming the turn (node, take, index) that caused it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from engine.storage.story_state_models import StoryStateChange
from engine.story.narrative.events import Outcome

REFUSED = "refused"


@dataclass(frozen=True, slots=True)
class TurnCause:
    """Where a change came from: the turn's node and take, and who proposed it."""

    node_id: int | None
    take: int
    turn_index: int
    by: str


async def record(
    session: AsyncSession, adventure_id: int, cause: TurnCause, outcome: Outcome
) -> None:
    """The outcome's changes and refusals as log rows, inside the caller's transaction."""
    base = {
        "adventure_id": adventure_id,
        "node_id": cause.node_id,
        "take": cause.take,
        "turn_index": cause.turn_index,
        "by": cause.by,
    }
    rows: list[dict[str, Any]] = [
        {
            **base,
            "kind": change.kind,
            "key": change.key[:200],
            "before": change.before,
            "after": change.after,
            "event": change.event,
            "reason": "",
        }
        for change in outcome.changes
    ]
    rows += [
        {
            **base,
            "kind": REFUSED,
            "key": "",
            "before": None,
            "after": None,
            "event": refusal.event if _small(refusal.event) else None,
            "reason": refusal.reason[:300],
        }
        for refusal in outcome.refused
    ]
    session.add_all(StoryStateChange(**row) for row in rows)
    await session.flush()


def _small(event: Any) -> bool:
    """Whether a refused event is worth keeping as written (not a huge blob)."""
    return len(repr(event)) <= 2000


async def changes_at(session: AsyncSession, node_id: int, take: int) -> list[StoryStateChange]:
    """The log rows of one turn's take (and the host's corrections made there), in order."""
    result = await session.scalars(
        select(StoryStateChange)
        .where(col(StoryStateChange.node_id) == node_id, col(StoryStateChange.take) == take)
        .order_by(col(StoryStateChange.id))
    )
    return list(result)
