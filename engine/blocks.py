"""Users and servers the operator blocked (``/operator block``), and the one check of them.

Every command and button asks ``check`` before it does anything (the front end calls it from
one helper); the rule itself (who is refused, the operator never) is ``engine.access``'s.

The blocked set is small, and asked on every interaction, so each process keeps a copy read at
most ``ttl`` seconds ago: a block made in this process applies here at once, one made in
another process within ``ttl`` seconds. Nothing else is cached.
"""

from __future__ import annotations

import time
from typing import Literal

from sqlalchemy import delete, select
from sqlmodel import col

from engine.access import Actor, check_may_operate, check_not_blocked
from engine.storage.database import Database
from engine.storage.dialect import insert_for
from engine.storage.models import Block, utcnow

Kind = Literal["user", "server"]
#: How old this process's copy of the blocked set may be.
BLOCKS_TTL_S = 15.0


class Blocks:
    def __init__(self, db: Database, *, ttl: float = BLOCKS_TTL_S) -> None:
        self.db = db
        self.ttl = ttl
        self._blocked: frozenset[tuple[str, int]] = frozenset()
        self._read_at: float | None = None

    async def _current(self) -> frozenset[tuple[str, int]]:
        now = time.monotonic()
        if self._read_at is None or now - self._read_at > self.ttl:
            async with self.db.session() as session:
                rows = (await session.execute(select(col(Block.kind), col(Block.target_id)))).all()
            self._blocked = frozenset((kind, target) for kind, target in rows)
            self._read_at = now
        return self._blocked

    async def is_blocked(self, user_id: int, server_id: int | None) -> tuple[bool, bool]:
        """Whether the user, and the server they act in, are blocked."""
        blocked = await self._current()
        return ("user", user_id) in blocked, (
            server_id is not None and ("server", server_id) in blocked
        )

    async def check(self, actor: Actor) -> None:
        """Refuse (``NotAllowed``, politely) a blocked user, or anyone in a blocked server."""
        user, server = await self.is_blocked(actor.user_id, actor.server_id)
        check_not_blocked(actor, user_blocked=user, server_blocked=server)

    async def block(self, actor: Actor, kind: Kind, target_id: int, reason: str = "") -> bool:
        """Block a user or server; False when it already was."""
        check_may_operate(actor)
        async with self.db.transaction() as session:
            statement = insert_for(session, Block).values(
                kind=kind, target_id=target_id, reason=reason[:500], created_at=utcnow()
            )
            result = await session.execute(statement.on_conflict_do_nothing())
        self._read_at = None  # read again: this process sees its own change at once
        return bool(getattr(result, "rowcount", 0))

    async def unblock(self, actor: Actor, kind: Kind, target_id: int) -> bool:
        """False when it was not blocked."""
        check_may_operate(actor)
        async with self.db.transaction() as session:
            result = await session.execute(
                delete(Block).where(col(Block.kind) == kind, col(Block.target_id) == target_id)
            )
        self._read_at = None
        return bool(getattr(result, "rowcount", 0))

    async def counts(self) -> tuple[int, int]:
        """Blocked users and servers."""
        blocked = await self._current()
        users = sum(1 for kind, _ in blocked if kind == "user")
        return users, len(blocked) - users
