"""Users and servers: rows made on first contact and kept fresh.

One upsert statement each (``INSERT … ON CONFLICT DO UPDATE``, which SQLite and PostgreSQL both
speak), so two first interactions arriving at once cannot collide.

A user row is made only when that person does something (``touch_user``: a command, a button),
never on their behalf by work running later: a turn that was asked for before its player
deleted their data (``/profile delete``) must not bring them back. Such work checks that its
people are still there (``lock_users``) and is refused if not (``engine.errors.PlayerDeleted``).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from sqlalchemy.ext.asyncio import AsyncSession

from engine.storage.dialect import insert_for, locked_read
from engine.storage.models import Server, User, utcnow

if TYPE_CHECKING:
    from engine.people.access.rules import Actor

_users = User.metadata.tables[User.__tablename__]


async def touch_actor(session: AsyncSession, actor: Actor) -> None:
    """Whoever acts, and the server they act in: their rows made or kept fresh."""
    await touch_user(session, actor.user_id, actor.user_name)
    if actor.server_id is not None:
        await touch_server(session, actor.server_id, actor.server_name)


async def touch_user(session: AsyncSession, user_id: int, name: str = "") -> None:
    """Create the user's row on first contact; record that they were seen now."""
    now = utcnow()
    stmt = insert_for(session, User).values(id=user_id, name=name, created_at=now, last_seen_at=now)
    update: dict[str, Any] = {"last_seen_at": now}
    if name:
        update["name"] = name
    await session.execute(stmt.on_conflict_do_update(index_elements=["id"], set_=update))


async def lock_users(session: AsyncSession, user_ids: Collection[int]) -> set[int]:
    """Which of these users exist, locked until the caller's transaction ends: a deletion
    of one of them waits for that transaction (or went first, and the user is missing)."""
    if not user_ids:
        return set()
    statement = locked_read(session, _users, (_users.c.id,), _users.c.id.in_(list(user_ids)))
    return set((await session.scalars(statement)).all())


async def touch_server(session: AsyncSession, server_id: int, name: str = "") -> None:
    """Create the server's row on first contact; a server seen again is no longer 'left'."""
    stmt = insert_for(session, Server).values(id=server_id, name=name, created_at=utcnow())
    update: dict[str, Any] = {"left_at": None}
    if name:
        update["name"] = name
    await session.execute(stmt.on_conflict_do_update(index_elements=["id"], set_=update))
