"""What Campfire knows of the people and servers it meets: every contact recorded, servers
joined and left, and ``/profile`` (what is stored about you, keeping it, deleting it).

Rows are made and refreshed through ``engine.people.accounts``; what goes when, and why, is
``engine.people.guests``.

Deleting a profile while that person's turns are in flight: their turns are cancelled and
rolled back, never waited for (a turn can take minutes; "delete my data" should not). What
decides is the database, since those turns may run in other processes:

* the deletion removes their request records with them (a cascade), and a queued action whose
  record is gone is dropped when its turn comes (``PlayService``), in any process;
* a turn being written for them is refused by its commit, which requires its players' rows
  and does not make them again (``engine.people.accounts.lock_users``); a commit that got there
  first holds the deletion back until it is stored, and the deletion then unlinks it from them.

On top of that, this process drops their queued and running turns at once (``AdventureQueue``)
instead of letting the model finish a reply that will not be kept.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from sqlalchemy import ColumnElement, delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from engine.errors import InvalidInput, NotFound, PlayerDeleted
from engine.people.accounts import touch_server, touch_user
from engine.people.content import ContentPolicy, Rating, place_rating
from engine.platform.coordination.request_status import QUEUED, RUNNING
from engine.storage.changes import rows_changed
from engine.storage.coordination_models import RequestRecord, TurnLease
from engine.storage.dialect import locked_read
from engine.storage.models import Adventure, Scenario, Server, StoryNode, User, utcnow

if TYPE_CHECKING:
    from engine.people.access.rules import Actor
    from engine.platform.queue import AdventureQueue
    from engine.storage.database import Database

_leases = TurnLease.metadata.tables[TurnLease.__tablename__]

#: The answer to someone Campfire has no row for.
STORES_NOTHING = "Campfire stores nothing about you."

#: A person's contact is recorded at most this often (seconds) in each place (a server, or
#: DMs): it makes their row and moves "last seen", which guest removal counts in days, so an
#: hour's precision changes nothing and saves a write on nearly every interaction.
CONTACT_INTERVAL_S = 60 * 60.0


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


class Profiles:
    """What the front end calls when someone interacts, when the bot joins or leaves a server,
    and for /profile.

    ``retention_days``: how long a guest's data stays after they were last seen (the
    operator's setting), shown on their profile. ``queue``: this process's adventure queue,
    whose turns of a deleted person are dropped at once (without it, the database still
    refuses them when they run or are stored).
    """

    def __init__(
        self,
        db: Database,
        *,
        retention_days: int,
        queue: AdventureQueue | None = None,
        clock: Callable[[], float] = time.monotonic,
        content: ContentPolicy | None = None,
    ) -> None:
        self.db = db
        #: The operator's content rules: the ceiling a player's own rating is held to.
        self.content = content or ContentPolicy()
        self.retention_days = retention_days
        self.queue = queue
        #: Seconds that only ever go forward (``time.monotonic``), for the contact interval.
        self.clock = clock
        #: Contact records being written in this process, by user: a deletion waits for them,
        #: or one that lands after it would make the deleted person's row again.
        self._recording: dict[int, list[asyncio.Event]] = {}
        #: When each (user, server) contact was last recorded by this process, oldest first;
        #: only those within ``CONTACT_INTERVAL_S`` are kept.
        self._recorded: OrderedDict[tuple[int, int | None], float] = OrderedDict()

    # --- membership -------------------------------------------------------------------------

    async def record_contact(
        self, actor: Actor, *, after: Callable[[], Awaitable[object]] | None = None
    ) -> bool:
        """Someone interacted: their user row (and their server's) exists from now on and was
        seen now. Written at most once per ``CONTACT_INTERVAL_S`` for a person in a place,
        decided here without touching the database; ``after``: awaited before writing (the
        interaction's answer, which must not wait on a write). Whether it was written."""
        key = (actor.user_id, actor.server_id)
        now = self.clock()
        while self._recorded:
            oldest, when = next(iter(self._recorded.items()))
            if now - when < CONTACT_INTERVAL_S:
                break
            del self._recorded[oldest]
        if key in self._recorded:
            return False
        # Taken before any wait, so that the person's interactions meanwhile do not write too.
        self._recorded[key] = now
        written = asyncio.Event()
        recording = self._recording.setdefault(actor.user_id, [])
        recording.append(written)
        try:
            if after is not None:
                await after()
            async with self.db.transaction() as session:
                await touch_user(session, actor.user_id, actor.user_name)
                if actor.server_id is not None:
                    await touch_server(session, actor.server_id, actor.server_name)
        except BaseException:
            # Not recorded after all: their next interaction tries again.
            if self._recorded.get(key) == now:
                del self._recorded[key]
            raise
        finally:
            written.set()
            recording.remove(written)
            if not recording:
                del self._recording[actor.user_id]
        return True

    async def server_joined(self, server_id: int, name: str = "") -> None:
        """The bot is in a server (again): a pending removal is cancelled."""
        async with self.db.transaction() as session:
            await touch_server(session, server_id, name)

    async def reconcile_servers(
        self, present: dict[int, str], is_ours: Callable[[int], bool]
    ) -> tuple[int, int]:
        """Servers joined or left while the bot was offline, put right once it is connected:
        Discord tells a connecting bot of the servers it is in (GUILD_CREATE, which discord.py
        dispatches as ``guild_available``, not ``guild_join``), and of no server it left. Every
        server in ``present`` is marked here (a pending removal cancelled, as a re-invite does);
        every server still marked here but not present, among those ``is_ours`` says this
        process's shards hold, is marked left (its data goes after the grace period). Returns
        how many were joined and left since the last look."""
        async with self.db.transaction() as session:
            known = dict(
                (await session.execute(select(col(Server.id), col(Server.left_at)))).tuples().all()
            )
            joined = [sid for sid in present if sid not in known or known[sid] is not None]
            for server_id in joined:
                await touch_server(session, server_id, present[server_id])
            gone = [
                sid
                for sid, left_at in known.items()
                if left_at is None and sid not in present and is_ours(sid)
            ]
            if gone:
                await session.execute(
                    update(Server).where(col(Server.id).in_(gone)).values(left_at=utcnow())
                )
        return len(joined), len(gone)

    async def server_left(self, server_id: int, *, now: datetime | None = None) -> None:
        """The bot left (or was removed from) a server: its data goes after the grace period
        (``engine.people.guests.remove_departed_servers``)."""
        async with self.db.transaction() as session:
            await session.execute(
                update(Server).where(col(Server.id) == server_id).values(left_at=now or utcnow())
            )

    # --- /profile ---------------------------------------------------------------------------

    async def show(self, actor: Actor, *, seen: bool = True) -> Profile:
        """What is stored about ``actor``. ``seen``: they are asking, so they are here, and
        their row is made or refreshed first; without it, a stranger is ``NotFound``."""
        user_id = actor.user_id
        async with self.db.transaction() as session:
            if seen:
                await touch_user(session, user_id, actor.user_name)
            user = await session.get(User, user_id)
            if user is None:
                raise NotFound(STORES_NOTHING)
            return Profile(
                user_id=user_id,
                name=user.name,
                created_at=user.created_at,
                last_seen_at=user.last_seen_at,
                keep_data=user.keep_data,
                scenarios=await _count(session, Scenario, col(Scenario.owner_id) == user_id),
                own_adventures=await _count(session, Adventure, col(Adventure.owner_id) == user_id),
                hosted_adventures=await _count(
                    session,
                    Adventure,
                    (col(Adventure.host_id) == user_id) & col(Adventure.server_id).is_not(None),
                ),
                story_entries=await _count(session, StoryNode, col(StoryNode.author_id) == user_id),
                retention_days=self.retention_days,
            )

    async def keep(self, actor: Actor, keep: bool) -> None:
        """Keep the actor's data however long they are away (or, with False, no longer)."""
        async with self.db.transaction() as session:
            await touch_user(session, actor.user_id, actor.user_name)
            changed = await rows_changed(
                session, update(User).where(col(User.id) == actor.user_id).values(keep_data=keep)
            )
            if changed != 1:
                raise NotFound(STORES_NOTHING)

    async def rating(self, actor: Actor) -> Rating:
        """The rating of the actor's own DM adventures now."""
        async with self.db.session() as session:
            user = await session.get(User, actor.user_id)
        chosen = Rating.parse(user.content_rating) if user is not None else None
        return place_rating(self.content, in_dm=True, chosen=chosen, age_restricted=False).rating

    async def set_rating(self, actor: Actor, rating: Rating | None) -> Rating:
        """The rating of the actor's own DM adventures (None: the operator's default), within
        the operator's ceiling; what applies now."""
        ceiling = self.content.ceiling
        if rating is not None and rating > ceiling:
            raise InvalidInput(
                f"This bot's operator allows ratings up to **{ceiling.label}**, so your "
                f"adventures cannot be rated {rating.label}."
            )
        async with self.db.transaction() as session:
            await touch_user(session, actor.user_id, actor.user_name)
            await session.execute(
                update(User)
                .where(col(User.id) == actor.user_id)
                .values(content_rating=None if rating is None else rating.label)
            )
        return rating if rating is not None else self.content.default

    async def delete(self, actor: Actor) -> None:
        """Delete the actor and everything they own, now (one cascading statement), and drop
        their turns still queued or being written in this process."""
        user_id = actor.user_id
        # Their earlier interactions' contact records land first (each began before this).
        for written in list(self._recording.get(user_id, ())):
            await written.wait()
        try:
            in_flight = await self._delete_rows(user_id)
        finally:
            # Their next interaction records them afresh, however soon it comes.
            for key in [key for key in self._recorded if key[0] == user_id]:
                del self._recorded[key]
        if self.queue is not None:
            self.queue.drop(in_flight, PlayerDeleted())

    async def _delete_rows(self, user_id: int) -> list[int]:
        """The deletion itself; the interactions of their turns still queued or running."""
        async with self.db.transaction() as session:
            # The turn leases of their own adventures first, as a turn's commit takes its lease
            # before its players: in that order a deletion and a commit wait for each other
            # instead of deadlocking (the deletion reaches those leases through its cascade).
            owned = select(col(Adventure.id)).where(col(Adventure.owner_id) == user_id)
            await session.execute(
                locked_read(
                    session, _leases, (_leases.c.adventure_id,), _leases.c.adventure_id.in_(owned)
                )
            )
            in_flight = list(
                await session.scalars(
                    select(col(RequestRecord.interaction_id)).where(
                        col(RequestRecord.user_id) == user_id,
                        col(RequestRecord.status).in_((QUEUED, RUNNING)),
                    )
                )
            )
            deleted = await rows_changed(session, delete(User).where(col(User.id) == user_id))
            if deleted != 1:
                raise NotFound(STORES_NOTHING)
        return in_flight


async def _count(session: AsyncSession, model: type, condition: ColumnElement[bool]) -> int:
    return await session.scalar(select(func.count()).select_from(model).where(condition)) or 0
