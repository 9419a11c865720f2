"""Who may rewrite a turn (retry, undo, edit, choose a take) and who may change branches and
save points."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from engine.errors import NotAllowed
from engine.storage.models import (
    Adventure,
    Role,
    StoryNode,
    User,
)

if TYPE_CHECKING:
    from engine.access import Actor


def may_rewrite(
    adventure: Adventure, user_id: int, is_manager: bool, author_id: int | None
) -> bool:
    """Who may retry, undo or edit a turn: its action's author, the host, server managers.

    In a DM the player owns the story (server permissions mean nothing there).
    """
    if adventure.server_id is None:
        return user_id in {adventure.owner_id, adventure.host_id, author_id} - {None}
    return is_manager or user_id in {adventure.host_id, author_id} - {None}


async def turn_author(session: AsyncSession, node: StoryNode) -> int | None:
    """Who wrote the action a narrator turn answers (or asked it to go on)."""
    if node.author_id is not None or node.parent_id is None:
        return node.author_id
    parent = await session.get(StoryNode, node.parent_id)
    if parent is not None and parent.role == Role.PLAYER:
        return parent.author_id
    return None


async def check_may_rewrite(
    session: AsyncSession, adventure: Adventure, node: StoryNode, actor: Actor, is_manager: bool
) -> None:
    author = await turn_author(session, node)
    if may_rewrite(adventure, actor.user_id, is_manager, author):
        return
    if adventure.server_id is None:
        raise NotAllowed("Only this adventure's player can change its turns.")
    host = ""
    if adventure.host_id is not None:
        host = await session.scalar(select(User.name).where(User.id == adventure.host_id)) or ""
    who = f"{host} (the host)" if host else "the adventure's host"
    raise NotAllowed(
        f"Only the player who wrote that turn, {who} and members who can manage the server or "
        "its messages can retry, undo or edit it."
    )


async def check_may_steer_story(
    session: AsyncSession, adventure: Adventure, actor: Actor, is_manager: bool
) -> None:
    """Branches and save points move everyone's story: the host's and managers' to change."""
    if may_rewrite(adventure, actor.user_id, is_manager, None):
        return
    if adventure.server_id is None:
        raise NotAllowed("Only this adventure's player can change its branches and save points.")
    host = ""
    if adventure.host_id is not None:
        host = await session.scalar(select(User.name).where(User.id == adventure.host_id)) or ""
    who = f"{host} (the host)" if host else "the adventure's host"
    raise NotAllowed(
        f"Only {who} and members who can manage the server or its messages can change "
        "branches and save points."
    )
