"""What every change to the story tree shares: finding the adventure, moving its head.

Every head move is one transaction guarded by the adventure's version (a stale button or a
second press changes nothing), restores the adventure's state through ``engine.story.snapshots``,
and when it takes turns out of the current line, tells the memory bank through
``engine.story.line.positions.story_cut_back`` with the index of the deepest node both lines share.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from engine.errors import NotFound, StoryMovedOn
from engine.people.access.checks import check_may_press
from engine.people.access.rules import NO_ADVENTURE, Actor, adventure_here
from engine.storage.models import Adventure, Branch, StoryNode
from engine.story.characters import acting_name
from engine.story.line.positions import story_cut_back
from engine.story.snapshots import capture_current, keep_state_after, restore
from engine.story.versions import advance_version

if TYPE_CHECKING:
    from engine.platform.queue import AdventureQueue
    from engine.storage.database import Database

MOVED_ON = "The story has moved on since that button was drawn."


@dataclass(frozen=True, slots=True)
class HeadMove:
    """Where the story stands after a head move, and which turns left or rejoined the line."""

    adventure_id: int
    version: int
    head_node_id: int
    head_index: int
    head_text: str
    branch: str
    #: Nodes taken out of the current line by this move (their messages show as undone).
    removed: tuple[int, ...] = ()
    #: Nodes brought back into the line (Redo): their messages show as live again.
    restored: tuple[int, ...] = ()
    #: Whether Redo has somewhere to go from here.
    can_redo: bool = False
    take: int = 1
    take_count: int = 1
    #: Who made the move, as the story names them (``acting_name``), read in its transaction:
    #: "You" in a DM, their character's name in a group adventure, else their display name.
    #: Empty when nobody moved it (``head_now``).
    mover: str = ""


class TreeCore:
    """The shared steps of the story tree's commands (``service.StoryTree`` is the whole)."""

    def __init__(self, db: Database, queue: AdventureQueue | None = None) -> None:
        self.db = db
        self.queue = queue

    async def _adventure(
        self,
        session: AsyncSession,
        channel_id: int,
        seen_version: int | None,
        drawn_for: int | None = None,
    ) -> Adventure:
        """The adventure here; a button's press (``drawn_for`` the adventure it was drawn for,
        ``seen_version`` its version) acts on nothing else."""
        adventure = await adventure_here(session, channel_id)
        if adventure.head_node_id is None:
            raise NotFound(NO_ADVENTURE)
        check_may_press(adventure, drawn_for)
        if seen_version is not None and seen_version != adventure.version:
            raise StoryMovedOn(MOVED_ON)
        assert adventure.id is not None
        if self.queue is not None and (
            self.queue.running(adventure.id) or self.queue.waiting(adventure.id)
        ):
            raise StoryMovedOn("A turn is being written right now; try again once it has arrived.")
        return adventure

    async def _head(self, session: AsyncSession, adventure: Adventure) -> StoryNode:
        assert adventure.head_node_id is not None
        head = await session.get(StoryNode, adventure.head_node_id)
        if head is None:
            raise NotFound("This adventure has no story yet.")
        return head

    async def _move(
        self,
        session: AsyncSession,
        adventure: Adventure,
        target: StoryNode,
        snapshot: dict[str, Any],
        *,
        branch_id: int | None = None,
        kept_through: int | None = None,
    ) -> int:
        """Put the head on ``target`` with ``snapshot``'s state; returns the new version."""
        assert adventure.id is not None and adventure.head_node_id is not None
        # Read before the updates below: the session keeps the loaded row in step with them.
        expected = adventure.version
        # The state as the head leaves it, so coming back (Redo, a switch) finds it again.
        leaving = await capture_current(session, adventure)
        await keep_state_after(session, adventure.head_node_id, leaving)
        values: dict[str, Any] = {"head_node_id": target.id}
        if branch_id is not None:
            values["active_branch_id"] = branch_id
        await advance_version(session, adventure.id, expected, moved_on=MOVED_ON, **values)
        await restore(session, adventure.id, snapshot)
        if kept_through is not None:
            await story_cut_back(session, adventure.id, kept_through=kept_through)
        return expected + 1

    async def _branch_name(self, session: AsyncSession, branch_id: int | None) -> str:
        if branch_id is None:
            return ""
        return (
            await session.scalar(select(col(Branch.name)).where(col(Branch.id) == branch_id)) or ""
        )

    async def _can_redo(self, session: AsyncSession, head_id: int, branch_id: int | None) -> bool:
        if branch_id is None:
            return False
        tip = await session.scalar(
            select(col(Branch.tip_node_id)).where(col(Branch.id) == branch_id)
        )
        return tip is not None and tip != head_id

    async def _result(
        self,
        session: AsyncSession,
        adventure: Adventure,
        target: StoryNode,
        version: int,
        branch_id: int | None,
        *,
        removed: tuple[int, ...] = (),
        restored: tuple[int, ...] = (),
        mover: Actor | None = None,
    ) -> HeadMove:
        assert adventure.id is not None and target.id is not None
        return HeadMove(
            adventure_id=adventure.id,
            version=version,
            head_node_id=target.id,
            head_index=target.index,
            head_text=target.text,
            branch=await self._branch_name(session, branch_id),
            removed=removed,
            restored=restored,
            can_redo=await self._can_redo(session, target.id, branch_id),
            take=target.live_take,
            take_count=target.take_count,
            mover=await acting_name(session, adventure, mover) if mover is not None else "",
        )

    @staticmethod
    async def _bump(session: AsyncSession, adventure: Adventure) -> None:
        assert adventure.id is not None
        await advance_version(
            session,
            adventure.id,
            adventure.version,
            moved_on="The story moved on meanwhile; nothing was changed.",
        )
