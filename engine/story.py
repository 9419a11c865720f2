"""Reading a line of the story tree (the path from the root to a head, or its tail), and the
version guard every change of the story's head passes.

A line is found by walking ``parent_id`` links in one recursive query, never by loading every
node of the adventure, and only light columns are selected (heavy ones are deferred).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Integer,
    Select,
    bindparam,
    func,
    literal,
    literal_column,
    select,
    update,
)
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased
from sqlmodel import col

from engine.errors import StoryMovedOn
from engine.storage.changes import rows_changed
from engine.storage.models import Adventure, StoryNode, utcnow


async def line_tail(session: AsyncSession, head_id: int, limit: int) -> list[StoryNode]:
    """The last ``limit`` nodes of the line ending at ``head_id``, oldest first."""
    if limit <= 0:
        return []
    step = aliased(StoryNode)
    line = (
        select(col(StoryNode.id), col(StoryNode.parent_id), literal(1).label("depth"))
        .where(col(StoryNode.id) == head_id)
        .cte("line", recursive=True)
    )
    line = line.union_all(
        select(col(step.id), col(step.parent_id), (line.c.depth + 1).label("depth"))
        .join(line, col(step.id) == line.c.parent_id)
        .where(line.c.depth < limit)
    )
    rows = await session.scalars(
        select(StoryNode).join(line, col(StoryNode.id) == line.c.id).order_by(col(StoryNode.index))
    )
    return list(rows)


def _measured(node: Any) -> ColumnElement[int]:
    """A node's tokens as measured when it was stored; about 4 characters a token if not."""
    return func.coalesce(node.token_count, func.length(node.text) // 4)


@cache
def _window_query() -> Select[tuple[StoryNode]]:
    """``line_window``'s statement, built once (building it costs more than running it)."""
    step = aliased(StoryNode)
    line = (
        select(
            col(StoryNode.id),
            col(StoryNode.parent_id),
            literal_column("1", Integer).label("depth"),
            _measured(StoryNode).label("total"),
        )
        .where(col(StoryNode.id) == bindparam("head_id", type_=Integer))
        .cte("line", recursive=True)
    )
    line = line.union_all(
        select(
            col(step.id),
            col(step.parent_id),
            (line.c.depth + 1).label("depth"),
            (line.c.total + _measured(step)).label("total"),
        )
        .join(line, col(step.id) == line.c.parent_id)
        .where(
            line.c.depth < bindparam("max_entries", type_=Integer),
            line.c.total < bindparam("token_limit", type_=Integer),
        )
    )
    return (
        select(StoryNode).join(line, col(StoryNode.id) == line.c.id).order_by(col(StoryNode.index))
    )


async def line_window(
    session: AsyncSession, head_id: int, *, token_limit: int, max_entries: int
) -> list[StoryNode]:
    """The newest nodes of the line ending at ``head_id`` that a history budget can use.

    The walk from the head keeps a running sum of the nodes' stored token counts and stops
    after the node that reaches ``token_limit`` (so the caller sees the first one that does not
    fit), or after ``max_entries`` nodes. The head is always included. Oldest first, light
    columns only. What is read depends on the budget, never on how long the story is.
    """
    if max_entries <= 0:
        return []
    rows = await session.scalars(
        _window_query(),
        {"head_id": head_id, "token_limit": token_limit, "max_entries": max_entries},
    )
    return list(rows)


def line_length(head: StoryNode) -> int:
    """How many entries the line ending at ``head`` has: its index is its depth from the root."""
    return head.index + 1


async def advance_version(
    session: AsyncSession, adventure_id: int, expected: int, *, moved_on: str, **values: Any
) -> int:
    """The version guard: move the adventure from version ``expected`` to the next, writing
    ``values`` to its row with it; returns the new version.

    Raises ``StoryMovedOn`` with the ``moved_on`` message when the version is no longer
    ``expected`` (someone moved the story since it was read): the caller's transaction is then
    rolled back whole, so nothing it wrote before the guard is kept either.
    """
    if not await update_unmoved(
        session, adventure_id, expected, version=Adventure.version + 1, **values
    ):
        raise StoryMovedOn(moved_on)
    return expected + 1


async def update_unmoved(
    session: AsyncSession, adventure_id: int, expected: int, **values: Any
) -> bool:
    """Write ``values`` to the adventure's row only while its version is still ``expected``;
    whether it was. The version stays as it is: this is for a change that is no step of the
    story (a script that stopped an action keeps its state), so buttons drawn for the current
    version still work after it."""
    moved = await rows_changed(
        session,
        update(Adventure)
        .where(col(Adventure.id) == adventure_id, col(Adventure.version) == expected)
        .values(updated_at=utcnow(), **values),
    )
    return moved == 1
