"""Reading and growing the tree's lines: ancestries, where two lines part, the state a position
leaves behind, and the branch a new turn lands on (extended, or forked)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased
from sqlmodel import col

from engine.memory.cursors import story_cut_back
from engine.snapshots import capture
from engine.storage.models import (
    Adventure,
    Branch,
    Role,
    StoryNode,
)
from engine.world_state.apply import schema_of
from engine.world_state.schema import initial_state


async def ancestry(session: AsyncSession, node_id: int) -> dict[int, int]:
    """Every node on the line ending at ``node_id``: id → index (two light columns only)."""
    step = aliased(StoryNode)
    line = (
        select(col(StoryNode.id), col(StoryNode.parent_id), col(StoryNode.index))
        .where(col(StoryNode.id) == node_id)
        .cte("ancestry", recursive=True)
    )
    line = line.union_all(
        select(col(step.id), col(step.parent_id), col(step.index)).join(
            line, col(step.id) == line.c.parent_id
        )
    )
    # Labelled: read as ``row.index``, the column would be taken for the method every sequence
    # has by that name.
    rows = await session.execute(select(line.c.id, line.c.index.label("node_index")))
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
    return await session.scalar(
        select(col(StoryNode.state_before)).where(col(StoryNode.id) == node_id)
    )


def is_turn_boundary(node: StoryNode) -> bool:
    """Where the head may stand: a narrator's text (the opening included)."""
    return node.role == Role.NARRATOR


async def fork_name(session: AsyncSession, adventure_id: int) -> str:
    taken = set(
        await session.scalars(
            select(col(Branch.name)).where(col(Branch.adventure_id) == adventure_id)
        )
    )
    number = 2
    while f"fork {number}" in taken:
        number += 1
    return f"fork {number}"


async def advance_line(
    session: AsyncSession,
    adventure: Adventure,
    *,
    head_id: int,
    head_index: int,
    new_tip_id: int,
    head_state: dict[str, Any] | None,
) -> int | None:
    """A turn was written below ``head_id``: extend the active branch, or fork a new one when
    the head had been moved back from the branch's tip (the old future stays on its branch).

    Returns the branch now active. Inside the turn's transaction.
    """
    assert adventure.id is not None
    if head_state is not None:
        # The head's state as the turn found it (a host's corrections included), for a later
        # Redo or branch switch back to it.
        await session.execute(
            update(StoryNode).where(col(StoryNode.id) == head_id).values(state_after=head_state)
        )
    if adventure.active_branch_id is None:
        return None
    tip = await session.scalar(
        select(col(Branch.tip_node_id)).where(col(Branch.id) == adventure.active_branch_id)
    )
    if tip == head_id or tip is None:
        await session.execute(
            update(Branch)
            .where(col(Branch.id) == adventure.active_branch_id)
            .values(tip_node_id=new_tip_id)
        )
        return adventure.active_branch_id
    branch = Branch(
        adventure_id=adventure.id,
        name=await fork_name(session, adventure.id),
        tip_node_id=new_tip_id,
    )
    session.add(branch)
    await session.flush()
    await session.execute(
        update(Adventure)
        .where(col(Adventure.id) == adventure.id)
        .values(active_branch_id=branch.id)
    )
    await story_cut_back(session, adventure.id, kept_through=head_index)
    return branch.id


async def fork_beside(
    session: AsyncSession, adventure: Adventure, replaced_id: int, new_id: int
) -> None:
    """A retry written beside its turn (later turns follow the old one): the active branch
    moves over when the old turn was its tip; otherwise the new version gets a branch."""
    assert adventure.id is not None
    if adventure.active_branch_id is None:
        return
    tip = await session.scalar(
        select(col(Branch.tip_node_id)).where(col(Branch.id) == adventure.active_branch_id)
    )
    if tip == replaced_id:
        await session.execute(
            update(Branch)
            .where(col(Branch.id) == adventure.active_branch_id)
            .values(tip_node_id=new_id)
        )
        return
    branch = Branch(
        adventure_id=adventure.id, name=await fork_name(session, adventure.id), tip_node_id=new_id
    )
    session.add(branch)
    await session.flush()
    await session.execute(
        update(Adventure)
        .where(col(Adventure.id) == adventure.id)
        .values(active_branch_id=branch.id)
    )
