"""Writing the story's line: the version guard every change of the story's head passes, and
the branch a new turn lands on (the line extended, or forked beside a moved-back head)."""

from __future__ import annotations

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from engine.storage.models import Adventure, Branch
from engine.story.line.positions import story_cut_back


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
) -> int | None:
    """A turn was written below ``head_id``: extend the active branch, or fork a new one when
    the head had been moved back from the branch's tip (the old future stays on its branch).

    Returns the branch now active. Inside the turn's transaction.
    """
    assert adventure.id is not None
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
