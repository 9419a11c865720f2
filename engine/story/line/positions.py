"""Story positions, node indexes, and cutting the memory bank back with the story.

Two coordinate systems meet here, and only here (DESIGN.md §5):

* a **position** counts actions: position ``p`` is the story after its ``p``-th completed turn
  (a narrator reply that is not the opening), 0 is the opening. The cadence and the cursors
  (``Adventure.memory_cursor``, ``summary_cursor``, ``SummaryVersion.through``) are positions;
* an **index** is a story node's depth on its line (``StoryNode.index``): a ``/do`` turn takes
  two indexes (the action and the reply), a ``/continue`` one. Memory sources
  (``Memory.source_start``/``source_end``) are indexes, so a memory names the very entries it
  sums up.

``LinePositions`` is the one translation between them. Mixing the two up silently skips turns
or summarises them twice (the AI-DnD notes' "two coordinate systems" bug class), so nothing
else converts by arithmetic.

Every move of the story's head that takes turns out of the line (undo, a retry replacing a turn,
a branch switch, writing below a moved-back head) calls ``story_cut_back`` in its transaction.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from functools import cache
from typing import Any

from sqlalchemy import Integer, Select, bindparam, delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased
from sqlmodel import col

from engine.storage.memory_models import Memory, MemoryOrigin, SummaryVersion
from engine.storage.models import ActionType, Adventure, Role, StoryNode


@dataclass(frozen=True, slots=True)
class LinePositions:
    """The completed turns of one story line: the translation between positions and indexes."""

    #: The node index of each turn's reply, oldest first: position p ends at ``indexes[p-1]``.
    indexes: tuple[int, ...] = ()
    #: The node id of each turn's reply, to tell whether a later line still holds the same turn.
    ids: tuple[int, ...] = ()

    @property
    def count(self) -> int:
        """How many actions the line has: the position of its newest turn."""
        return len(self.indexes)

    def index_of(self, position: int) -> int:
        """The node index where position ``position`` ends (0, the opening, for position 0)."""
        if not 0 <= position <= self.count:
            raise ValueError(f"position {position} is not on a line of {self.count} turns")
        return self.indexes[position - 1] if position else 0

    def position_of(self, index: int) -> int:
        """How many turns end at or before node index ``index``."""
        return bisect_right(self.indexes, index)

    def sources(self, after: int, through: int) -> tuple[int, int]:
        """The node indexes (first, last) of the turns after position ``after`` through
        ``through``: what a memory of that stretch names as its source."""
        return self.index_of(after) + 1, self.index_of(through)

    def id_at(self, position: int) -> int | None:
        return self.ids[position - 1] if 0 < position <= self.count else None


@cache
def _line_positions_query() -> Select[Any]:
    """``line_positions``'s statement, built once (as ``engine.story.line.read``'s queries):
    building the recursive query (an alias, a CTE and their column collections) took about
    2 ms, and it is read at every turn's commit and memory catch-up."""
    step = aliased(StoryNode)
    line = (
        select(col(StoryNode.id), col(StoryNode.parent_id))
        .where(col(StoryNode.id) == bindparam("head_id", type_=Integer))
        .cte("memory_line", recursive=True)
    )
    line = line.union_all(
        select(col(step.id), col(step.parent_id)).join(line, col(step.id) == line.c.parent_id)
    )
    # Labelled: read as ``row.index``, the column would be taken for the method every
    # sequence has by that name.
    return (
        select(col(StoryNode.index).label("node_index"), col(StoryNode.id))
        .join(line, col(StoryNode.id) == line.c.id)
        .where(col(StoryNode.role) == Role.NARRATOR, col(StoryNode.action) != ActionType.START)
        .order_by(col(StoryNode.index))
    )


async def line_positions(session: AsyncSession, head_id: int | None) -> LinePositions:
    """The completed turns of the line ending at ``head_id``: one recursive query over ids,
    parent links and indexes (no text)."""
    if head_id is None:
        return LinePositions()
    rows = (await session.execute(_line_positions_query(), {"head_id": head_id})).all()
    return LinePositions(tuple(row.node_index for row in rows), tuple(row.id for row in rows))


async def story_cut_back(session: AsyncSession, adventure_id: int, kept_through: int) -> None:
    """The line now keeps only the nodes up to index ``kept_through`` of the old line.

    Called inside the transaction that moves the head (before or after the head itself moves:
    the old and the new line share every node up to ``kept_through``). Afterwards:

    * memories the bank wrote from entries past the cut are deleted: they describe text that
      is no longer in the story (a player's own memories stay);
    * the memory cursor comes back to the end of the newest memory left, so the cadence writes
      the cut stretch again from the new line, neither skipping a turn nor covering one twice;
    * a summary that reached past the cut is replaced by the newest version that did not
      (none: the summary is empty again), and the summary cursor comes back with it.
    """
    found = (
        await session.execute(
            select(
                col(Adventure.head_node_id),
                col(Adventure.memory_cursor),
                col(Adventure.summary_cursor),
            )
            .where(col(Adventure.id) == adventure_id)
            .with_for_update()
        )
    ).first()
    if found is None:
        return
    positions = await line_positions(session, found.head_node_id)
    cut = positions.position_of(kept_through)

    await session.execute(
        delete(Memory).where(
            col(Memory.adventure_id) == adventure_id,
            col(Memory.origin) == MemoryOrigin.STORY,
            col(Memory.source_end) > kept_through,
        )
    )
    newest_end = await session.scalar(
        select(func.max(col(Memory.source_end))).where(
            col(Memory.adventure_id) == adventure_id, col(Memory.origin) == MemoryOrigin.STORY
        )
    )
    memory_cursor = positions.position_of(newest_end) if newest_end is not None else 0

    await session.execute(
        delete(SummaryVersion).where(
            col(SummaryVersion.adventure_id) == adventure_id, col(SummaryVersion.through) > cut
        )
    )
    # Never forward: a cursor already behind the memories stays where it is.
    values: dict[str, object] = {"memory_cursor": min(found.memory_cursor, memory_cursor)}
    if found.summary_cursor > cut:
        kept = (
            await session.execute(
                select(col(SummaryVersion.text), col(SummaryVersion.through))
                .where(col(SummaryVersion.adventure_id) == adventure_id)
                .order_by(col(SummaryVersion.through).desc(), col(SummaryVersion.id).desc())
                .limit(1)
            )
        ).first()
        values["story_summary"] = kept.text if kept else ""
        values["summary_cursor"] = kept.through if kept else 0
    await session.execute(
        update(Adventure).where(col(Adventure.id) == adventure_id).values(**values)
    )
