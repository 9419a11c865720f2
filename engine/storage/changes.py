"""Running an UPDATE or DELETE and learning how many rows it changed."""

from __future__ import annotations

from sqlalchemy import Delete, Update
from sqlalchemy.engine import CursorResult
from sqlalchemy.ext.asyncio import AsyncSession


async def rows_changed(session: AsyncSession, statement: Update | Delete) -> int:
    """Execute ``statement`` and return its row count: the rows its WHERE matched.

    An UPDATE or DELETE without RETURNING answers with its cursor's result, which carries the
    count; the async session types every result as a plain ``Result``, hence the narrowing.
    """
    result = await session.execute(statement)
    assert isinstance(result, CursorResult)
    return result.rowcount
