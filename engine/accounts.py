"""Users and servers: rows made on first contact and kept fresh.

One upsert statement each (``INSERT … ON CONFLICT DO UPDATE``, which SQLite and PostgreSQL both
speak), so two first interactions arriving at once cannot collide.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from engine.storage.dialect import insert_for
from engine.storage.models import Server, User, utcnow


async def touch_user(session: AsyncSession, user_id: int, name: str = "") -> None:
    """Create the user's row on first contact; record that they were seen now."""
    now = utcnow()
    stmt = insert_for(session, User).values(id=user_id, name=name, created_at=now, last_seen_at=now)
    update: dict[str, Any] = {"last_seen_at": now}
    if name:
        update["name"] = name
    await session.execute(stmt.on_conflict_do_update(index_elements=["id"], set_=update))


async def touch_server(session: AsyncSession, server_id: int, name: str = "") -> None:
    """Create the server's row on first contact; a server seen again is no longer 'left'."""
    stmt = insert_for(session, Server).values(id=server_id, name=name, created_at=utcnow())
    update: dict[str, Any] = {"left_at": None}
    if name:
        update["name"] = name
    await session.execute(stmt.on_conflict_do_update(index_elements=["id"], set_=update))
