"""The story tree: takes, undo and redo, edits, branches and save points.

Nothing here deletes a turn. The adventure's *head* is where the story stands; each *branch*
names a line of play by its *tip*; branches borrow their ancestors' nodes instead of copying
them. Undo moves the head back to the previous narrator turn and leaves the tip where it was,
so Redo walks toward it again. Writing below a head that is not its branch's tip forks a new
branch (``advance_line``). A node's takes are its attempts (retries and edits); the node's own
columns always hold the live take, so reading the story never touches the takes table.

The shared steps of every head move live in ``core``; branches and save points in ``branches``;
edits of any entry of the current line in ``edits``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from engine.errors import InvalidInput, NotFound, StoryMovedOn
from engine.people.access.checks import check_may_rewrite
from engine.prompt.tokens import count_tokens
from engine.storage.models import Adventure, Branch, StoryNode, Take, undefer_field
from engine.story.line.read import (
    has_children,
    is_turn_boundary,
    line_tail,
    state_after,
    state_before_of,
)
from engine.story.rounds import ROUND_MAX
from engine.story.snapshots import capture

if TYPE_CHECKING:
    from engine.people.access.rules import Actor
from engine.story.tree.branches import BranchesAndSavePoints
from engine.story.tree.core import MOVED_ON, HeadMove
from engine.story.tree.edits import EntryEdits

NOTHING_TO_UNDO = "There is nothing to undo: the story is at its opening."
#: How far back (in story entries) a reported turn may be undone from its report.
UNDO_BACK_MAX = 200


def _ids(nodes: list[StoryNode]) -> tuple[int, ...]:
    ids = tuple(node.id for node in nodes if node.id is not None)
    assert len(ids) == len(nodes)  # nodes read from the database, each with its id
    return ids


class StoryTree(BranchesAndSavePoints, EntryEdits):
    """What the front end calls for /undo, /redo, takes, /edit, /branch, /savepoint, /tree."""

    # --- where the story stands ---

    async def head_now(self, channel_id: int) -> HeadMove:
        """Where the story here stands, as a move that changed nothing: what a front end needs
        to show the newest turn's buttons again when it lost the message that had them (the
        console, whose stand-in for Discord starts empty each run)."""
        async with self.db.session() as session:
            adventure = await self._adventure(session, channel_id, None)
            head = await self._head(session, adventure)
            return await self._result(
                session, adventure, head, adventure.version, adventure.active_branch_id
            )

    # --- undo and redo ---

    async def undo(
        self,
        actor: Actor,
        channel_id: int,
        *,
        seen_version: int | None = None,
        drawn_for: int | None = None,
    ) -> HeadMove:
        """Move the head back over the newest turn (its action and narration); delete nothing."""
        async with self.db.transaction() as session:
            adventure = await self._adventure(session, channel_id, seen_version, drawn_for)
            head = await self._head(session, adventure)
            if head.parent_id is None:
                raise InvalidInput(NOTHING_TO_UNDO)
            await check_may_rewrite(session, adventure, head, actor)
            assert head.id is not None  # a stored row
            # The turn is the head and, when players acted, their actions above it.
            # A round's turn has an action node per player (engine.story.rounds).
            stretch = await line_tail(session, head.id, ROUND_MAX + 2)  # oldest first
            return await self._back_before(session, adventure, stretch, len(stretch) - 1, actor)

    async def undo_back_to(
        self, actor: Actor, channel_id: int, adventure_id: int, node_id: int
    ) -> HeadMove:
        """Move the head back to before narrator turn ``node_id`` (its actions included), the
        turns after it leaving the line with it: what a moderator does with a reported turn.
        Nothing is deleted; Redo walks forward again. Refused where the story no longer passes
        through that turn, or it lies more than ``UNDO_BACK_MAX`` entries back."""
        async with self.db.transaction() as session:
            adventure = await self._adventure(session, channel_id, None, adventure_id)
            head = await self._head(session, adventure)
            node = await session.get(StoryNode, node_id)
            assert head.id is not None  # a stored row
            if node is None or node.adventure_id != adventure.id or node.parent_id is None:
                raise NotFound("That turn is no longer in this story.")
            back = head.index - node.index
            if back > UNDO_BACK_MAX:
                raise InvalidInput(
                    f"That turn is {back} entries back; going back so far is done with "
                    "/tree and /branch, where nothing is lost."
                )
            stretch = await line_tail(session, head.id, back + ROUND_MAX + 2)  # oldest first
            at = next((i for i, step in enumerate(stretch) if step.id == node_id), None)
            if at is None or back < 0:
                raise InvalidInput(
                    "The story no longer passes through that turn (it was undone, or the story "
                    "is on another branch now), so there is nothing to undo."
                )
            await check_may_rewrite(session, adventure, node, actor)
            return await self._back_before(session, adventure, stretch, at, actor)

    async def _back_before(
        self,
        session: AsyncSession,
        adventure: Adventure,
        stretch: list[StoryNode],
        at: int,
        actor: Actor,
    ) -> HeadMove:
        """Put the head on the turn before ``stretch[at]`` and the actions that asked for it:
        everything after that turn leaves the line (``stretch`` is the line's end, oldest
        first)."""
        removed = list(reversed(stretch[at:]))  # newest first
        for node in reversed(stretch[:at]):
            if is_turn_boundary(node):
                target = node
                break
            removed.append(node)
        else:  # pragma: no cover - a line always starts with the opening, a narrator node
            raise NotFound("This story has no earlier turn to go back to.")
        removed_ids = _ids(removed)
        # The state before the oldest removed node is exactly the state at the target.
        snapshot = await state_before_of(session, removed_ids[-1]) or await state_after(
            session, adventure, target
        )
        version = await self._move(session, adventure, target, snapshot, kept_through=target.index)
        return await self._result(
            session,
            adventure,
            target,
            version,
            adventure.active_branch_id,
            removed=removed_ids,
            mover=actor,
        )

    async def redo(
        self,
        actor: Actor,
        channel_id: int,
        *,
        seen_version: int | None = None,
        drawn_for: int | None = None,
    ) -> HeadMove:
        """Walk the head one turn toward its branch's tip again."""
        async with self.db.transaction() as session:
            adventure = await self._adventure(session, channel_id, seen_version, drawn_for)
            head = await self._head(session, adventure)
            tip_id = None
            if adventure.active_branch_id is not None:
                tip_id = await session.scalar(
                    select(col(Branch.tip_node_id)).where(
                        col(Branch.id) == adventure.active_branch_id
                    )
                )
            tip = await session.get(StoryNode, tip_id) if tip_id is not None else None
            if tip is None or tip.id == head.id or tip.index <= head.index:
                raise InvalidInput("There is nothing to redo: this is the newest turn.")
            assert tip.id is not None  # a stored row
            stretch = await line_tail(session, tip.id, tip.index - head.index + 1)
            if not stretch or stretch[0].id != head.id:
                raise InvalidInput("There is nothing to redo on this branch from here.")
            restored: list[StoryNode] = []
            for node in stretch[1:]:
                restored.append(node)
                if is_turn_boundary(node):
                    break
            target = restored[-1]
            await check_may_rewrite(session, adventure, target, actor)
            snapshot = await state_after(session, adventure, target)
            version = await self._move(session, adventure, target, snapshot)
            return await self._result(
                session,
                adventure,
                target,
                version,
                adventure.active_branch_id,
                restored=_ids(restored),
                mover=actor,
            )

    # --- takes (edits: ``edits``) ---

    async def choose_take(
        self,
        actor: Actor,
        channel_id: int,
        node_id: int,
        number: int,
        *,
        seen_version: int | None = None,
        drawn_for: int | None = None,
    ) -> HeadMove:
        """Make take ``number`` of the newest turn live again (text and resulting state)."""
        async with self.db.transaction() as session:
            adventure = await self._adventure(session, channel_id, seen_version, drawn_for)
            node = await self._head(session, adventure)
            if node.id != node_id:
                raise StoryMovedOn(MOVED_ON)
            if not 1 <= number <= node.take_count:
                raise InvalidInput(
                    f"This turn has {node.take_count} take(s); there is no take {number}."
                )
            await check_may_rewrite(session, adventure, node, actor)
            await self._refuse_if_continued(session, node)
            take = await session.scalar(
                select(Take)
                .where(col(Take.node_id) == node.id, col(Take.number) == number)
                .options(
                    undefer_field(Take.text),
                    undefer_field(Take.reasoning),
                    undefer_field(Take.state_after),
                )
            )
            if take is None:
                raise NotFound(f"Take {number} of this turn is missing.")
            kept = dict(take.state_after or {})
            block = kept.pop("state_block", None)
            report = kept.pop("state_report", None)
            await session.execute(
                update(StoryNode)
                .where(col(StoryNode.id) == node.id)
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
                update(StoryNode)
                .where(col(StoryNode.id) == node.id)
                .values(state_after=kept or None)
            )
            await session.refresh(node)
            return await self._result(
                session, adventure, node, version, adventure.active_branch_id, mover=actor
            )

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
        return capture(adventure.world_state, adventure.script_state, story=adventure.story_state)

    @staticmethod
    async def _refuse_if_continued(session: AsyncSession, node: StoryNode) -> None:
        assert node.id is not None
        if await has_children(session, node.id):
            raise InvalidInput(
                "Later turns (undone ones, or another branch's) follow this one, so its text "
                "cannot be swapped under them. Retry writes a new version on a branch of its "
                "own."
            )
