"""Reading a line of the story tree: the path from the root to a head (or its tail, or a window
of it sized by tokens), ancestries, where two lines part, and the state a position leaves behind.

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
)
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased
from sqlmodel import col

from engine.storage.models import ActionType, Adventure, Role, StoryNode
from engine.story.snapshots import capture
from engine.story.world.apply import schema_of
from engine.story.world.schema import initial_state


@cache
def _tail_query() -> Select[tuple[StoryNode]]:
    """``line_tail``'s statement, built once (as ``_window_query``)."""
    step = aliased(StoryNode)
    line = (
        select(col(StoryNode.id), col(StoryNode.parent_id), literal(1).label("depth"))
        .where(col(StoryNode.id) == bindparam("head_id", type_=Integer))
        .cte("line", recursive=True)
    )
    line = line.union_all(
        select(col(step.id), col(step.parent_id), (line.c.depth + 1).label("depth"))
        .join(line, col(step.id) == line.c.parent_id)
        .where(line.c.depth < bindparam("limit", type_=Integer))
    )
    return (
        select(StoryNode).join(line, col(StoryNode.id) == line.c.id).order_by(col(StoryNode.index))
    )


async def line_tail(session: AsyncSession, head_id: int, limit: int) -> list[StoryNode]:
    """The last ``limit`` nodes of the line ending at ``head_id``, oldest first."""
    if limit <= 0:
        return []
    rows = await session.scalars(_tail_query(), {"head_id": head_id, "limit": limit})
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


@cache
def _ancestry_query() -> Select[Any]:
    """``ancestry``'s statement, built once (as ``_window_query``)."""
    step = aliased(StoryNode)
    line = (
        select(col(StoryNode.id), col(StoryNode.parent_id), col(StoryNode.index))
        .where(col(StoryNode.id) == bindparam("node_id", type_=Integer))
        .cte("ancestry", recursive=True)
    )
    line = line.union_all(
        select(col(step.id), col(step.parent_id), col(step.index)).join(
            line, col(step.id) == line.c.parent_id
        )
    )
    # Labelled: read as ``row.index``, the column would be taken for the method every sequence
    # has by that name.
    return select(line.c.id, line.c.index.label("node_index"))


async def ancestry(session: AsyncSession, node_id: int) -> dict[int, int]:
    """Every node on the line ending at ``node_id``: id → index (two light columns only)."""
    rows = await session.execute(_ancestry_query(), {"node_id": node_id})
    return {row.id: row.node_index for row in rows}


async def shared_depth(session: AsyncSession, a: int, b: int) -> int:
    """The index of the deepest node the lines ending at ``a`` and ``b`` share."""
    first, second = await ancestry(session, a), await ancestry(session, b)
    common = [index for node, index in first.items() if node in second]
    return max(common) if common else 0


async def has_children(session: AsyncSession, node_id: int) -> bool:
    child = await session.scalar(
        select(col(StoryNode.id)).where(col(StoryNode.parent_id) == node_id).limit(1)
    )
    return child is not None


async def state_after(session: AsyncSession, adventure: Adventure, node: StoryNode) -> dict:
    """The state to put back when the head comes to ``node`` from elsewhere."""
    assert node.id is not None
    stored = await session.scalar(
        select(col(StoryNode.state_after)).where(col(StoryNode.id) == node.id)
    )
    if stored is not None:
        return stored
    # The opening (and turns stored before state_after existed): what its first child saw.
    child_state = await session.scalar(
        select(col(StoryNode.state_before))
        .where(col(StoryNode.parent_id) == node.id, col(StoryNode.state_before).is_not(None))
        .order_by(col(StoryNode.id))
        .limit(1)
    )
    if child_state is not None:
        return child_state
    schema = schema_of(adventure.stat_schema)
    return capture(initial_state(schema) if schema else {}, {})


async def state_before_of(session: AsyncSession, node_id: int) -> dict | None:
    """The state before ``node_id``, a turn's first node: the one it stores (a turn stored before
    state was kept once per turn, or one whose parent's state changed since), otherwise its
    parent's ``state_after`` (``engine.story.snapshots``). None when neither holds one."""
    parent = aliased(StoryNode)
    row = (
        await session.execute(
            select(col(StoryNode.state_before), col(parent.state_after))
            .outerjoin(parent, col(parent.id) == col(StoryNode.parent_id))
            .where(col(StoryNode.id) == node_id)
        )
    ).first()
    if row is None:
        return None
    own, inherited = row
    return own if own is not None else inherited


async def stored_state_before(session: AsyncSession, node_id: int) -> dict | None:
    """The ``state_before`` ``node_id`` stores itself (None when it reads its parent's)."""
    return await session.scalar(
        select(col(StoryNode.state_before)).where(col(StoryNode.id) == node_id)
    )


def is_turn_boundary(node: StoryNode) -> bool:
    """Where the head may stand: a narrator's text (the opening included)."""
    return node.role == Role.NARRATOR


async def narrator_turns(session: AsyncSession, head_id: int) -> list[int]:
    """Ids of the narrator's replies on the line ending at ``head_id``, oldest first.

    One recursive query over ids and parent links; no story text and no heavy column is read.
    """
    rows = await session.scalars(_narrator_turns_query(), {"head_id": head_id})
    # A stored node always has its id; the model's type allows None for one not yet flushed.
    return [node_id for node_id in rows if node_id is not None]


@cache
def _narrator_turns_query() -> Select[tuple[int | None]]:
    """``narrator_turns``'s statement, built once (as ``_window_query``)."""
    step = aliased(StoryNode)
    line = (
        select(col(StoryNode.id), col(StoryNode.parent_id))
        .where(col(StoryNode.id) == bindparam("head_id", type_=Integer))
        .cte("insight_line", recursive=True)
    )
    line = line.union_all(
        select(col(step.id), col(step.parent_id)).join(line, col(step.id) == line.c.parent_id)
    )
    return (
        select(col(StoryNode.id))
        .join(line, col(StoryNode.id) == line.c.id)
        .where(col(StoryNode.role) == Role.NARRATOR, col(StoryNode.action) != ActionType.START)
        .order_by(col(StoryNode.index))
    )
