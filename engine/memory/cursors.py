"""Memory cursors and the story positions they count.

The memory bank's cursors (``Adventure.memory_cursor``, ``summary_cursor``) and memory sources
(``Memory.source_start``/``source_end``) are node indexes on the adventure's current line. Every
move of the story's head that takes turns out of the line (undo, a retry replacing a turn, a
branch switch, writing below a moved-back head) must go through ``story_cut_back`` so that no
turn is skipped or summarised twice, and no memory keeps describing text that is no longer in
the story.
"""

from __future__ import annotations

from sqlalchemy import case, update
from sqlalchemy.ext.asyncio import AsyncSession

from engine.storage.models import Adventure


async def story_cut_back(session: AsyncSession, adventure_id: int, kept_through: int) -> None:
    """The line now keeps only the nodes up to index ``kept_through`` of the old line.

    Called inside the transaction that moves the head. Cursors past the cut come back to it.
    """
    await session.execute(
        update(Adventure)
        .where(Adventure.id == adventure_id)
        .values(
            # CASE, not min()/least(): the one spelling SQLite and PostgreSQL share.
            memory_cursor=case(
                (Adventure.memory_cursor > kept_through, kept_through),
                else_=Adventure.memory_cursor,
            ),
            summary_cursor=case(
                (Adventure.summary_cursor > kept_through, kept_through),
                else_=Adventure.summary_cursor,
            ),
        )
    )
