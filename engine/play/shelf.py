"""The adventures of a place, running and ended: listing them, ending the one running on
purpose, and bringing an ended one back where it ran (``/adventure list|end|resume``).

An adventure ends by its ``ended_at`` alone: its story tree, save points, cards, memories and
scripts stay, so it can come back whole. A place is a DM or a thread, where one adventure runs
at a time (``engine.people.access.active_adventure``); a server's text channel holds none itself,
but the adventures of the threads opened from it (``Adventure.parent_channel_id``) are listed and
resumed from it too. A command names an adventure by its id, and acts on it only when it is one
of the place's own: an id typed from elsewhere is refused as unknown here.

Ending and resuming each bump the adventure's version, like any change a player can see: a
turn still being written for it is then refused by its version guard rather than stored into
a story that ended (or came back) meanwhile, and the buttons drawn before act no more.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ColumnElement, func, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from engine.errors import InvalidInput, NotFound, StoryMovedOn
from engine.people.access.checks import check_may_end, check_may_replace, check_may_resume
from engine.people.access.rules import Actor, active_adventure, adventure_here
from engine.people.accounts import touch_actor
from engine.people.adventure_caps import AdventureCaps, check_may_bring_back
from engine.platform.sanitise import QUOTE_MAX, echo, row_id
from engine.storage.database import Database
from engine.storage.models import Adventure, Role, StoryNode, utcnow
from engine.story.place_hints import PlaceHints

#: Adventures ``/adventure list`` shows at most (and its autocomplete offers: Discord's 25).
LISTED = 25

#: The answer to ``/adventure end`` in a server's text channel, where adventures run in threads.
ENDED_IN_THREADS = (
    "Adventures here run in threads of this channel: `/adventure end` inside one ends it. "
    "`/adventure list` shows them."
)


@dataclass(frozen=True, slots=True)
class ShelvedAdventure:
    """One of a place's adventures, as ``/adventure list`` shows it."""

    adventure_id: int
    title: str
    icon: str
    started_at: datetime
    #: The last change to its story (a turn, a head move): when it was last played.
    played_at: datetime
    #: Narrated turns in its whole tree (every branch; a turn's takes count once).
    turns: int
    running: bool
    #: Where it runs or ran: its thread or DM.
    place_id: int | None


@dataclass(frozen=True, slots=True)
class ResumePlan:
    """What ``/adventure resume`` would do, read before anything is asked or written."""

    adventure_id: int
    title: str
    #: Its thread or DM, where it comes back.
    place_id: int
    #: The adventure running there now, which resuming ends (None: nothing runs there).
    replaces_id: int | None = None
    replaces_title: str | None = None


@dataclass(frozen=True, slots=True)
class Resumed:
    adventure_id: int
    title: str
    icon: str
    place_id: int
    version: int
    #: The story's newest entry, shown again with the buttons under it.
    head_text: str
    head_node_id: int | None
    #: The title of the adventure that ended to make way for it, if one did.
    replaced_title: str | None


@dataclass(frozen=True, slots=True)
class EndPlan:
    adventure_id: int
    title: str


