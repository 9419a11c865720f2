"""People and servers whose data goes: idle guests, servers the bot has left, and /profile.

A user is a *guest* until they own something meant to last (a scenario they imported or made)
or choose to keep their data (``/profile keep``). Guests idle past the retention period are
deleted with everything they own in one ``DELETE``: ownership is a cascading foreign key in the
database (engine.storage.models), so nothing is walked row by row. Adventures owned by a server
are not theirs and stay (their host link is set to null).

A server the bot leaves is marked (``left_at``); its data goes a grace period later unless the
bot rejoins (engine.accounts.touch_server clears the mark).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from engine.accounts import touch_server, touch_user
from engine.errors import NotFound
from engine.storage.database import Database
from engine.storage.models import Adventure, Scenario, Server, StoryNode, User, utcnow

#: How long a server's data stays after the bot leaves it, in case it is invited back.
DEFAULT_SERVER_GRACE = timedelta(days=7)


def _owns_lasting_things() -> ColumnElement[bool]:
    return select(Scenario.id).where(Scenario.owner_id == User.id).exists()


def is_guest_clause() -> ColumnElement[bool]:
    """SQL for "this user is a guest": keeps nothing and owns no scenario."""
    return User.keep_data.is_(False) & ~_owns_lasting_things()


async def remove_idle_guests(
    db: Database, retention: timedelta, *, now: datetime | None = None
) -> int:
    """Delete guests last seen more than ``retention`` ago, with all they own. One statement;
    returns how many users went."""
    cutoff = (now or utcnow()) - retention
    async with db.session() as session, session.begin():
        result = await session.execute(
            delete(User).where(User.last_seen_at < cutoff, is_guest_clause())
        )
        return result.rowcount or 0


async def record_contact(
    db: Database,
    user_id: int,
    name: str = "",
    *,
    server_id: int | None = None,
    server_name: str = "",
) -> None:
    """Someone interacted: their user row exists from now on and was seen now."""
    async with db.session() as session, session.begin():
        await touch_user(session, user_id, name)
        if server_id is not None:
            await touch_server(session, server_id, server_name)


async def server_joined(db: Database, server_id: int, name: str = "") -> None:
    """The bot is in a server (again): a pending removal is cancelled."""
    async with db.session() as session, session.begin():
        await touch_server(session, server_id, name)


async def server_left(db: Database, server_id: int, *, now: datetime | None = None) -> None:
    """The bot left (or was removed from) a server: its data goes after the grace period."""
    async with db.session() as session, session.begin():
        await session.execute(
            update(Server).where(Server.id == server_id).values(left_at=now or utcnow())
        )


async def remove_departed_servers(
    db: Database, grace: timedelta = DEFAULT_SERVER_GRACE, *, now: datetime | None = None
) -> int:
    """Delete servers the bot left more than ``grace`` ago, with all they own (one statement)."""
    cutoff = (now or utcnow()) - grace
    async with db.session() as session, session.begin():
        result = await session.execute(
            delete(Server).where(Server.left_at.is_not(None), Server.left_at < cutoff)
        )
        return result.rowcount or 0


# --- /profile ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Profile:
    """What Campfire stores about one person."""

    user_id: int
    name: str
    created_at: datetime
    last_seen_at: datetime
    keep_data: bool
    scenarios: int  # scenarios they own (imported or made)
    own_adventures: int  # adventures that are theirs (DMs)
    hosted_adventures: int  # server adventures they host (the server's, not theirs)
    story_entries: int  # actions and turns they wrote, anywhere
    retention_days: int

    @property
    def guest(self) -> bool:
        return not self.keep_data and self.scenarios == 0

    @property
    def removal_after(self) -> datetime | None:
        """When a guest's data goes if they do not come back."""
        if not self.guest:
            return None
        return self.last_seen_at + timedelta(days=self.retention_days)


async def get_profile(
    db: Database, user_id: int, *, retention_days: int, name: str | None = None
) -> Profile:
    """What is stored about ``user_id``. With ``name`` (they are asking, so they are here),
    their row is made or refreshed first; without it, a stranger is ``NotFound``."""
    async with db.session() as session, session.begin():
        if name is not None:
            await touch_user(session, user_id, name)
        user = await session.get(User, user_id)
        if user is None:
            raise NotFound("Campfire stores nothing about you.")
        return Profile(
            user_id=user_id,
            name=user.name,
            created_at=user.created_at,
            last_seen_at=user.last_seen_at,
            keep_data=user.keep_data,
            scenarios=await _count(session, Scenario, Scenario.owner_id == user_id),
            own_adventures=await _count(session, Adventure, Adventure.owner_id == user_id),
            hosted_adventures=await _count(
                session,
                Adventure,
                (Adventure.host_id == user_id) & Adventure.server_id.is_not(None),
            ),
            story_entries=await _count(session, StoryNode, StoryNode.author_id == user_id),
            retention_days=retention_days,
        )


async def set_keep_data(db: Database, user_id: int, keep: bool, *, name: str = "") -> None:
    async with db.session() as session, session.begin():
        await touch_user(session, user_id, name)
        result = await session.execute(
            update(User).where(User.id == user_id).values(keep_data=keep)
        )
        if result.rowcount != 1:
            raise NotFound("Campfire stores nothing about you.")


async def delete_user(db: Database, user_id: int) -> None:
    """Delete a user and everything they own, now (one statement)."""
    async with db.session() as session, session.begin():
        result = await session.execute(delete(User).where(User.id == user_id))
        if result.rowcount != 1:
            raise NotFound("Campfire stores nothing about you.")


async def _count(session: AsyncSession, model: type, condition: ColumnElement[bool]) -> int:
    return await session.scalar(select(func.count()).select_from(model).where(condition)) or 0
