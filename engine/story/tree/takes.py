"""A turn's takes (its attempts: retries and edits) and what a retry regenerates from.

The node's own columns always hold the live take; take rows exist only once a turn has a
second attempt, and hold only what differs (text, reasoning, resulting state), never the prompt.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from engine.errors import InvalidInput, NotFound
from engine.prompt.tokens import count_tokens
from engine.storage.models import Adventure, Role, StoryNode, Take
from engine.story.line.read import state_after, state_before_of


def take_state(
    snapshot: dict[str, Any] | None, block: str | None, report: dict[str, Any] | None
) -> dict[str, Any]:
    """A take's resulting state: a snapshot (``engine.story.snapshots`` shape) with the state block
    and referee report the take came with, so choosing it again restores all three."""
    return {**(snapshot or {}), "state_block": block, "state_report": report}


async def keep_first_take(session: AsyncSession, node: StoryNode) -> None:
    """Store the node's original content as take 1 the first time a second take arrives
    (a turn that is never retried keeps no take rows at all)."""
    if node.take_count > 1:
        return
    assert node.id is not None  # a stored row
    exists = await session.scalar(
        select(col(Take.id)).where(col(Take.node_id) == node.id, col(Take.number) == 1).limit(1)
    )
    if exists is not None:
        return
    row = await session.execute(
        select(
            col(StoryNode.text),
            col(StoryNode.reasoning),
            col(StoryNode.state_after),
            col(StoryNode.state_block),
            col(StoryNode.state_report),
        ).where(col(StoryNode.id) == node.id)
    )
    original = row.one()
    session.add(
        Take(
            node_id=node.id,
            number=1,
            text=original.text,
            reasoning=original.reasoning,
            state_after=take_state(
                original.state_after, original.state_block, original.state_report
            ),
        )
    )
    await session.flush()


async def add_take(
    session: AsyncSession,
    node: StoryNode,
    *,
    text: str,
    reasoning: str | None,
    snapshot: dict[str, Any] | None,
    block: str | None,
    report: dict[str, Any] | None,
    extra: dict[str, Any] | None = None,
) -> int:
    """Append a take to ``node`` and make it live; returns its number."""
    assert node.id is not None  # a stored row
    await keep_first_take(session, node)
    number = node.take_count + 1
    session.add(
        Take(
            node_id=node.id,
            number=number,
            text=text,
            reasoning=reasoning,
            state_after=take_state(snapshot, block, report),
        )
    )
    await session.execute(
        update(StoryNode)
        .where(col(StoryNode.id) == node.id)
        .values(
            text=text,
            reasoning=reasoning,
            token_count=count_tokens(text),
            state_after=snapshot,
            state_block=block,
            state_report=report,
            live_take=number,
            take_count=number,
            **(extra or {}),
        )
    )
    return number


@dataclass(frozen=True, slots=True)
class RetryPlan:
    """What a retry of the newest turn regenerates from."""

    node_id: int
    node_index: int
    parent_id: int
    parent_is_narrator: bool
    #: The line the new take's context is built on: the turn's parent, or the parent's parent
    #: when a player acted (whose action is then given again as the turn's action).
    context_head_id: int
    action_text: str
    #: The adventure's state before the turn.
    snapshot: dict[str, Any]


async def plan_retry(session: AsyncSession, adventure: Adventure) -> RetryPlan:
    if adventure.head_node_id is None:
        raise NotFound("This adventure has no story yet.")
    node = await session.get(StoryNode, adventure.head_node_id)
    if node is None or node.parent_id is None or node.role != Role.NARRATOR:
        raise InvalidInput("There is no narrator turn to retry yet: the story is at its opening.")
    parent = await session.get(StoryNode, node.parent_id)
    assert parent is not None and parent.id is not None and node.id is not None
    if parent.role == Role.PLAYER and parent.parent_id is not None:
        context_head, action_text, before_of = parent.parent_id, parent.text, parent.id
    else:
        context_head, action_text, before_of = parent.id, "", node.id
    snapshot = await state_before_of(session, before_of)
    if snapshot is None:
        head = await session.get(StoryNode, context_head)
        assert head is not None
        snapshot = await state_after(session, adventure, head)
    return RetryPlan(
        node_id=node.id,
        node_index=node.index,
        parent_id=parent.id,
        parent_is_narrator=parent.role == Role.NARRATOR,
        context_head_id=context_head,
        action_text=action_text,
        snapshot=snapshot,
    )
