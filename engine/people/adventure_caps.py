"""Before a new adventure takes its place: who may end the one running there, and the caps.

Every adventure that comes to be (a /start, an /adventure import) takes a place: a thread, a
channel or a DM. ``check_may_begin`` is the one check all of them pass, in the transaction that
writes the adventure: whoever begins it must be allowed to end the one running there
(``engine.people.access.check_may_replace``), and must stay under the operator's caps, adventures
started per user per hour and active adventures per user.

The caps are counted in the database, not in a process's memory, so they hold however many
processes run. The caller touches the user's row first (``engine.people.accounts.touch_user``): that
upsert holds the row's lock until the transaction ends (PostgreSQL; SQLite has one writer at a
time), so two starts by one player queue behind each other and the second counts the first.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from engine.errors import NotAllowed
from engine.people.access.checks import check_may_replace
from engine.people.access.rules import Actor, active_adventure
from engine.platform.coordination.leases import as_utc
from engine.storage.models import Adventure, utcnow

#: The window of the hourly cap.
HOUR = timedelta(hours=1)
#: An adventure not ended counts as active while it was played (or began) this recently: no
#: command ends an adventure but another taking its place, so one left alone stops counting.
ACTIVE_FOR = timedelta(days=7)


@dataclass(frozen=True, slots=True)
class AdventureCaps:
    """The operator's caps on one player's adventures (``CAMPFIRE_ADVENTURES_PER_HOUR``,
    ``CAMPFIRE_ACTIVE_ADVENTURES_PER_USER``)."""

    #: Adventures a player may begin (started or imported) in any hour.
    per_hour: int
    #: Adventures a player may host at once: not ended, and played within ``ACTIVE_FOR``.
    active: int


class CapReached(NotAllowed):
    """A player has begun as many adventures as the operator allows for now."""


async def check_may_begin(
    session: AsyncSession,
    actor: Actor,
    channel_id: int | None,
    caps: AdventureCaps | None,
    *,
    now: datetime | None = None,
) -> Adventure | None:
    """Raise the refusal if ``actor`` may not begin an adventure in ``channel_id`` now; else
    the adventure running there, which the new one ends. ``channel_id`` None: a thread still
    to be opened, where nothing runs. ``caps`` None: no caps (tools, tests).
    """
    running = await active_adventure(session, channel_id) if channel_id is not None else None
    if running is not None:
        await check_may_replace(session, running, actor)
    if caps is not None:
        await _check_caps(session, actor.user_id, caps, running, now or utcnow())
    return running


async def _check_caps(
    session: AsyncSession,
    user_id: int,
    caps: AdventureCaps,
    running: Adventure | None,
    now: datetime,
) -> None:
    hosted = col(Adventure.host_id) == user_id
    since = now - HOUR
    started = await session.scalar(
        select(func.count())
        .select_from(Adventure)
        .where(hosted, col(Adventure.started_at) >= since)
    )
    if started and started >= caps.per_hour:
        # A start leaves the window an hour after it happened; the one whose leaving brings
        # the count under the cap is this far from the oldest in the window.
        freed_by = await session.scalar(
            select(col(Adventure.started_at))
            .where(hosted, col(Adventure.started_at) >= since)
            .order_by(col(Adventure.started_at))
            .offset(started - caps.per_hour)
            .limit(1)
        )
        wait = (as_utc(freed_by) + HOUR - now) if freed_by is not None else HOUR
        minutes = max(1, math.ceil(wait.total_seconds() / 60))
        raise CapReached(
            f"You have started {started} adventures in the last hour; you can start another "
            f"in {minutes} minute{'s' if minutes != 1 else ''}."
        )

    await _check_active(session, user_id, caps, running, now)


async def check_may_bring_back(
    session: AsyncSession,
    adventure: Adventure,
    running: Adventure | None,
    caps: AdventureCaps | None,
    *,
    now: datetime | None = None,
) -> None:
    """An ended adventure brought back (``/adventure resume``) runs again: its host's cap on
    adventures running at once holds as for a start (``running``: the one it would end). No
    start is counted: nothing new begins."""
    if caps is None or adventure.host_id is None:
        return
    await _check_active(session, adventure.host_id, caps, running, now or utcnow())


async def _check_active(
    session: AsyncSession,
    user_id: int,
    caps: AdventureCaps,
    running: Adventure | None,
    now: datetime,
) -> None:
    hosted = col(Adventure.host_id) == user_id
    active_since = now - ACTIVE_FOR
    active = (
        await session.scalar(
            select(func.count())
            .select_from(Adventure)
            .where(
                hosted,
                col(Adventure.ended_at).is_(None),
                col(Adventure.updated_at) >= active_since,
            )
        )
        or 0
    )
    if (
        running is not None
        and running.host_id == user_id
        and as_utc(running.updated_at) >= active_since
    ):
        active -= 1  # the new adventure takes its place: one for one
    if active >= caps.active:
        raise CapReached(
            f"You are running {active} adventures (each played in the last "
            f"{ACTIVE_FOR.days} days), as many as one player may run at once. Start the new one "
            "inside one of their threads to take its place, or wait until one has been left "
            f"alone for {ACTIVE_FOR.days} days."
        )
