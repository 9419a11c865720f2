"""Reading a line of the story tree: the path from the root to a head, or its tail.

A line is found by walking ``parent_id`` links in one recursive query, never by loading every
node of the adventure, and only light columns are selected (heavy ones are deferred).
"""

from __future__ import annotations

from sqlalchemy import literal, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from engine.storage.models import StoryNode


async def line_tail(session: AsyncSession, head_id: int, limit: int) -> list[StoryNode]:
    """The last ``limit`` nodes of the line ending at ``head_id``, oldest first."""
    if limit <= 0:
        return []
    step = aliased(StoryNode)
    line = (
        select(StoryNode.id, StoryNode.parent_id, literal(1).label("depth"))
        .where(StoryNode.id == head_id)
        .cte("line", recursive=True)
    )
    line = line.union_all(
        select(step.id, step.parent_id, (line.c.depth + 1).label("depth"))
        .join(line, step.id == line.c.parent_id)
        .where(line.c.depth < limit)
    )
    rows = await session.scalars(
        select(StoryNode).join(line, StoryNode.id == line.c.id).order_by(StoryNode.index)
    )
    return list(rows)
