"""The adventure's version guard: every change to the story moves its version by one, and only
from the version it read, so a stale button, a second press or a turn overtaken by an undo
changes nothing. Below the story's line and its world state, which both move it.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from engine.errors import StoryMovedOn
from engine.storage.changes import rows_changed
from engine.storage.models import Adventure, utcnow


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
