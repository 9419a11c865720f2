"""The story tree: takes, undo and redo, edits, branches and save points.

Nothing here deletes a turn. The adventure's *head* is where the story stands; each *branch*
names a line of play by its *tip*; branches borrow their ancestors' nodes instead of copying
them. Undo moves the head back to the previous narrator turn and leaves the tip where it was,
so Redo walks toward it again. Writing below a head that is not its branch's tip forks a new
branch (``advance_line``). A node's takes are its attempts (retries and edits); the node's own
columns always hold the live take, so reading the story never touches the takes table.

Every head move is one transaction guarded by the adventure's version (a stale button or a
second press changes nothing), restores the adventure's state through ``engine.snapshots``, and
when it takes turns out of the current line, tells the memory bank through
``engine.memory.cursors.story_cut_back`` with the index of the deepest node both lines share.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import undefer

from engine.adventures import active_adventure
from engine.errors import InvalidInput, NotFound, StoryMovedOn
from engine.memory.cursors import story_cut_back
from engine.snapshots import capture, capture_current, restore
from engine.storage.models import (
    Adventure,
    Branch,
    Role,
    SavePoint,
    StoryNode,
    Take,
    utcnow,
)
from engine.story import line_tail
from engine.story_tree.access import check_may_rewrite, check_may_steer_story
from engine.story_tree.lines import (
    ancestry,
    has_children,
    is_turn_boundary,
    shared_depth,
    state_after,
    state_before_of,
)
from engine.story_tree.picture import draw_tree
from engine.story_tree.takes import add_take
from engine.tokens import count_tokens

if TYPE_CHECKING:
    from engine.play import Actor
    from engine.queue import AdventureQueue
    from engine.storage.database import Database

NO_ADVENTURE = "There is no adventure running here. Start one with /start."
MOVED_ON = "The story has moved on since that button was drawn."
NAME_MAX = 50
#: The longest turn text an edit accepts: what one Discord text input holds.
EDIT_MAX_CHARS = 4000


# --- results -------------------------------------------------------------------------------------


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


@dataclass(frozen=True, slots=True)
class TurnText:
    """A turn's live text, for a form prefilled with it."""

    adventure_id: int
    node_id: int
    version: int
    text: str


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


