"""The memory bank as players see it: list, add, edit, pin, forget, restore; and its capacity.

Anyone may read an adventure's memories and summary; changing them is steering, so the same
people may do it as may change the author's note (``engine.people.access.may_steer``). Every change
is one transaction and leaves the story and its version alone.

Over capacity, the least used memories (then the least recently used, then the oldest) that
are not pinned are marked forgotten, never deleted: ``/memory restore`` brings one back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from engine.errors import InvalidInput, NotFound
from engine.people.access.checks import check_may_steer
from engine.people.access.rules import adventure_here
from engine.platform.sanitise import ROW_ID_MAX, sanitise
from engine.storage.changes import rows_changed
from engine.storage.memory_models import Memory, MemoryOrigin, SummaryVersion
from engine.storage.models import Adventure, StoryNode, utcnow
from engine.story.line.positions import LinePositions, line_positions

if TYPE_CHECKING:
    from engine.people.access.rules import Actor
    from engine.people.limits import UsageLimits
    from engine.storage.database import Database

#: A memory is one or two sentences; this leaves room for a long one.
MEMORY_MAX_CHARS = 500
#: The story summary, as one Discord text input holds it.
SUMMARY_MAX_CHARS = 4000
#: Memories listed per page.
PAGE_SIZE = 10


@dataclass(frozen=True, slots=True)
class MemoryView:
    id: int
    text: str
    pinned: bool
    forgotten: bool
    origin: str
    use_count: int
    #: The story positions (actions) the memory sums up; None for a player's own memory.
    actions: tuple[int, int] | None


@dataclass(frozen=True, slots=True)
class MemoryPage:
    adventure_id: int
    title: str
    memories: list[MemoryView]
    live: int
    forgotten: int
    capacity: int
    page: int
    pages: int


@dataclass(frozen=True, slots=True)
class SummaryView:
    adventure_id: int
    title: str
    text: str
    #: The story position the summary reaches, and the story's length, in actions.
    through: int
    actions: int


# --- capacity ------------------------------------------------------------------------------------


async def count_use(session: AsyncSession, memory_ids: Sequence[int]) -> None:
    """One more use for each memory a turn's context chose, written in that turn's store
    transaction (a turn not stored used nothing); the capacity rule forgets the least used
    first. A memory forgotten or cut back meanwhile is simply not there to count."""
    if not memory_ids:
        return
    await session.execute(
        update(Memory)
        .where(col(Memory.id).in_(memory_ids))
        .values(use_count=col(Memory.use_count) + 1, last_used_at=utcnow())
        .execution_options(synchronize_session=False)
    )


async def enforce_capacity(
    session: AsyncSession, adventure_id: int, capacity: int, *, keep: int | None = None
) -> int:
    """Mark forgotten the memories over ``capacity`` (never pinned ones, never ``keep``).

    One ``UPDATE``; returns how many were forgotten.
    """
    live = await session.scalar(
        select(func.count())
        .select_from(Memory)
        .where(col(Memory.adventure_id) == adventure_id, col(Memory.forgotten).is_(False))
    )
    over = (live or 0) - capacity
    if over <= 0:
        return 0
    victims = (
        select(col(Memory.id))
        .where(
            col(Memory.adventure_id) == adventure_id,
            col(Memory.forgotten).is_(False),
            col(Memory.pinned).is_(False),
            *([col(Memory.id) != keep] if keep is not None else []),
        )
        .order_by(
            col(Memory.use_count), col(Memory.last_used_at).asc().nulls_first(), col(Memory.id)
        )
        .limit(over)
        .scalar_subquery()
    )
    return await rows_changed(
        session, update(Memory).where(col(Memory.id).in_(victims)).values(forgotten=True)
    )


# --- the bank ------------------------------------------------------------------------------------


class MemoryBank:
    """What the front end calls for /memory … and /summary ….

    ``capacity`` is how many memories one adventure keeps live (the operator's setting).
    """

    def __init__(
        self, db: Database, *, capacity: int, rate_limits: UsageLimits | None = None
    ) -> None:
        self.db = db
        self.capacity = capacity
        #: Memories players add, per player over the adventures they host (None: no cap).
        self.rate_limits = rate_limits

    # --- reading ----------------------------------------------------------------------------

    async def page(self, channel_id: int, *, page: int = 1, forgotten: bool = False) -> MemoryPage:
        """One page of the adventure's memories (the forgotten ones with ``forgotten``)."""
        async with self.db.session() as session:
            adventure = await adventure_here(session, channel_id)
            assert adventure.id is not None
            counts = dict(
                (
                    await session.execute(
                        select(col(Memory.forgotten), func.count())
                        .where(col(Memory.adventure_id) == adventure.id)
                        .group_by(col(Memory.forgotten))
                    )
                )
                .tuples()
                .all()
            )
            live, gone = counts.get(False, 0), counts.get(True, 0)
            total = gone if forgotten else live
            pages = max(1, -(-total // PAGE_SIZE))
            if not 1 <= page <= pages:
                raise InvalidInput(f"There is no page {page}: choose a page from 1 to {pages}.")
            rows = await session.scalars(
                select(Memory)
                .where(
                    col(Memory.adventure_id) == adventure.id,
                    col(Memory.forgotten).is_(forgotten),
                )
                .order_by(col(Memory.pinned).desc(), col(Memory.id))
                .offset((page - 1) * PAGE_SIZE)
                .limit(PAGE_SIZE)
            )
            positions = await line_positions(session, adventure.head_node_id)
            views = [_view(m, positions) for m in rows]
        return MemoryPage(
            adventure.id, adventure.title, views, live, gone, self.capacity, page, pages
        )

    async def choices(
        self, channel_id: int, typed: str, *, limit: int = 25
    ) -> list[tuple[str, int]]:
        """(label, id) pairs for autocomplete: memories whose id or text contains what was
        typed."""
        typed = typed.strip().lstrip("#").casefold()
        async with self.db.session() as session:
            adventure = await adventure_here(session, channel_id)
            rows = (
                await session.execute(
                    select(col(Memory.id), col(Memory.text), col(Memory.forgotten))
                    .where(col(Memory.adventure_id) == adventure.id)
                    .order_by(col(Memory.id).desc())
                )
            ).all()
        found = [
            (f"#{r.id}{' (forgotten)' if r.forgotten else ''} {r.text}"[:100], r.id)
            for r in rows
            if typed in str(r.id) or typed in r.text.casefold()
        ]
        return found[:limit]

    async def summary(self, channel_id: int) -> SummaryView:
        async with self.db.session() as session:
            adventure = await adventure_here(session, channel_id)
            return await _summary_of(session, adventure, adventure.story_summary)

    # --- changing ---------------------------------------------------------------------------

    async def add(self, channel_id: int, actor: Actor, text: str) -> MemoryView:
        """A player's own memory: kept through undo and retry, since no story turn sourced
        it."""
        text = _clean(text, "A memory", MEMORY_MAX_CHARS)
        async with self.db.transaction() as session:
            adventure = await adventure_here(session, channel_id, for_update=True)
            await check_may_steer(session, adventure, actor)
            assert adventure.id is not None
            if self.rate_limits is not None:
                await self.rate_limits.check_host_room(session, adventure, "memories")
            head_index = await _head_index(session, adventure)
            memory = Memory(
                adventure_id=adventure.id,
                text=text,
                origin=MemoryOrigin.PLAYER,
                source_start=head_index,
                source_end=head_index,
            )
            session.add(memory)
            await session.flush()
            await enforce_capacity(session, adventure.id, self.capacity, keep=memory.id)
            assert memory.id is not None
            return MemoryView(memory.id, text, False, False, MemoryOrigin.PLAYER.value, 0, None)

    async def edit(self, channel_id: int, actor: Actor, memory_id: int, text: str) -> MemoryView:
        text = _clean(text, "A memory", MEMORY_MAX_CHARS)
        async with self.db.transaction() as session:
            adventure, memory = await _memory_here(session, channel_id, actor, memory_id)
            # The old vector described the old text; the next job embeds the new one.
            memory.text = text
            memory.embedding = None
            memory.embedding_model = None
            memory.embedding_dim = None
            memory.embedding_digest = None
            return _view(memory, await line_positions(session, adventure.head_node_id))

    async def set_flag(
        self,
        channel_id: int,
        actor: Actor,
        memory_id: int,
        *,
        pinned: bool | None = None,
        forgotten: bool | None = None,
    ) -> MemoryView:
        """Pin/unpin or forget/restore one memory."""
        async with self.db.transaction() as session:
            adventure, memory = await _memory_here(session, channel_id, actor, memory_id)
            if pinned is not None:
                if pinned and memory.forgotten:
                    raise InvalidInput(
                        f"Memory #{memory_id} is forgotten; restore it with /memory restore first."
                    )
                memory.pinned = pinned
            if forgotten is not None:
                memory.forgotten = forgotten
                if forgotten:
                    memory.pinned = False  # a forgotten memory is never put in a context
            await session.flush()
            if forgotten is False:
                assert adventure.id is not None
                await enforce_capacity(session, adventure.id, self.capacity, keep=memory_id)
            return _view(memory, await line_positions(session, adventure.head_node_id))

    async def summary_to_edit(self, channel_id: int, actor: Actor) -> SummaryView:
        """The summary, for someone about to edit it (refused before a form is filled)."""
        async with self.db.session() as session:
            adventure = await adventure_here(session, channel_id)
            await check_may_steer(session, adventure, actor)
            return await _summary_of(session, adventure, adventure.story_summary)

    async def set_summary(
        self, channel_id: int, actor: Actor, text: str, *, adventure_id: int | None = None
    ) -> SummaryView:
        """A player's edit of the summary: kept as a version, so undo past it can bring back
        the one before (and the next rewrite folds new memories into this text)."""
        text = _clean(text, "The story summary", SUMMARY_MAX_CHARS, blank_ok=True)
        async with self.db.transaction() as session:
            adventure = await adventure_here(
                session, channel_id, for_update=True, expect=adventure_id
            )
            await check_may_steer(session, adventure, actor)
            assert adventure.id is not None
            adventure.story_summary = text
            session.add(
                SummaryVersion(
                    adventure_id=adventure.id, text=text, through=adventure.summary_cursor
                )
            )
            return await _summary_of(session, adventure, text)


# --- shared --------------------------------------------------------------------------------------


def _view(memory: Memory, positions: LinePositions) -> MemoryView:
    assert memory.id is not None
    actions = None
    if memory.origin == MemoryOrigin.STORY:
        actions = (
            positions.position_of(memory.source_start - 1) + 1,
            positions.position_of(memory.source_end),
        )
    return MemoryView(
        memory.id,
        memory.text,
        memory.pinned,
        memory.forgotten,
        str(memory.origin),
        memory.use_count,
        actions,
    )


async def _summary_of(session: AsyncSession, adventure: Adventure, text: str) -> SummaryView:
    assert adventure.id is not None
    positions = await line_positions(session, adventure.head_node_id)
    return SummaryView(
        adventure.id, adventure.title, text, adventure.summary_cursor, positions.count
    )


def _clean(text: str, what: str, limit: int, *, blank_ok: bool = False) -> str:
    text = "\n".join(line.rstrip() for line in sanitise(text or "").strip().splitlines())
    if not text and not blank_ok:
        raise InvalidInput(f"{what} cannot be empty.")
    if len(text) > limit:
        raise InvalidInput(
            f"{what} can be at most {limit:,} characters; this one has {len(text):,}."
        )
    return text


async def _memory_here(
    session: AsyncSession, channel_id: int, actor: Actor, memory_id: int
) -> tuple[Adventure, Memory]:
    adventure = await adventure_here(session, channel_id, for_update=True)
    await check_may_steer(session, adventure, actor)
    # A number beyond any id is no memory's, and is not put in a query (the database refuses it).
    memory = await session.get(Memory, memory_id) if 0 < memory_id <= ROW_ID_MAX else None
    if memory is None or memory.adventure_id != adventure.id:
        raise NotFound(
            f"This adventure has no memory #{memory_id}. /memory list shows their numbers."
        )
    return adventure, memory


async def _head_index(session: AsyncSession, adventure: Adventure) -> int:
    if adventure.head_node_id is None:
        return 0
    return (
        await session.scalar(
            select(col(StoryNode.index)).where(col(StoryNode.id) == adventure.head_node_id)
        )
        or 0
    )
