"""Users and servers the operator blocked (``/operator block``), and the one check of them.

Every command and button asks ``check`` before it does anything (the front end calls it from
one helper); the rule itself (who is refused, the operator never) is ``engine.people.access``'s.

The check is asked before an interaction is acknowledged, when Discord's 3 seconds run and the
busiest interactions ask the database nothing, so it reads this process's copy of the blocked
set (small: a row per block), never the database. The copy is read when the services start
and again every ``BLOCKS_REFRESH_S`` seconds (``bot.scheduler``): a block made in this process
applies here at once, one made in another process within that period. An action that waited
(in a turn's queue, in a round) is asked again from the database when it is about to play
(``blocked_now``), so a block made anywhere stops it.
"""

from __future__ import annotations

from typing import Literal

from sqlalchemy import and_, delete, or_, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from engine.errors import InvalidInput
from engine.people.access.checks import blocked_refusal, check_may_operate, check_not_blocked
from engine.people.access.rules import Actor
from engine.storage.database import Database
from engine.storage.dialect import insert_for
from engine.storage.models import Block, utcnow

Kind = Literal["user", "server"]
#: How often each process reads the blocked set again.
BLOCKS_REFRESH_S = 15.0


class Blocks:
    def __init__(self, db: Database) -> None:
        self.db = db
        self._blocked: frozenset[tuple[str, int]] = frozenset()

    async def refresh(self) -> None:
        """Read the blocked set again (at start-up, then on the scheduler)."""
        async with self.db.session() as session:
            rows = (await session.execute(select(col(Block.kind), col(Block.target_id)))).all()
        self._blocked = frozenset((kind, target) for kind, target in rows)

    def is_blocked(self, user_id: int, server_id: int | None) -> tuple[bool, bool]:
        """Whether the user, and the server they act in, are blocked (this process's copy)."""
        blocked = self._blocked
        return ("user", user_id) in blocked, (
            server_id is not None and ("server", server_id) in blocked
        )

    def check(self, actor: Actor) -> None:
        """Refuse (``NotAllowed``, politely) a blocked user, or anyone in a blocked server."""
        user, server = self.is_blocked(actor.user_id, actor.server_id)
        check_not_blocked(actor, user_blocked=user, server_blocked=server)

    async def block(self, actor: Actor, kind: Kind, target_id: int, reason: str = "") -> bool:
        """Block a user or server; False when it already was."""
        check_may_operate(actor)
        if kind == "user" and target_id == actor.user_id:
            raise InvalidInput("You run this bot: blocking yourself would change nothing.")
        async with self.db.transaction() as session:
            statement = insert_for(session, Block).values(
                kind=kind, target_id=target_id, reason=reason[:500], created_at=utcnow()
            )
            result = await session.execute(statement.on_conflict_do_nothing())
        await self.refresh()  # this process sees its own change at once
        return bool(getattr(result, "rowcount", 0))

    async def unblock(self, actor: Actor, kind: Kind, target_id: int) -> bool:
        """False when it was not blocked."""
        check_may_operate(actor)
        async with self.db.transaction() as session:
            result = await session.execute(
                delete(Block).where(col(Block.kind) == kind, col(Block.target_id) == target_id)
            )
        await self.refresh()
        return bool(getattr(result, "rowcount", 0))


async def blocked_now(
    session: AsyncSession, user_ids: set[int], server_id: int | None
) -> tuple[set[int], bool]:
    """Which of ``user_ids`` are blocked, and whether ``server_id`` is, read from the database
    (not this process's copy): where an action that waited is about to play."""
    wanted = [and_(col(Block.kind) == "user", col(Block.target_id).in_(user_ids))]
    if server_id is not None:
        wanted.append(and_(col(Block.kind) == "server", col(Block.target_id) == server_id))
    rows = (
        await session.execute(select(col(Block.kind), col(Block.target_id)).where(or_(*wanted)))
    ).all()
    users = {target for kind, target in rows if kind == "user"}
    return users, any(kind == "server" for kind, _ in rows)


async def check_not_blocked_now(session: AsyncSession, user_id: int, server_id: int | None) -> None:
    """Refuse an action that waited when its player, or its server, was blocked since."""
    users, server = await blocked_now(session, {user_id}, server_id)
    if users or server:
        raise blocked_refusal(user_blocked=bool(users))