class StoryTree:
    """What the front end calls for /undo, /redo, takes, /edit, /branch, /savepoint, /tree."""

    def __init__(self, db: Database, queue: AdventureQueue | None = None) -> None:
        self.db = db
        self.queue = queue

    # --- shared ---

    async def _adventure(
        self, session: AsyncSession, channel_id: int, seen_version: int | None
    ) -> Adventure:
        adventure = await active_adventure(session, channel_id)
        if adventure is None or adventure.head_node_id is None:
            raise NotFound(NO_ADVENTURE)
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
        await session.execute(
            update(StoryNode)
            .where(StoryNode.id == adventure.head_node_id)
            .values(state_after=leaving)
        )
        values: dict[str, Any] = {
            "head_node_id": target.id,
            "version": Adventure.version + 1,
            "updated_at": utcnow(),
        }
        if branch_id is not None:
            values["active_branch_id"] = branch_id
        moved = await session.execute(
            update(Adventure)
            .where(Adventure.id == adventure.id, Adventure.version == expected)
            .values(**values)
        )
        if moved.rowcount != 1:
            raise StoryMovedOn(MOVED_ON)
        await restore(session, adventure.id, snapshot)
        if kept_through is not None:
            await story_cut_back(session, adventure.id, kept_through=kept_through)
        return expected + 1

    async def _branch_name(self, session: AsyncSession, branch_id: int | None) -> str:
        if branch_id is None:
            return ""
        return await session.scalar(select(Branch.name).where(Branch.id == branch_id)) or ""

    async def _can_redo(self, session: AsyncSession, head_id: int, branch_id: int | None) -> bool:
        if branch_id is None:
            return False
        tip = await session.scalar(select(Branch.tip_node_id).where(Branch.id == branch_id))
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
        )

    async def check_retry(self, actor: Actor, channel_id: int, *, is_manager: bool = False) -> None:
        """Whether ``actor`` may retry the newest turn here; raises the reason if not. Asked
        before a retry is queued, so a refusal is told to the player alone."""
        async with self.db.session() as session:
            adventure = await active_adventure(session, channel_id)
            if adventure is None or adventure.head_node_id is None:
                raise NotFound(NO_ADVENTURE)
            head = await self._head(session, adventure)
            if head.parent_id is None or head.role != Role.NARRATOR:
                raise InvalidInput(
                    "There is no narrator turn to retry yet: the story is at its opening."
                )
            await check_may_rewrite(session, adventure, head, actor, is_manager)

    # --- undo and redo ---

    async def undo(
        self,
        actor: Actor,
        channel_id: int,
        *,
        seen_version: int | None = None,
        is_manager: bool = False,
    ) -> HeadMove:
        """Move the head back over the newest turn (its action and narration); delete nothing."""
        async with self.db.session() as session, session.begin():
            adventure = await self._adventure(session, channel_id, seen_version)
            head = await self._head(session, adventure)
            if head.parent_id is None:
                raise InvalidInput("There is nothing to undo: the story is at its opening.")
            await check_may_rewrite(session, adventure, head, actor, is_manager)
            # The turn is the head and, when a player acted, the action above it.
            stretch = await line_tail(session, head.id, 3)  # oldest first
            removed = [head]
            for node in reversed(stretch[:-1]):
                if is_turn_boundary(node):
                    target = node
                    break
                removed.append(node)
            else:  # pragma: no cover - a line always starts with the opening, a narrator node
                raise NotFound("This story has no earlier turn to go back to.")
            # The state before the oldest removed node is exactly the state at the target.
            snapshot = await state_before_of(session, removed[-1].id) or await state_after(
                session, adventure, target
            )
            version = await self._move(
                session, adventure, target, snapshot, kept_through=target.index
            )
            return await self._result(
                session,
                adventure,
                target,
                version,
                adventure.active_branch_id,
                removed=tuple(n.id for n in removed),
            )

    async def redo(
        self,
        actor: Actor,
        channel_id: int,
        *,
        seen_version: int | None = None,
        is_manager: bool = False,
    ) -> HeadMove:
        """Walk the head one turn toward its branch's tip again."""
        async with self.db.session() as session, session.begin():
            adventure = await self._adventure(session, channel_id, seen_version)
            head = await self._head(session, adventure)
            tip_id = None
            if adventure.active_branch_id is not None:
                tip_id = await session.scalar(
                    select(Branch.tip_node_id).where(Branch.id == adventure.active_branch_id)
                )
            tip = await session.get(StoryNode, tip_id) if tip_id is not None else None
            if tip is None or tip.id == head.id or tip.index <= head.index:
                raise InvalidInput("There is nothing to redo: this is the newest turn.")
            stretch = await line_tail(session, tip.id, tip.index - head.index + 1)
            if not stretch or stretch[0].id != head.id:
                raise InvalidInput("There is nothing to redo on this branch from here.")
            restored: list[StoryNode] = []
            for node in stretch[1:]:
                restored.append(node)
                if is_turn_boundary(node):
                    break
            target = restored[-1]
            await check_may_rewrite(session, adventure, target, actor, is_manager)
            snapshot = await state_after(session, adventure, target)
            version = await self._move(session, adventure, target, snapshot)
            return await self._result(
                session,
                adventure,
                target,
                version,
                adventure.active_branch_id,
                restored=tuple(n.id for n in restored),
            )

    # --- takes and edits ---

    async def choose_take(
        self,
        actor: Actor,
        channel_id: int,
        node_id: int,
        number: int,
        *,
        seen_version: int | None = None,
        is_manager: bool = False,
    ) -> HeadMove:
        """Make take ``number`` of the newest turn live again (text and resulting state)."""
        async with self.db.session() as session, session.begin():
            adventure = await self._adventure(session, channel_id, seen_version)
            node = await self._head(session, adventure)
            if node.id != node_id:
                raise StoryMovedOn(MOVED_ON)
            if not 1 <= number <= node.take_count:
                raise InvalidInput(
                    f"This turn has {node.take_count} take(s); there is no take {number}."
                )
            await check_may_rewrite(session, adventure, node, actor, is_manager)
            await self._refuse_if_continued(session, node)
            take = await session.scalar(
                select(Take)
                .where(Take.node_id == node.id, Take.number == number)
                .options(undefer(Take.text), undefer(Take.reasoning), undefer(Take.state_after))
            )
            if take is None:
                raise NotFound(f"Take {number} of this turn is missing.")
            kept = dict(take.state_after or {})
            block = kept.pop("state_block", None)
            report = kept.pop("state_report", None)
            await session.execute(
                update(StoryNode)
                .where(StoryNode.id == node.id)
                .values(
                    text=take.text,
                    reasoning=take.reasoning,
                    token_count=count_tokens(take.text),
                    state_after=kept or None,
                    state_block=block,
                    state_report=report,
                    live_take=number,
                )
            )
            snapshot = kept or await self._before_turn(session, adventure, node)
            # The head stays; only its text and state change. _move records the state it
            # leaves into state_after, so write the take's again afterwards.
            version = await self._move(
                session, adventure, node, snapshot, kept_through=node.index - 1
            )
            await session.execute(
                update(StoryNode).where(StoryNode.id == node.id).values(state_after=kept or None)
            )
            await session.refresh(node)
            return await self._result(session, adventure, node, version, adventure.active_branch_id)

    async def _before_turn(
        self, session: AsyncSession, adventure: Adventure, node: StoryNode
    ) -> dict[str, Any]:
        assert node.id is not None
        own = await state_before_of(session, node.id)
        if own is not None:
            return own
        if node.parent_id is not None:
            parent_state = await state_before_of(session, node.parent_id)
            if parent_state is not None:
                return parent_state
        return capture(adventure.world_state, adventure.script_state)

    @staticmethod
    async def _refuse_if_continued(session: AsyncSession, node: StoryNode) -> None:
        assert node.id is not None
        if await has_children(session, node.id):
            raise InvalidInput(
                "Later turns (undone ones, or another branch's) follow this one, so its text "
                "cannot be swapped under them. Retry writes a new version on a branch of its "
                "own."
            )

    async def turn_to_edit(
        self, actor: Actor, channel_id: int, *, is_manager: bool = False
    ) -> TurnText:
        """The newest turn's text, for a form prefilled with it (checked before it opens)."""
        async with self.db.session() as session:
            adventure = await self._adventure(session, channel_id, None)
            node = await self._head(session, adventure)
            await check_may_rewrite(session, adventure, node, actor, is_manager)
            await self._refuse_if_continued(session, node)
            if len(node.text) > EDIT_MAX_CHARS:
                raise InvalidInput(
                    f"This turn is {len(node.text)} characters long, more than a form holds "
                    f"({EDIT_MAX_CHARS}); it cannot be edited here. Retry or Undo it instead."
                )
            assert adventure.id is not None and node.id is not None
            return TurnText(adventure.id, node.id, adventure.version, node.text)

    async def edit(
        self,
        actor: Actor,
        channel_id: int,
        text: str,
        *,
        node_id: int,
        seen_version: int,
        is_manager: bool = False,
    ) -> HeadMove:
        """Correct the newest turn's text; the original stays as a take."""
        text = text.strip()
        if not text:
            raise InvalidInput("A turn cannot be empty; nothing was changed.")
        if len(text) > EDIT_MAX_CHARS:
            raise InvalidInput(f"A turn can be at most {EDIT_MAX_CHARS} characters long.")
        async with self.db.session() as session, session.begin():
            adventure = await active_adventure(session, channel_id)
            if adventure is None or adventure.version != seen_version:
                raise StoryMovedOn("The story moved on while the form was open; nothing was saved.")
            adventure = await self._adventure(session, channel_id, seen_version)
            node = await self._head(session, adventure)
            if node.id != node_id:
                raise StoryMovedOn("The story moved on while the form was open; nothing was saved.")
            await check_may_rewrite(session, adventure, node, actor, is_manager)
            await self._refuse_if_continued(session, node)
            if text == node.text:
                raise InvalidInput("The text is unchanged; nothing was saved.")
            expected = adventure.version
            row = (
                await session.execute(
                    select(
                        StoryNode.state_after, StoryNode.state_block, StoryNode.state_report
                    ).where(StoryNode.id == node.id)
                )
            ).one()
            await add_take(
                session,
                node,
                text=text,
                reasoning=None,
                snapshot=row.state_after,
                block=row.state_block,
                report=row.state_report,
            )
            # Memories of the old wording no longer match the story.
            await story_cut_back(session, adventure.id, kept_through=node.index - 1)
            moved = await session.execute(
                update(Adventure)
                .where(Adventure.id == adventure.id, Adventure.version == expected)
                .values(version=Adventure.version + 1, updated_at=utcnow())
            )
            if moved.rowcount != 1:
                raise StoryMovedOn("The story moved on while the form was open; nothing was saved.")
            await session.refresh(node)
            return await self._result(
                session, adventure, node, expected + 1, adventure.active_branch_id
            )

    # --- branches ---

    async def branches(self, channel_id: int) -> list[BranchView]:
        async with self.db.session() as session:
            adventure = await active_adventure(session, channel_id)
            if adventure is None:
                raise NotFound(NO_ADVENTURE)
            saves = (
                select(SavePoint.branch_id, func.count().label("n"))
                .where(SavePoint.adventure_id == adventure.id)
                .group_by(SavePoint.branch_id)
                .subquery()
            )
            rows = await session.execute(
                select(Branch.id, Branch.name, Branch.created_at, StoryNode.index, saves.c.n)
                .join(StoryNode, StoryNode.id == Branch.tip_node_id, isouter=True)
                .join(saves, saves.c.branch_id == Branch.id, isouter=True)
                .where(Branch.adventure_id == adventure.id)
                .order_by(Branch.created_at, Branch.id)
            )
            return [
                BranchView(
                    row.name,
                    row.index or 0,
                    row.id == adventure.active_branch_id,
                    row.n or 0,
                    row.created_at,
                )
                for row in rows
            ]

    async def _find_branch(self, session: AsyncSession, adventure: Adventure, name: str) -> Branch:
        branch = await session.scalar(
            select(Branch).where(Branch.adventure_id == adventure.id, Branch.name == name.strip())
        )
        if branch is None:
            raise NotFound(
                f"There is no branch called “{name.strip()}” here; /branch list shows them."
            )
        return branch

    @staticmethod
    def _valid_name(name: str, what: str) -> str:
        name = " ".join(name.split())
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

    async def new_branch(
        self, actor: Actor, channel_id: int, name: str, *, is_manager: bool = False
    ) -> HeadMove:
        """Start a branch at the head and make it active (the story itself does not move)."""
        name = self._valid_name(name, "branch")
        async with self.db.session() as session, session.begin():
            adventure = await self._adventure(session, channel_id, None)
            await check_may_steer_story(session, adventure, actor, is_manager)
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
            return await self._result(session, adventure, head, version, branch.id)

    async def switch_branch(
        self, actor: Actor, channel_id: int, name: str, *, is_manager: bool = False
    ) -> HeadMove:
        """Go to a branch's tip, with that line's world state, script state and clocks."""
        async with self.db.session() as session, session.begin():
            adventure = await self._adventure(session, channel_id, None)
            await check_may_steer_story(session, adventure, actor, is_manager)
            head = await self._head(session, adventure)
            branch = await self._find_branch(session, adventure, name)
            if branch.id == adventure.active_branch_id and branch.tip_node_id == head.id:
                raise InvalidInput(f"The story is already at the tip of “{branch.name}”.")
            if branch.tip_node_id is None:
                raise NotFound(f"The branch “{branch.name}” has lost its turns.")
            target = await session.get(StoryNode, branch.tip_node_id)
            assert target is not None
            return await self._go(session, adventure, head, target, branch.id)

    async def _go(
        self,
        session: AsyncSession,
        adventure: Adventure,
        head: StoryNode,
        target: StoryNode,
        branch_id: int | None,
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
        )

    async def rename_branch(
        self, actor: Actor, channel_id: int, name: str, new_name: str, *, is_manager: bool = False
    ) -> str:
        new_name = self._valid_name(new_name, "branch")
        async with self.db.session() as session, session.begin():
            adventure = await self._adventure(session, channel_id, None)
            await check_may_steer_story(session, adventure, actor, is_manager)
            branch = await self._find_branch(session, adventure, name)
            if branch.name == new_name:
                raise InvalidInput(f"The branch is already called “{new_name}”.")
            await self._check_free(session, Branch, adventure.id, new_name, "branch")
            old = branch.name
            branch.name = new_name
            await self._bump(session, adventure)
            return f"Branch “{old}” is now called “{new_name}”."

    async def delete_branch(
        self, actor: Actor, channel_id: int, name: str, *, is_manager: bool = False
    ) -> str:
        """Forget a branch's name; its turns stay (other lines may borrow them)."""
        async with self.db.session() as session, session.begin():
            adventure = await self._adventure(session, channel_id, None)
            await check_may_steer_story(session, adventure, actor, is_manager)
            branch = await self._find_branch(session, adventure, name)
            if branch.id == adventure.active_branch_id:
                raise InvalidInput(
                    f"“{branch.name}” is the branch the story is on; switch to another first."
                )
            saves = list(
                await session.scalars(
                    select(SavePoint.name).where(SavePoint.branch_id == branch.id)
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

    @staticmethod
    async def _bump(session: AsyncSession, adventure: Adventure) -> None:
        moved = await session.execute(
            update(Adventure)
            .where(Adventure.id == adventure.id, Adventure.version == adventure.version)
            .values(version=Adventure.version + 1, updated_at=utcnow())
        )
        if moved.rowcount != 1:
            raise StoryMovedOn("The story moved on meanwhile; nothing was changed.")

    # --- save points ---

    async def add_save_point(
        self, actor: Actor, channel_id: int, name: str, *, is_manager: bool = False
    ) -> SavePointView:
        name = self._valid_name(name, "save point")
        async with self.db.session() as session, session.begin():
            adventure = await self._adventure(session, channel_id, None)
            await check_may_steer_story(session, adventure, actor, is_manager)
            head = await self._head(session, adventure)
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
            adventure = await active_adventure(session, channel_id)
            if adventure is None:
                raise NotFound(NO_ADVENTURE)
            rows = await session.execute(
                select(
                    SavePoint.name, SavePoint.node_id, Branch.name.label("branch"), StoryNode.index
                )
                .join(Branch, Branch.id == SavePoint.branch_id, isouter=True)
                .join(StoryNode, StoryNode.id == SavePoint.node_id)
                .where(SavePoint.adventure_id == adventure.id)
                .order_by(SavePoint.created_at, SavePoint.id)
            )
            return [
                SavePointView(r.name, r.branch or "", r.index, r.node_id == adventure.head_node_id)
                for r in rows
            ]

    async def _find_save_point(
        self, session: AsyncSession, adventure: Adventure, name: str
    ) -> SavePoint:
        point = await session.scalar(
            select(SavePoint).where(
                SavePoint.adventure_id == adventure.id, SavePoint.name == name.strip()
            )
        )
        if point is None:
            raise NotFound(
                f"There is no save point called “{name.strip()}” here; /savepoint list shows them."
            )
        return point

    async def restore_save_point(
        self, actor: Actor, channel_id: int, name: str, *, is_manager: bool = False
    ) -> HeadMove:
        """Go back (or over) to a save point: a head move onto its node and branch."""
        async with self.db.session() as session, session.begin():
            adventure = await self._adventure(session, channel_id, None)
            await check_may_steer_story(session, adventure, actor, is_manager)
            head = await self._head(session, adventure)
            point = await self._find_save_point(session, adventure, name)
            if point.node_id == head.id:
                raise InvalidInput(f"The story is already at “{point.name}”.")
            target = await session.get(StoryNode, point.node_id)
            assert target is not None
            return await self._go(session, adventure, head, target, point.branch_id)

    async def delete_save_point(
        self, actor: Actor, channel_id: int, name: str, *, is_manager: bool = False
    ) -> str:
        async with self.db.session() as session, session.begin():
            adventure = await self._adventure(session, channel_id, None)
            await check_may_steer_story(session, adventure, actor, is_manager)
            point = await self._find_save_point(session, adventure, name)
            await session.delete(point)
            return f"Save point “{point.name}” deleted; the story is unchanged."

    # --- the picture ---

    async def picture(self, channel_id: int) -> str:
        """The story's shape as text: each branch, where it leaves its parent, its save points,
        and where the head stands. Light columns of the nodes only."""
        async with self.db.session() as session:
            adventure = await active_adventure(session, channel_id)
            if adventure is None:
                raise NotFound(NO_ADVENTURE)
            branches = list(
                await session.scalars(
                    select(Branch)
                    .where(Branch.adventure_id == adventure.id)
                    .order_by(Branch.created_at, Branch.id)
                )
            )
            lines = {
                b.id: await ancestry(session, b.tip_node_id)
                for b in branches
                if b.tip_node_id is not None
            }
            head_line = (
                await ancestry(session, adventure.head_node_id) if adventure.head_node_id else {}
            )
            points = list(
                await session.execute(
                    select(SavePoint.name, SavePoint.branch_id, StoryNode.index)
                    .join(StoryNode, StoryNode.id == SavePoint.node_id)
                    .where(SavePoint.adventure_id == adventure.id)
                    .order_by(SavePoint.id)
                )
            )
        return draw_tree(
            branches, lines, adventure.active_branch_id, adventure.head_node_id, head_line, points
        )
