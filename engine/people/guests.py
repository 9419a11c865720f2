"""People and servers whose data goes: idle guests, and servers the bot has left.

A user is a *guest* until they own something meant to last (a scenario they imported or made)
or choose to keep their data (``/profile keep``). Guests idle past the retention period are
deleted with everything they own in one ``DELETE``: ownership is a cascading foreign key in the
database (engine.storage.models), so nothing is walked row by row. Adventures owned by a server
are not theirs and stay (their host link is set to null).

A server the bot leaves is marked (``engine.people.profiles.Profiles.server_left``); its data goes a
grace period later unless the bot rejoins (engine.people.accounts.touch_server clears the mark).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from sqlalchemy import ColumnElement, delete, select
from sqlmodel import col

from engine.storage.changes import rows_changed
from engine.storage.models import Scenario, Server, User, utcnow

if TYPE_CHECKING:
    from engine.storage.database import Database

#: How long a server's data stays after the bot leaves it, in case it is invited back.
DEFAULT_SERVER_GRACE = timedelta(days=7)


def _owns_lasting_things() -> ColumnElement[bool]:
    return select(col(Scenario.id)).where(col(Scenario.owner_id) == col(User.id)).exists()


def is_guest_clause() -> ColumnElement[bool]:
    """SQL for "this user is a guest": keeps nothing and owns no scenario."""
    return col(User.keep_data).is_(False) & ~_owns_lasting_things()


async def remove_idle_guests(
    db: Database, retention: timedelta, *, now: datetime | None = None
) -> int:
    """Delete guests last seen more than ``retention`` ago, with all they own. One statement;
    returns how many users went."""
    cutoff = (now or utcnow()) - retention
    async with db.transaction() as session:
        return await rows_changed(
            session, delete(User).where(col(User.last_seen_at) < cutoff, is_guest_clause())
        )


async def remove_departed_servers(
    db: Database, grace: timedelta = DEFAULT_SERVER_GRACE, *, now: datetime | None = None
) -> int:
    """Delete servers the bot left more than ``grace`` ago, with all they own (one statement)."""
    cutoff = (now or utcnow()) - grace
    async with db.transaction() as session:
        return await rows_changed(
            session,
            delete(Server).where(col(Server.left_at).is_not(None), col(Server.left_at) < cutoff),
        )
