"""Branches and save points: named lines of play and named positions on them.

Branches borrow their ancestors' nodes instead of copying them; switching to one, or restoring
a save point, is a head move (``TreeCore._move``). A branch with a save point on it cannot be
deleted until the save point is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from engine.errors import InvalidInput, NotFound
from engine.people.access.checks import check_may_shape_story
from engine.people.access.rules import adventure_here
from engine.platform.sanitise import QUOTE_MAX, echo, sanitise
from engine.storage.models import Adventure, Branch, SavePoint, StoryNode
from engine.story.line.read import ancestry, shared_depth, state_after
from engine.story.snapshots import capture_current
from engine.story.tree.shape import TreeShape, read_shape

if TYPE_CHECKING:
    from engine.people.access.rules import Actor
from engine.story.tree.core import HeadMove, TreeCore

NAME_MAX = 50


@dataclass(frozen=True, slots=True)
class BranchView:
    name: str
    tip_index: int
    active: bool
    save_points: int
    created_at: Any


@dataclass(frozen=True, slots=True)
class SavePointView:
    name: str
    branch: str
    index: int
    is_head: bool


class BranchesAndSavePoints(TreeCore):
    """/branch, /savepoint and /tree."""

    # --- branches ---

    async def branches(self, channel_id: int) -> list[BranchView]:
        async with self.db.session() as session:
            adventure = await adventure_here(session, channel_id)
            saves = (
                select(col(SavePoint.branch_id), func.count().label("n"))
                .where(col(SavePoint.adventure_id) == adventure.id)
                .group_by(col(SavePoint.branch_id))
                .subquery()
            )
            rows = await session.execute(
                select(
                    col(Branch.id),
                    col(Branch.name),
                    col(Branch.created_at),
                    # Labelled: read as ``row.index``, the column would be taken for the method
                    # every sequence has by that name.
                    col(StoryNode.index).label("tip_index"),
                    saves.c.n,
                )
                .join(StoryNode, col(StoryNode.id) == col(Branch.tip_node_id), isouter=True)
                .join(saves, saves.c.branch_id == col(Branch.id), isouter=True)
                .where(col(Branch.adventure_id) == adventure.id)
                .order_by(col(Branch.created_at), col(Branch.id))
            )
            return [
                BranchView(
                    row.name,
                    row.tip_index or 0,
                    row.id == adventure.active_branch_id,
                    row.n or 0,
                    row.created_at,
                )
                for row in rows
            ]

    async def _find_branch(self, session: AsyncSession, adventure: Adventure, name: str) -> Branch:
        branch = await session.scalar(
            select(Branch).where(
                col(Branch.adventure_id) == adventure.id, col(Branch.name) == sanitise(name).strip()
            )
        )
        if branch is None:
            raise NotFound(
                f"There is no branch called “{echo(name.strip(), QUOTE_MAX)}” here; "
                "/branch list shows them."
            )
        return branch

    @staticmethod
    def _valid_name(name: str, what: str) -> str:
        name = " ".join(sanitise(name).split())
        if not name:
            raise InvalidInput(f"A {what} needs a name.")
        if len(name) > NAME_MAX:
            raise InvalidInput(f"A {what} name can be at most {NAME_MAX} characters long.")
        return name

    async def _check_free(
        self, session: AsyncSession, model: type, adventure_id: int, name: str, what: str
    ) -> None:
        taken = await session.scalar(
            select(model.id).where(model.adventure_id == adventure_id, model.name == name).limit(1)
        )
        if taken is not None:
            raise InvalidInput(f"There is already a {what} called “{name}” here.")

    async def new_branch(self, actor: Actor, channel_id: int, name: str) -> HeadMove:
        """Start a branch at the head and make it active (the story itself does not move)."""
        name = self._valid_name(name, "branch")
        async with self.db.transaction() as session:
            adventure = await self._adventure(session, channel_id, None)
            assert adventure.id is not None  # a stored row
            await check_may_shape_story(session, adventure, actor)
            head = await self._head(session, adventure)
            await self._check_free(session, Branch, adventure.id, name, "branch")
            branch = Branch(adventure_id=adventure.id, name=name, tip_node_id=head.id)
            session.add(branch)
            await session.flush()
            version = await self._move(
                session,
                adventure,
                head,
                await capture_current(session, adventure),
                branch_id=branch.id,
            )
            return await self._result(session, adventure, head, version, branch.id, mover=actor)

    async def switch_branch(self, actor: Actor, channel_id: int, name: str) -> HeadMove:
        """Go to a branch's tip, with that line's world state, script state and clocks."""
        async with self.db.transaction() as session:
            adventure = await self._adventure(session, channel_id, None)
            await check_may_shape_story(session, adventure, actor)
            head = await self._head(session, adventure)
            branch = await self._find_branch(session, adventure, name)
            if branch.id == adventure.active_branch_id and branch.tip_node_id == head.id:
                raise InvalidInput(f"The story is already at the tip of “{branch.name}”.")
            if branch.tip_node_id is None:
                raise NotFound(f"The branch “{branch.name}” has lost its turns.")
            target = await session.get(StoryNode, branch.tip_node_id)
            assert target is not None
            return await self._go(session, adventure, head, target, branch.id, actor)

    async def _go(
        self,
        session: AsyncSession,
        adventure: Adventure,
        head: StoryNode,
        target: StoryNode,
        branch_id: int | None,
        mover: Actor,
    ) -> HeadMove:
        """A jump to another position: the state it left, the memory cut where lines part."""
        assert head.id is not None and target.id is not None
        depth = await shared_depth(session, head.id, target.id)
        old_line = await ancestry(session, head.id)
        new_line = await ancestry(session, target.id)
        if target.id == head.id:
            # Another branch's name for the same place: the story stays exactly as it is.
            snapshot = await capture_current(session, adventure)
        else:
            snapshot = await state_after(session, adventure, target)
        version = await self._move(
            session,
            adventure,
            target,
            snapshot,
            branch_id=branch_id,
            kept_through=depth if depth < head.index else None,
        )
        return await self._result(
            session,
            adventure,
            target,
            version,
            branch_id if branch_id is not None else adventure.active_branch_id,
            removed=tuple(node for node in old_line if node not in new_line),
            restored=tuple(node for node in new_line if node not in old_line),
            mover=mover,
        )

    async def rename_branch(self, actor: Actor, channel_id: int, name: str, new_name: str) -> str:
        new_name = self._valid_name(new_name, "branch")
        async with self.db.transaction() as session:
            adventure = await self._adventure(session, channel_id, None)
            assert adventure.id is not None  # a stored row
            await check_may_shape_story(session, adventure, actor)
            branch = await self._find_branch(session, adventure, name)
            if branch.name == new_name:
                raise InvalidInput(f"The branch is already called “{new_name}”.")
            await self._check_free(session, Branch, adventure.id, new_name, "branch")
            old = branch.name
            branch.name = new_name
            await self._bump(session, adventure)
            return f"Branch “{old}” is now called “{new_name}”."

    async def delete_branch(self, actor: Actor, channel_id: int, name: str) -> str:
        """Forget a branch's name; its turns stay (other lines may borrow them)."""
        async with self.db.transaction() as session:
            adventure = await self._adventure(session, channel_id, None)
            await check_may_shape_story(session, adventure, actor)
            branch = await self._find_branch(session, adventure, name)
            if branch.id == adventure.active_branch_id:
                raise InvalidInput(
                    f"“{branch.name}” is the branch the story is on; switch to another first."
                )
            saves = list(
                await session.scalars(
                    select(col(SavePoint.name)).where(col(SavePoint.branch_id) == branch.id)
                )
            )
            if saves:
                listed = ", ".join(f"“{s}”" for s in saves)
                raise InvalidInput(
                    f"The branch “{branch.name}” has save points on it ({listed}); delete them "
                    "first with /savepoint delete."
                )
            await session.delete(branch)
            await self._bump(session, adventure)
            return f"Branch “{branch.name}” deleted. Its turns are kept where other lines use them."

    # --- save points ---

    async def add_save_point(self, actor: Actor, channel_id: int, name: str) -> SavePointView:
        name = self._valid_name(name, "save point")
        async with self.db.transaction() as session:
            adventure = await self._adventure(session, channel_id, None)
            await check_may_shape_story(session, adventure, actor)
            head = await self._head(session, adventure)
            assert adventure.id is not None and head.id is not None  # stored rows
            await self._check_free(session, SavePoint, adventure.id, name, "save point")
            session.add(
                SavePoint(
                    adventure_id=adventure.id,
                    branch_id=adventure.active_branch_id,
                    node_id=head.id,
                    name=name,
                    created_by=actor.user_id,
                )
            )
            await session.flush()
            branch = await self._branch_name(session, adventure.active_branch_id)
            return SavePointView(name, branch, head.index, True)

    async def save_points(self, channel_id: int) -> list[SavePointView]:
        async with self.db.session() as session:
            adventure = await adventure_here(session, channel_id)
            rows = await session.execute(
                select(
                    col(SavePoint.name),
                    col(SavePoint.node_id),
                    col(Branch.name).label("branch"),
                    # Labelled, as in ``branches``: ``r.index`` reads as the sequence method.
                    col(StoryNode.index).label("node_index"),
                )
                .join(Branch, col(Branch.id) == col(SavePoint.branch_id), isouter=True)
                .join(StoryNode, col(StoryNode.id) == col(SavePoint.node_id))
                .where(col(SavePoint.adventure_id) == adventure.id)
                .order_by(col(SavePoint.created_at), col(SavePoint.id))
            )
            return [
                SavePointView(
                    r.name, r.branch or "", r.node_index, r.node_id == adventure.head_node_id
                )
                for r in rows
            ]

    async def _find_save_point(
        self, session: AsyncSession, adventure: Adventure, name: str
    ) -> SavePoint:
        point = await session.scalar(
            select(SavePoint).where(
                col(SavePoint.adventure_id) == adventure.id,
                col(SavePoint.name) == sanitise(name).strip(),
            )
        )
        if point is None:
            raise NotFound(
                f"There is no save point called “{echo(name.strip(), QUOTE_MAX)}” here; "
                "/savepoint list shows them."
            )
        return point

    async def restore_save_point(self, actor: Actor, channel_id: int, name: str) -> HeadMove:
        """Go back (or over) to a save point: a head move onto its node and branch."""
        async with self.db.transaction() as session:
            adventure = await self._adventure(session, channel_id, None)
            await check_may_shape_story(session, adventure, actor)
            head = await self._head(session, adventure)
            point = await self._find_save_point(session, adventure, name)
            if point.node_id == head.id:
                raise InvalidInput(f"The story is already at “{point.name}”.")
            target = await session.get(StoryNode, point.node_id)
            assert target is not None
            return await self._go(session, adventure, head, target, point.branch_id, actor)

    async def delete_save_point(self, actor: Actor, channel_id: int, name: str) -> str:
        async with self.db.transaction() as session:
            adventure = await self._adventure(session, channel_id, None)
            await check_may_shape_story(session, adventure, actor)
            point = await self._find_save_point(session, adventure, name)
            await session.delete(point)
            return f"Save point “{point.name}” deleted; the story is unchanged."

    # --- the picture ---

    async def shape(self, channel_id: int) -> TreeShape:
        """The story's shape, for /tree to draw: each branch, where it leaves its parent, its
        save points, chapter ends and retold turns, and where the story stands."""
        async with self.db.session() as session:
            adventure = await adventure_here(session, channel_id)
            return await read_shape(session, adventure)