class AdventureShelf:
    def __init__(
        self, db: Database, places: PlaceHints, *, caps: AdventureCaps | None = None
    ) -> None:
        """``caps``: the players' caps on adventures, which bringing one back is under too
        (None: none, for tools and tests)."""
        self.db = db
        self.caps = caps
        #: The play service's hints, told what runs where after each change here.
        self.places = places

    async def listing(self, here: int, *, from_channel: bool) -> list[ShelvedAdventure]:
        """The adventures of ``here``, newest first (at most ``LISTED``): a DM's or a thread's
        own, or (``from_channel``, a server's text channel) those of the threads opened from
        it."""
        async with self.db.session() as session:
            adventures = list(
                await session.scalars(
                    select(Adventure)
                    .where(_of_place(here, from_channel=from_channel))
                    .order_by(col(Adventure.started_at).desc(), col(Adventure.id).desc())
                    .limit(LISTED)
                )
            )
            ids = [a.id for a in adventures if a.id is not None]
            counted = await session.execute(
                select(col(StoryNode.adventure_id), func.count())
                .where(
                    col(StoryNode.adventure_id).in_(ids),
                    col(StoryNode.role) == Role.NARRATOR,
                    col(StoryNode.parent_id).is_not(None),
                )
                .group_by(col(StoryNode.adventure_id))
            )
            turns: dict[int, int] = {row[0]: row[1] for row in counted.all()}
        return [
            ShelvedAdventure(
                a.id,
                a.title,
                a.icon,
                a.started_at,
                a.updated_at,
                turns.get(a.id, 0),
                a.ended_at is None,
                a.channel_id,
            )
            for a in adventures
            if a.id is not None
        ]

    async def resume_plan(
        self, actor: Actor, here: int, typed: str, *, from_channel: bool
    ) -> ResumePlan:
        """Whatever would refuse bringing back the adventure ``typed`` names (its number, as
        ``/adventure list`` shows it, or its title) raised now: not this place's, running
        already, not ``actor``'s to resume, or the one running there not theirs to end. Else
        the plan, naming the adventure resuming would end."""
        async with self.db.session() as session:
            adventure_id = await _named(session, here, typed, from_channel)
            adventure = await _ended_of_place(session, here, adventure_id, from_channel)
            await check_may_resume(session, adventure, actor)
            assert adventure.channel_id is not None  # _ended_of_place's choice
            running = await active_adventure(session, adventure.channel_id)
            if running is not None:
                await check_may_replace(session, running, actor)
            await check_may_bring_back(session, adventure, running, self.caps)
            return ResumePlan(
                adventure_id,
                adventure.title,
                adventure.channel_id,
                running.id if running is not None else None,
                running.title if running is not None else None,
            )

    async def resume(
        self, actor: Actor, here: int, plan: ResumePlan, *, from_channel: bool
    ) -> Resumed:
        """Bring the plan's adventure back where it ran, ending the one running there, which
        must still be the one the plan named (the player was asked about that one); every
        check of ``resume_plan`` again, in the transaction that writes."""
        async with self.db.transaction() as session:
            await touch_actor(session, actor)
            adventure = await _ended_of_place(
                session, here, plan.adventure_id, from_channel, for_update=True
            )
            await check_may_resume(session, adventure, actor)
            assert adventure.channel_id is not None
            running = await active_adventure(session, adventure.channel_id, for_update=True)
            if (running.id if running is not None else None) != plan.replaces_id:
                raise StoryMovedOn(
                    "What runs there changed since you asked (an adventure began or ended); "
                    "nothing was changed. Ask again with `/adventure resume`."
                )
            replaced_title = None
            if running is not None:
                await check_may_replace(session, running, actor)
            await check_may_bring_back(session, adventure, running, self.caps)
            if running is not None:
                running.ended_at = utcnow()
                running.version += 1
                replaced_title = running.title
            adventure.ended_at = None
            adventure.version += 1
            head = (
                await session.get(StoryNode, adventure.head_node_id)
                if adventure.head_node_id is not None
                else None
            )
            assert adventure.id is not None
            resumed = Resumed(
                adventure.id,
                adventure.title,
                adventure.icon,
                adventure.channel_id,
                adventure.version,
                head.text if head is not None else "",
                head.id if head is not None else None,
                replaced_title,
            )
        self.places.seen(resumed.place_id, resumed.adventure_id, resumed.version)
        return resumed

    async def end_plan(self, actor: Actor, here: int, *, in_threads: bool = False) -> EndPlan:
        """The adventure running ``here``, if ``actor`` may end it (asked before Confirm);
        ``in_threads``: ``here`` is a server's text channel, whose adventures run in threads."""
        async with self.db.session() as session:
            adventure = await adventure_here(
                session, here, missing=ENDED_IN_THREADS if in_threads else _NO_ADVENTURE
            )
            await check_may_end(session, adventure, actor)
            assert adventure.id is not None
            return EndPlan(adventure.id, adventure.title)

    async def end(self, actor: Actor, here: int, plan: EndPlan) -> str:
        """End the adventure running ``here``, which must still be the plan's; its title."""
        async with self.db.transaction() as session:
            await touch_actor(session, actor)
            adventure = await active_adventure(session, here, for_update=True)
            if adventure is None or adventure.id != plan.adventure_id:
                raise StoryMovedOn(
                    f"“{plan.title}” is no longer the adventure running here (it ended, or "
                    "another began); nothing was ended."
                )
            await check_may_end(session, adventure, actor)
            adventure.ended_at = utcnow()
            adventure.version += 1
            title = adventure.title
        self.places.seen(here, None)
        return title


_NO_ADVENTURE = (
    "There is no adventure running here: nothing to end. `/adventure list` shows the ones that "
    "ran here."
)


def _of_place(here: int, *, from_channel: bool) -> ColumnElement[bool]:
    if from_channel:
        return col(Adventure.parent_channel_id) == here
    return col(Adventure.channel_id) == here


async def _named(session: AsyncSession, here: int, typed: str, from_channel: bool) -> int:
    """The id of the place's adventure ``typed`` names: its number (``12`` or ``#12``, what
    autocomplete sends), else the one ended adventure of that title."""
    number = row_id(typed.strip().removeprefix("#"))
    if number is not None:
        return number
    titled = [
        adventure_id
        for adventure_id in await session.scalars(
            select(col(Adventure.id)).where(
                _of_place(here, from_channel=from_channel),
                func.lower(col(Adventure.title)) == typed.strip().lower(),
                col(Adventure.ended_at).is_not(None),
            )
        )
        if adventure_id is not None
    ]
    if len(titled) == 1:
        return titled[0]
    shown = echo(typed, QUOTE_MAX)
    if titled:
        raise InvalidInput(
            f"Several adventures here are called “{shown}”: choose one by its number "
            "(`/adventure list` shows them)."
        )
    raise NotFound(
        f"No ended adventure here is called “{shown}”. Choose one from the list as you type, "
        "or give its number from `/adventure list`."
    )


async def _ended_of_place(
    session: AsyncSession,
    here: int,
    adventure_id: int,
    from_channel: bool,
    *,
    for_update: bool = False,
) -> Adventure:
    """The place's adventure ``adventure_id``, which must have ended to be resumed."""
    query = select(Adventure).where(
        col(Adventure.id) == adventure_id, _of_place(here, from_channel=from_channel)
    )
    if for_update:
        query = query.with_for_update()
    adventure = await session.scalar(query)
    if adventure is None or adventure.channel_id is None:
        raise NotFound(
            f"No adventure #{adventure_id} ran here. `/adventure list` shows the ones that did."
        )
    if adventure.ended_at is None:
        raise InvalidInput(f"“{adventure.title}” is running already: play on where it runs.")
    return adventure
